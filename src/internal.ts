// internal.ts: test- and bench-only access to the native layer. Not exported from the package
// index: nothing here is part of the public API, and it may change with any release.
// The native functions are the test addon's (test/native/, built into build/Release/nn_arena_test.so
// by `npm run build:test-addon`, which vitest's global setup runs): the shipped addon has none.
// That addon never sees an arena handle: it reads an arena's device side from its address, as a
// user's native module would.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Arena } from './arena/arena.js';
import { ArenaError } from './core/errors.js';
import { publicHeader, type KernelParam } from './arena/jit.js';
import { packageRoot } from './native/loader.js';
import { call, type DecodedHeader, type LinkRates, type ResidencyCounters, type RunParams } from './native/addon.js';

export { runArena } from './arena/arena.js';
export { kernelKey } from './arena/jit.js';

/** The modes of csrc/train/run_modes.h RunModes. */
export type RunMode =
  | 'half'
  | 'crossBias'
  | 'crossPhase'
  | 'stepsTogether'
  | 'lt'
  | 'ltForward'
  | 'besides'
  | 'head'
  | 'headFused'
  | 'scaling'
  | 'headRounds'
  | 'biasInOutput'
  | 'graphs';

export interface TestAddon {
  decodeHeader(bytes: Uint8Array): DecodedHeader;
  replayResidency(
    header: Uint8Array,
    placement: 'managed' | 'staged',
    budget: number,
    runs: RunParams[],
  ): { error: string; phases: number; counters: ResidencyCounters };
  /** The native phase table (csrc/train/phases.h) of one step of a planned header, in the form of
   *  the shipped stepPhases (csrc/addon/phases_js.h): uses are [layer, kind, reads]. */
  headerPhases(
    header: Uint8Array,
    op: number,
    resident: boolean,
    fused: boolean,
  ): Array<{ stage: string; layer: number; uses: Array<[number, string, boolean]> }>;
  /** The per-layer CUDA path's modes (csrc/train/run_modes.h) for RunModeInputs' fields
   *  (precision by name, op by code; an absent field keeps its default). */
  runModes(inputs: Record<string, boolean | number | string>): Record<RunMode, boolean>;
  measureLink(bytes: number): LinkRates;
  probeBind(deviceAddress: bigint, layers: number, cuda: boolean): BigUint64Array;
  deviceHeader(deviceAddress: bigint, totalBytes: number, cuda: boolean): DecodedHeader;
  /** A mapped read of `path` after the file was cut to nothing, inside the SIGBUS guard
   *  (csrc/addon/fault_guard.h): [the guarded read's result (false: faulted), a later one's]. */
  mappedReadAfterCut(path: string): [boolean, boolean];
  /** Compiles a JIT kernel for `arch` without a device: the CUBIN's size. */
  jitCompileOnly(source: string, name: string, params: string[], header: string, arch: string): number;
  CopyBench: new (cuda: boolean, sizes: number[], pinned: boolean) => { run(dir: 'toDevice' | 'toHost'): number; dispose(): void };
}

/** The checkout holding binding.gyp (src/ sits below it; the bench's bundle two levels below). */
function checkoutRoot(): string {
  let dir = packageRoot();
  while (!existsSync(join(dir, 'binding.gyp')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

let loaded: TestAddon | undefined;

/** The test addon, loaded once. NO_ADDON names the command that builds it. */
export function testAddon(): TestAddon {
  if (loaded) return loaded;
  const file = join(checkoutRoot(), 'build', 'Release', 'nn_arena_test.so');
  if (!existsSync(file))
    throw new ArenaError('NO_ADDON', `the test addon ${file} is not built: npm run build:test-addon (in a checkout; the package does not ship it)`);
  const m = { exports: {} as TestAddon };
  try {
    process.dlopen(m, file);
  } catch (e) {
    throw new ArenaError(
      'NO_ADDON',
      `the test addon ${file} could not be loaded: ${(e as Error).message.split('\n')[0]}; rebuild it with npm run build:test-addon`,
      { cause: e },
    );
  }
  return (loaded = m.exports);
}

/** Offsets that binding code computes from the arena's device-side base alone (a CUDA kernel,
 *  or nna_bind on the CPU backend's stand-in buffer): ~0 for absent regions. */
export function probeBind(arena: Arena): BigUint64Array {
  return call(() => testAddon().probeBind(arena.deviceAddress, arena.plan.spec.layers.length, arena.backend === 'cuda'));
}

/** The header as it stands in device memory, decoded natively. */
export function deviceHeader(arena: Arena): DecodedHeader {
  return call(() => testAddon().deviceHeader(arena.deviceAddress, arena.plan.totalBytes, arena.backend === 'cuda'));
}

/** Compiles without a device for `arch` ("sm_90"); the CUBIN's size. */
export function compileOnly(source: string, name: string, params: readonly KernelParam[], arch: string): number {
  return call(() => testAddon().jitCompileOnly(source, name, [...params], publicHeader(), arch));
}
