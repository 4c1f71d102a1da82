// arena.ts: one network's memory as exactly one host allocation and one device allocation.
// The plan decides every offset; this class only allocates, moves byte ranges and hands out
// zero-copy views. Counters come from the native layer, at the real memcpy / cudaMemcpy calls.
import { ArenaError, fromNative, OptionError } from '../core/errors.js';
import type { Dtype, Kind } from '../layout/header.js';
import { requirePlan, type Plan } from '../layout/plan.js';
import { call, cudaInfo, MEMORY_KINDS, native, type NativeHandle, type NativeStats, type RunParams, type RunPath } from '../native/addon.js';
import { flatten, selectRanges, type Selector } from '../layout/selector.js';
import {
  cutRanges,
  readCheckpoint,
  readCheckpointAsync,
  saveArena,
  saveArenaAsync,
  type CheckpointInfo,
  type LoadOptions,
  type OpenCheckpoint,
  type SaveOptions,
} from '../checkpoint/checkpoint.js';
import { residencyOption, residencyReport, type ResidencyReport } from './residency.js';
import { compileKernel, type Kernel, type KernelParam } from './jit.js';
import { RunQueue } from './run-queue.js';
import { checkKnownKeys, keysOf } from '../core/known-keys.js';
import { registerRunTarget, type RunTarget as AnyRunTarget } from './run-target.js';
import { notifyTransfer as notify, notifyRanges, type TransferEvent, type TransferResult } from './transfer-events.js';
import {
  ARENA_KEYS,
  loadOptionsOf,
  resolveBackend,
  type Advice,
  type ArenaOptions,
  type BackendName,
  type Location,
  type MemoryKind,
  type View,
  type ViewOf,
} from './arena-options.js';
import { viewKey, viewRange } from './view-range.js';
import { WrittenRegions } from './written.js';

export type { TransferEvent, TransferResult } from './transfer-events.js';
export type { Advice, ArenaOptions, BackendName, Location, MemoryKind, View, ViewOf } from './arena-options.js';

const SAVE_KEYS = keysOf<SaveOptions>()(['kinds', 'data', 'steps', 'metadata', 'onProgress']);

export type ArenaStats = NativeStats;

/** Internal: the live native handle of `arena` (ArenaError DISPOSED once disposed), for the
 *  modules of this package only (runArena below, the Trainer, DataParallel); not part of the public API.
 *  Set by the class's static block: it is the class's own #live(). */
export let handleOf: (arena: Arena) => NativeHandle;

/** Internal: the arena's run queue (Trainer runs and kernel launches take their turns on it). */
export let queueOf: (arena: Arena) => RunQueue;

/** Internal: the first upload of a new arena sends only what was written on the host (see
 *  Arena.#written); later ones, or any once the device side may have been written, the whole
 *  arena. Returns what moved. */
export let uploadWritten: (arena: Arena) => TransferResult;

/** What a Trainer trains: an Arena or a DataParallel group of Arenas (src/arena/run-target.ts). */
export type RunTarget = AnyRunTarget<Arena>;

/** The largest ArrayBuffer a native view makes (csrc/addon/arena_handle.cc: VIEW_TOO_LARGE). */
const MAX_ARRAY_BUFFER = 2 ** 32 - 1;

const disposers = new WeakMap<Arena, Array<() => void>>();

/** Internal: calls `fn` when `arena` is disposed, before its memory goes (buffers kept with an
 *  arena for its next use: src/train/stream-fit.ts). */
export function onDispose(arena: Arena, fn: () => void): void {
  const list = disposers.get(arena) ?? [];
  disposers.set(arena, list);
  list.push(fn);
}

/** Internal: exact byte ranges within the regions `regions` selects, one transfer each (the
 *  Trainer uploads only the rows of a data set that is smaller than its regions). */
export function transferRanges(arena: Arena, dir: TransferEvent['dir'], regions: Selector, ranges: readonly number[]): TransferResult {
  call(() => handleOf(arena).transfer(dir, [...ranges]));
  return notifyRanges(arena, dir, regions, ranges);
}

