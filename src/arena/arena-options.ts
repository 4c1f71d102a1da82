// arena-options.ts: what Arena.create and Arena.load take (ArenaOptions), checked once here, and
// the view types a plan's dtype gives.
import { OptionError } from '../core/errors.js';
import { keysOf } from '../core/known-keys.js';
import type { Dtype } from '../layout/header.js';
import { cudaInfo } from '../native/addon.js';
import type { ResidencyMode } from './residency.js';

export type BackendName = 'cpu' | 'cuda';
export type MemoryKind = 'device' | 'managed' | 'staged';
export type Advice = 'readMostly' | 'preferredLocation' | 'accessedBy';
export type Location = 'device' | 'host';

export interface ArenaOptions {
  /** 'auto' (default) picks CUDA when a device is present, else the CPU backend. */
  backend?: 'auto' | BackendName;
  /** Device side: cudaMalloc ('device', default), cudaMallocManaged ('managed'), or 'staged':
   *  the device side in pinned host memory with a device pool of deviceBudget bytes that
   *  regions are copied into as training needs them (CUDA only). */
  memory?: MemoryKind;
  /** CUDA only: the device index (default 0); every allocation, transfer and run of the arena
   *  happens on it. */
  device?: number;
  /** CUDA only: page-locked host memory via cudaMallocHost (default true). */
  pinned?: boolean;
  /** Managed or staged memory: bytes of the arena the device may hold at once (at least what
   *  the largest phase of a training step needs, see minDeviceBudget). Training then keeps the
   *  device's share within it (README, "Device budgets"). */
  deviceBudget?: number;
  /** Managed memory with a budget: 'scheduler' (default) prefetches what each phase needs ahead
   *  of it and evicts what is not needed soon; 'on-demand' leaves it to page faults, and the
   *  budget is only measured against (arena.residency()). */
  residency?: ResidencyMode;
}

export const ARENA_KEYS = keysOf<ArenaOptions>()(['backend', 'memory', 'device', 'pinned', 'deviceBudget', 'residency']);

export type View = Float32Array | Float64Array;

/** The view of a plan of dtype D: Float32Array for float32, Float64Array for float64 (either
 *  where D is not known). */
export type ViewOf<D extends Dtype> = D extends 'float64' ? Float64Array : D extends 'float32' ? Float32Array : View;

export function resolveBackend(b: ArenaOptions['backend']): BackendName {
  if (b === undefined || b === 'auto') {
    const info = cudaInfo();
    return info.built && info.devices > 0 ? 'cuda' : 'cpu';
  }
  if (b !== 'cpu' && b !== 'cuda') throw new OptionError('BAD_OPTION', 'backend', b, "must be 'auto', 'cpu' or 'cuda'");
  return b;
}

/** The arena options that decide where a loaded arena's memory comes from, read once: the
 *  memory check and the allocation see the same values. */
export function loadOptionsOf(options: ArenaOptions): ArenaOptions {
  if (options === null || typeof options !== 'object') return options;
  const { backend, memory, device, pinned, deviceBudget, residency } = options;
  return { backend, memory, device, pinned, deviceBudget, residency };
}
