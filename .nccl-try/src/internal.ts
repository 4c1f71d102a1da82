// internal.ts: test- and bench-only access to the native layer. Not exported from the package
// index: nothing here is part of the public API, and it may change with any release.
import { handleOf } from './arena.js';
import type { Arena } from './arena.js';
import { call, native, type DecodedHeader } from './native.js';

export { runArena } from './arena.js';

/** Offsets that binding code computes from the arena's device-side base alone (a CUDA kernel,
 *  or nna_bind on the CPU backend's stand-in buffer): ~0 for absent regions. */
export function probeBind(arena: Arena): BigUint64Array {
  return call(() => native().internal.probeBind(handleOf(arena)));
}

/** The header as it stands in device memory, decoded natively. */
export function deviceHeader(arena: Arena): DecodedHeader {
  return call(() => native().internal.deviceHeader(handleOf(arena)));
}

export { compileOnly, kernelKey } from './jit.js';