/** Internal: one native run on `arena` (the Trainer's only way in). Every failure, also one in
 *  converting the parameters, comes as a rejected promise with an ArenaError. */
export async function runArena(arena: Arena, params: RunParams): Promise<RunPath> {
  try {
    return await handleOf(arena).run(params);
  } catch (e) {
    throw fromNative(e);
  }
}

export class Arena<D extends Dtype = Dtype> implements Disposable, AsyncDisposable {
  readonly plan: Plan<D>;
  readonly backend: BackendName;
  readonly memory: MemoryKind;
  readonly pinned: boolean;
  /** Bytes of the arena the device may hold (managed or staged memory); undefined: no budget. */
  readonly deviceBudget: number | undefined;
  /** The CUDA device the arena lives on (0 on the CPU backend). */
  readonly device: number;
  #handle: NativeHandle;
  #views = new Map<string, View | Uint8Array>();
  /** One ArrayBuffer over the whole host allocation that every view and bytes() slices: each
   *  native view costs a finalizer record that only a turn of the event loop frees, so a
   *  synchronous loop of create / view / dispose grew by kilobytes a view. Arenas past the 4 GiB
   *  of one ArrayBuffer take one native view per call instead. */
  #host: ArrayBuffer | undefined;
  #disposed = false;
  // What the host side holds that a new arena's device side does not (src/arena/written.ts). #fresh:
  // the device side holds only what create() put there (nothing ran, nothing was transferred,
  // no device address or native handle was handed out).
  readonly #written: WrittenRegions;
  #fresh = true;
  readonly #queue = new RunQueue();
  readonly #kernels = new Map<string, Kernel>();

  private constructor(
    plan: Plan<D>,
    handle: NativeHandle,
    backend: BackendName,
    memory: MemoryKind,
    pinned: boolean,
    deviceBudget: number | undefined,
    device: number,
  ) {
    this.plan = plan;
    this.#written = new WrittenRegions(plan);
    this.device = device;
    this.#handle = handle;
    this.backend = backend;
    this.memory = memory;
    this.pinned = pinned;
    this.deviceBudget = deviceBudget;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the getter below has the registry entry as its this
    const self = this;
    registerRunTarget(this, {
      kind: 'arena',
      arenas: [this],
      rank: 0,
      world: 1,
      get disposed() {
        return self.#disposed;
      },
      run: (params) => runArena(this, params[0]!),
    });
    Object.freeze(this); // plan, backend and the rest cannot be swapped under the views
  }

  /** Allocates the plan's totalBytes once on the host and once on the device, zeroed, with the
   *  header written at offset 0 of both (the device copy is one counted transfer). */
  static create<D extends Dtype>(plan: Plan<D>, options: ArenaOptions = {}): Arena<D> {
    requirePlan(plan);
    if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object');
    checkKnownKeys(options, ARENA_KEYS, 'Arena.create');
    const memory = options.memory === undefined ? 'device' : options.memory;
    if (memory !== 'device' && memory !== 'managed' && memory !== 'staged') {
      throw new OptionError('BAD_OPTION', 'memory', memory, "must be 'device', 'managed' or 'staged'");
    }
    const budget = options.deviceBudget;
    // A budget (or staged memory, which needs one) is checked before the backend is chosen, so a
    // bad one is reported alike on every machine; the rules themselves are native, in one place.
    if (budget !== undefined || memory === 'staged')
      call(() => native().checkDeviceBudget(plan.header, MEMORY_KINDS[memory], budget as number | undefined), { deviceBudget: budget });
    const scheduled = residencyOption(memory, budget, options.residency);
    const backend = resolveBackend(options.backend);
    if (memory !== 'device' && backend !== 'cuda') {
      throw new ArenaError('NOT_SUPPORTED', `${memory} memory needs the CUDA backend; this arena would use the CPU backend (${cudaInfo().why || 'requested'})`);
    }
    const device = options.device ?? 0;
    if (typeof device !== 'number' || !Number.isSafeInteger(device) || device < 0)
      throw new OptionError('BAD_OPTION', 'device', device, 'must be a CUDA device index (an integer >= 0)');
    if (device !== 0 && backend !== 'cuda')
      throw new OptionError('BAD_OPTION', 'device', device, `the CPU backend has only device 0 (${cudaInfo().why || 'backend: cpu'})`);
    const pinned = backend === 'cuda' ? (options.pinned ?? true) : false;
    // The device budget is checked once, natively, before anything is allocated.
    const handle = call(
      () =>
        new (native().ArenaHandle)(plan.header, {
          cuda: backend === 'cuda',
          pinned,
          memory: MEMORY_KINDS[memory],
          ...(budget === undefined ? {} : { budget: budget as number }),
          scheduled,
          device,
        }),
      { deviceBudget: budget, device },
    );
    return new Arena(plan, handle, backend, memory, pinned, budget, device);
  }

