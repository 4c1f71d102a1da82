// window.ts: what a streamed source (src/train/stream.ts, shuffle-buffer.ts) fills and how
// fit() (src/train/stream-fit.ts) takes it: a window of rows in host buffers.
import type { View } from '../arena/arena.js';
import type { Dtype } from '../layout/header.js';

/** A window's buffers: rows from 0, x and y (targets, one-hot rows for labels). */
export interface WindowBuffers {
  x: View;
  y: View;
}

/** What a fill wrote: its rows (0: the epoch's source is exhausted), and the name of element i
 *  of the window's x or y as the user knows it (e.g. 'batch 3.x[17]', 'x[6017]'). */
export interface Filled {
  rows: number;
  where(kind: 'x' | 'y', i: number): string;
}

/** Writes up to `max` rows into `into` from row 0. */
export type Fill = (max: number, into: WindowBuffers) => Promise<Filled>;

/** The network's widths and dtype, which a source's rows must fit. */
export interface StreamTarget {
  inputs: number;
  outputs: number;
  dtype: Dtype;
}

/** A batch being copied: x (any numeric typed array, read in place) and its target rows; `at` is
 *  the next row. */
export interface Batch {
  x: ArrayLike<number>;
  y: ArrayLike<number>;
  count: number;
  at: number;
  index: number;
}

/** A typed array's own bytes (no copy): what the native copies and checksums take. */
export const viewBytes = (v: ArrayBufferView) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

// The typed array method itself: a subclass or own property cannot stand in for it.
type Cut = (this: ArrayLike<number>, a: number, b: number) => ArrayLike<number>;
export const { subarray } = Object.getPrototypeOf(Int8Array.prototype) as { subarray: Cut };
