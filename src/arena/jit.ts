// jit.ts: CUDA kernels written in JS strings, compiled at run time by NVRTC (found when first
// needed, never at build time) and launched on an arena's device memory. The kernel's first
// parameter is the arena's device base (bind regions with nn_arena.h, which the source may
// #include); the rest follow the signature given at compile time, checked by the compiler.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ArenaError, fromNative, OptionError } from '../core/errors.js';
import { call, native, type NativeHandle } from '../native/addon.js';
import { packageRoot } from '../native/loader.js';
import type { RunQueue } from './run-queue.js';

/** What a kernel needs of its arena (the Arena passes its own; this module never imports it). */
export interface KernelHost {
  readonly backend: 'cpu' | 'cuda';
  /** The live native handle (ArenaError DISPOSED once the arena is disposed). */
  live(): NativeHandle;
  /** The arena's run queue: launches take their turn with the Trainer's runs. */
  readonly queue: RunQueue;
  /** The arena's compiled kernels by kernelKey. */
  readonly kernels: Map<string, Kernel>;
}

/** Parameter types after the base pointer: f32 float, f64 double, i32 int, u32 unsigned int,
 *  i64 long long, u64 unsigned long long. */
export type KernelParam = 'f32' | 'f64' | 'i32' | 'u32' | 'i64' | 'u64';
const PARAMS: readonly KernelParam[] = ['f32', 'f64', 'i32', 'u32', 'i64', 'u64'];

/** A grid or block: x, or [x, y?, z?]. */
export type Dims = number | readonly [number, number?, number?];
export interface LaunchConfig {
  grid: Dims;
  block: Dims;
  sharedBytes?: number;
}

/** f32 / f64: a number; the integer types: an exact integer number or a bigint in range. */
export type KernelArg = number | bigint;

let headerText: string | undefined;
/** The public header as the package ships it. */
export function publicHeader(): string {
  headerText ??= readFileSync(join(packageRoot(), 'csrc', 'include', 'nn_arena.h'), 'utf8');
  return headerText;
}

/** Internal: the cache key of a kernel of one arena (the native side also caches the compiled
 *  module per device architecture, for every arena of the process). */
export function kernelKey(source: string, name: string, params: readonly KernelParam[]): string {
  return createHash('sha256').update(name).update('\0').update(params.join(',')).update('\0').update(source).digest('hex');
}

function dims(v: unknown, field: string): [number, number, number] {
  const a = typeof v === 'number' ? [v] : Array.isArray(v) && v.length >= 1 && v.length <= 3 ? v : undefined;
  const ok = (x: unknown) => Number.isInteger(x) && (x as number) >= 1 && (x as number) <= 0x7fffffff;
  if (!a || !a.every(ok)) throw new OptionError('BAD_OPTION', field, v, 'must be a positive integer or [x, y?, z?] of positive integers');
  return [a[0], a[1] ?? 1, a[2] ?? 1];
}

function checkArg(p: KernelParam, v: unknown, i: number): KernelArg {
  const field = `args[${i}]`;
  if (p === 'f32' || p === 'f64') {
    if (typeof v !== 'number') throw new OptionError('BAD_OPTION', field, v, `must be a number (${p})`);
    return v;
  }
  const [lo, hi] = { i32: [-(2n ** 31n), 2n ** 31n - 1n], u32: [0n, 2n ** 32n - 1n], i64: [-(2n ** 63n), 2n ** 63n - 1n], u64: [0n, 2n ** 64n - 1n] }[p];
  const big = typeof v === 'bigint' ? v : typeof v === 'number' && Number.isSafeInteger(v) ? BigInt(v) : undefined;
  if (big === undefined || big < lo! || big > hi!)
    throw new OptionError('BAD_OPTION', field, v, `must be an integer in [${lo}, ${hi}] (${p}), as a safe-integer number or a bigint`);
  return v as KernelArg;
}

/** A compiled kernel bound to one arena. */
export class Kernel {
  readonly name: string;
  readonly params: readonly KernelParam[];
  readonly #arena: KernelHost;
  readonly #id: number;

  /** @internal */
  constructor(arena: KernelHost, name: string, params: readonly KernelParam[], id: number) {
    this.#arena = arena;
    this.name = name;
    this.params = params;
    this.#id = id;
  }

  /** Launches with the arena's device base first, then `args`; resolves once the kernel has
   *  completed. Queued with the arena's runs in call order (after a Trainer step called before
   *  it, before one called after it); while it runs, transfers are BUSY. */
  async launch(config: LaunchConfig, ...args: KernelArg[]): Promise<void> {
    if (config === null || typeof config !== 'object') throw new OptionError('BAD_OPTION', 'config', config, 'must be { grid, block, sharedBytes? }');
    const grid = dims(config.grid, 'grid'),
      block = dims(config.block, 'block');
    const shared = config.sharedBytes ?? 0;
    if (!Number.isInteger(shared) || shared < 0 || shared > 0xffffffff)
      throw new OptionError('BAD_OPTION', 'sharedBytes', shared, 'must be an integer in [0, 2^32)');
    if (args.length !== this.params.length) {
      throw new OptionError(
        'BAD_OPTION',
        'args',
        args,
        `kernel '${this.name}' takes ${this.params.length} argument(s) after the base pointer (${this.params.join(', ') || 'none'})`,
      );
    }
    const checked = this.params.map((p, i) => checkArg(p, args[i], i));
    this.#arena.live(); // DISPOSED now rather than when its turn comes
    return this.#arena.queue.enqueue(async () => {
      try {
        await native().jitLaunch(this.#arena.live(), this.#id, grid, block, shared, checked);
      } catch (e) {
        throw fromNative(e);
      }
    });
  }
}

/** Internal: Arena.compileKernel. */
export function compileKernel(arena: KernelHost, source: string, name: string, params: readonly KernelParam[] = []): Kernel {
  if (typeof source !== 'string' || source.length === 0) throw new OptionError('BAD_OPTION', 'source', source, 'must be a non-empty string of CUDA C++');
  if (typeof name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
    throw new OptionError('BAD_OPTION', 'name', name, 'must be the C identifier of an extern "C" __global__ function');
  // Array.from reads a hole as undefined (every() would skip it)
  if (!Array.isArray(params) || !Array.from(params, (p) => PARAMS.includes(p)).every(Boolean))
    throw new OptionError('BAD_OPTION', 'params', params, `must be an array of ${PARAMS.join(', ')}`);
  const h = arena.live();
  if (arena.backend !== 'cuda')
    throw new ArenaError(
      'NOT_SUPPORTED',
      "JIT kernels need the CUDA backend; this arena uses the CPU backend (create it with { backend: 'cuda' } on a machine with a GPU)",
    );
  const key = kernelKey(source, name, params);
  const cached = arena.kernels.get(key);
  if (cached) return cached;
  const id = call(() => native().jitCompile(h, source, name, [...params], publicHeader()));
  const k = new Kernel(arena, name, Object.freeze([...params]), id);
  arena.kernels.set(key, k);
  return k;
}