  /** Opens a checkpoint written by save(): every header and the checksum are checked before
   *  anything is allocated; the regions the file holds then go to the device (one transfer
   *  where they are contiguous). Regions it does not hold (the data set, by default) are zero. */
  static load(path: string, options: ArenaOptions = {}): Arena {
    return loadArena(path, options).arena;
  }

  /** load() without blocking the event loop (fs promises; the upload in steps), with an
   *  optional `onProgress({ bytes, totalBytes })` after each chunk read. */
  static async loadAsync(path: string, options: ArenaOptions = {}, loadOptions: LoadOptions = {}): Promise<Arena> {
    return (await loadArenaAsync(path, options, loadOptions)).arena;
  }

  /** Writes the host side to `path`: the header and every region but the resident data set
   *  (`data: true` adds it; `kinds` picks regions), as a checksummed file written to a
   *  temporary name and renamed. Call toHost() first for device-side results. */
  save(path: string, options: SaveOptions = {}): number {
    this.#live();
    if (options !== null && typeof options === 'object') checkKnownKeys(options, SAVE_KEYS, 'save');
    return saveArena(this, path, options);
  }

  /** save() without blocking the event loop, queued behind the work queued on this arena
   *  (Trainer runs, kernel launches); `onProgress({ bytes, totalBytes })` after each chunk
   *  written. Resolves to the file's size. Leave the host side unchanged until it settles. */
  async saveAsync(path: string, options: SaveOptions = {}): Promise<number> {
    this.#live();
    if (options !== null && typeof options === 'object') checkKnownKeys(options, SAVE_KEYS, 'saveAsync');
    return this.#queue.enqueue(() => saveArenaAsync(this, path, options));
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  #live(): NativeHandle {
    if (this.#disposed) throw new ArenaError('DISPOSED', 'the arena was disposed');
    return this.#handle;
  }

  static {
    handleOf = (arena) => {
      arena.#fresh = false;
      return arena.#live();
    };
    queueOf = (arena) => arena.#queue;
    uploadWritten = (arena) => arena.#uploadWritten();
  }

  #uploadWritten(): TransferResult {
    const h = this.#live();
    const up = this.#fresh ? this.#written.upload() : 'all';
    if (up === 'all') return this.toDevice();
    this.#fresh = false;
    if (up.ranges.length === 0) return { transfers: 0, bytes: 0 };
    const bytes = call(() => h.transfer('toDevice', up.ranges));
    return notify(this, 'toDevice', { kinds: up.kinds }, { transfers: up.ranges.length / 2, bytes });
  }

  /** A typed array over a region of the host allocation: writes go straight into the arena.
   *  `view(layer, kind)` for a built-in kind or a per-layer user region; `view(name, layer?)` by
   *  name (a global user region: no layer). A user region of raw bytes is a Uint8Array.
   *  With `models: K` in the plan, `model` picks one model's copy of a per-model region (shared
   *  regions have one copy, model 0, whichever model is asked); without it the view spans every
   *  copy (model m's at m * stride / element bytes). Detached (length 0) once the arena is disposed. */
  view(layer: number, kind: Kind, model?: number): ViewOf<D>;
  view(layer: number, kind: string, model?: number): ViewOf<D> | Uint8Array;
  view(name: string, layer?: number, model?: number): ViewOf<D> | Uint8Array;
  view(a: number | string, b?: number | string, model?: number): View | Uint8Array {
    const h = this.#live();
    const k = viewKey(this.plan, a, b, model);
    const cached = this.#views.get(k.key);
    if (cached) return cached;
    const { offset, bytes, raw, elem } = viewRange(this.plan, k, model);
    const [buf, at] = this.#hostRange(h, offset, bytes);
    this.#written.mark(offset, bytes);
    const v = raw ? new Uint8Array(buf, at, bytes) : elem === 8 ? new Float64Array(buf, at, bytes / 8) : new Float32Array(buf, at, bytes / 4);
    this.#views.set(k.key, v);
    return v;
  }

