// arena-options.ts: the options of Arena.create, apart from the Arena class so that modules the
// class uses (checkpoint.ts) can name them without importing it.
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