  /** Raw bytes of [offset, offset + bytes) of the host allocation (header included). */
  bytes(offset = 0, bytes = this.plan.totalBytes - offset): Uint8Array {
    const h = this.#live();
    const [buf, at] = this.#hostRange(h, offset, bytes);
    this.#written.mark(offset, bytes);
    return new Uint8Array(buf, at, bytes);
  }

  /** The buffer and offset in it of host bytes [offset, offset + bytes) (checked natively). */
  #hostRange(h: NativeHandle, offset: number, bytes: number): [ArrayBuffer, number] {
    const total = this.plan.totalBytes;
    if (total > MAX_ARRAY_BUFFER || !Number.isSafeInteger(offset) || !Number.isSafeInteger(bytes) || offset < 0 || bytes < 0 || offset + bytes > total) {
      return [call(() => h.view(offset, bytes)), 0];
    }
    this.#host ??= call(() => h.view(0, total));
    return [this.#host, offset];
  }

  #transfer(dir: 'toDevice' | 'toHost', sel?: Selector): TransferResult {
    const h = this.#live();
    this.#fresh = false;
    if (sel === undefined) return notify(this, dir, sel, { transfers: 1, bytes: call(() => h.transferAll(dir)) });
    const ranges = selectRanges(this.plan, sel);
    const bytes = call(() => h.transfer(dir, flatten(ranges)));
    return notify(this, dir, sel, { transfers: ranges.filter((r) => r.bytes > 0).length, bytes });
  }

  /** Host -> device. No selector: the whole arena in one transfer. */
  toDevice(selector?: Selector): TransferResult {
    return this.#transfer('toDevice', selector);
  }

  /** Device -> host. No selector: the whole arena in one transfer. */
  toHost(selector?: Selector): TransferResult {
    return this.#transfer('toHost', selector);
  }

  /** Managed memory only: cudaMemPrefetchAsync of the selected ranges (then synchronised). */
  prefetch(selector: Selector | undefined, location: Location): void {
    const h = this.#live();
    this.#fresh = false;
    if (location !== 'device' && location !== 'host') throw new OptionError('BAD_OPTION', 'location', location, "must be 'device' or 'host'");
    const ranges = selectRanges(this.plan, selector);
    call(() => h.prefetch(flatten(ranges), location));
  }

  /** Managed memory only: cudaMemAdvise on the selected ranges. */
  advise(selector: Selector | undefined, advice: Advice, options: { location?: Location; unset?: boolean } = {}): void {
    const h = this.#live();
    if (!['readMostly', 'preferredLocation', 'accessedBy'].includes(advice)) {
      throw new OptionError('BAD_OPTION', 'advice', advice, "must be 'readMostly', 'preferredLocation' or 'accessedBy'");
    }
    const ranges = selectRanges(this.plan, selector);
    call(() => h.advise(flatten(ranges), advice, options.location ?? 'device', options.unset ?? false));
  }

  /** Budgeted arenas (deviceBudget): per layer where its regions are (managed: where they were
   *  last prefetched, from cudaMemRangeGetAttribute; staged: pool or host), what the last run
   *  moved, and the device memory it took at its peak. */
  residency(): ResidencyReport {
    const h = this.#live();
    return residencyReport(call(() => h.residency()));
  }

  /** Allocation and transfer counters, kept by the native layer (readable after dispose). */
  get stats(): ArenaStats {
    return this.#handle.stats();
  }

  /** Base of the host allocation, for a native module of your own (csrc/include/nn_arena.h). */
  get hostAddress(): bigint {
    const a = call(() => this.#live().addresses().host);
    this.#written.markAll(); // your code may write anywhere
    return a;
  }

  /** Base of the device allocation (a device pointer on CUDA; the stand-in buffer on CPU). */
  get deviceAddress(): bigint {
    const a = call(() => this.#live().addresses().device);
    this.#fresh = false; // your code may write the device side
    return a;
  }

  /** Resolves once nothing is queued or in flight on this arena (Trainer runs, kernel launches);
   *  nn-arena then leaves no device work pending, so your own code may use the memory
   *  (docs/embedding.md). Also after dispose(), until a run in flight has ended. */
  async synchronize(): Promise<void> {
    await this.#queue.drain();
    await this.#handle.synchronize();
  }

  /** CUDA: compiles `name` from CUDA C++ `source` with NVRTC (cached by source); the kernel
   *  takes the device base then `params` (src/arena/jit.ts, docs/embedding.md). */
  compileKernel(source: string, name: string, params: readonly KernelParam[] = []): Kernel {
    this.#fresh = false; // its launches write the device side
    return compileKernel({ backend: this.backend, live: () => this.#live(), queue: this.#queue, kernels: this.#kernels }, source, name, params);
  }

  /** Frees both allocations exactly once and detaches every view. Safe to call again. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#views.clear();
    this.#host = undefined;
    for (const fn of disposers.get(this) ?? []) fn();
    disposers.delete(this);
    call(() => this.#handle.dispose());
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /** `await using arena = Arena.create(plan)`: waits for what is queued or in flight on the
   *  arena (synchronize()), then disposes it. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#disposed) await this.synchronize();
    this.dispose();
  }
}

/** The arena a checkpoint describes, allocated once its memory is known to be there. */
function arenaFor<R>(cp: OpenCheckpoint<R>, options: ArenaOptions): Arena {
  const o = loadOptionsOf(options);
  if (o !== null && typeof o === 'object') cp.checkMemory(o);
  return Arena.create(cp.info.plan, o);
}

/** Internal (Arena.load, Trainer.load): a checked checkpoint as a new arena, one open and one
 *  pass over the file, the regions read straight into the host side while the checksum runs;
 *  only a verified arena is sent to the device: the regions the file held (one transfer where
 *  they are contiguous). */
export function loadArena(path: string, options: ArenaOptions): { arena: Arena; info: CheckpointInfo } {
  if (options !== null && typeof options === 'object') checkKnownKeys(options, ARENA_KEYS, 'Arena.load');
  return readCheckpoint(path, (cp) => {
    const arena = arenaFor(cp, options);
    try {
      cp.readInto(arena);
      if (cp.ranges.length) transferRanges(arena, 'toDevice', { kinds: cp.kinds }, flatten(cp.ranges));
    } catch (e) {
      arena.dispose();
      throw e;
    }
    return { arena, info: cp.info };
  });
}

/** Bytes sent up between two turns of the event loop by loadArenaAsync. */
const UPLOAD_STEP = 256 * 2 ** 20;

/** Internal (Arena.loadAsync, Trainer.loadAsync): loadArena over fs promises, the upload in steps. */
export async function loadArenaAsync(path: string, options: ArenaOptions, loadOptions: LoadOptions): Promise<{ arena: Arena; info: CheckpointInfo }> {
  if (options !== null && typeof options === 'object') checkKnownKeys(options, ARENA_KEYS, 'Arena.loadAsync');
  return readCheckpointAsync(path, loadOptions, async (cp) => {
    const arena = arenaFor(cp, options);
    try {
      await cp.readInto(arena);
      for (const r of cutRanges(cp.ranges, UPLOAD_STEP)) {
        transferRanges(arena, 'toDevice', { kinds: cp.kinds }, [r.offset, r.bytes]);
        await new Promise<void>((done) => setImmediate(done));
      }
    } catch (e) {
      arena.dispose();
      throw e;
    }
    return { arena, info: cp.info };
  });
}
