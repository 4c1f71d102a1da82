// shuffle-buffer.ts: how a shuffled iterable source (src/train/stream.ts) fills its windows,
// tf.data's shuffle buffer: B rows are held, each window row is drawn uniformly at random (the
// fit's seeded Rng) from them, and its place taken by the source's next row. An iterable has no
// random access, so this is not a uniform shuffle of the whole source: a row leaves at most
// about B draws before or after its place in the source (early rows come out early), and the
// larger B, the closer to uniform. Once the source is exhausted the buffer drains.
import type { View } from '../arena.js';
import type { Rng } from './rng.js';
import { subarray, type Batch, type Filled, type StreamTarget, type WindowBuffers } from './window.js';

/** The batch holding the source's next row, or undefined once it is exhausted. */
export type Head = () => Batch | undefined | Promise<Batch | undefined>;

/** `w` values of `src` from `at` into `dst` from `to`: a short row (one-hot targets) by a loop,
 *  cheaper than the subarray a longer one is set through. */
function copyRow(dst: View, to: number, src: ArrayLike<number>, at: number, w: number): void {
  if (w > 32) dst.set(subarray.call(src, at, at + w), to);
  else for (let i = 0; i < w; i++) dst[to + i] = src[at + i]!;
}

export class ShuffleBuffer {
  readonly #x: View;
  readonly #y: View;
  readonly #batch: Int32Array;  // where each held row came from, for errors
  readonly #row: Float64Array;
  #count = 0;

  constructor(private readonly t: StreamTarget, readonly size: number) {
    const V = t.dtype === 'float64' ? Float64Array : Float32Array;
    this.#x = new V(size * t.inputs) as View;
    this.#y = new V(size * t.outputs) as View;
    this.#batch = new Int32Array(size);
    this.#row = new Float64Array(size);
  }

  /** Empties the buffer (a new epoch). */
  reset(): void { this.#count = 0; }

  /** Up to `max` rows drawn into `into` (0: the source and the buffer are exhausted). */
  async fill(max: number, into: WindowBuffers, head: Head, rng: Rng): Promise<Filled> {
    const { inputs: wx, outputs: wy } = this.t;
    const batchOf = new Int32Array(max), rowOf = new Float64Array(max);
    while (this.#count < this.size) {  // the epoch's first fill
      let b = head();
      if (b instanceof Promise) b = await b;
      if (!b) break;
      this.#put(b, this.#count++);
    }
    let rows = 0;
    while (rows < max && this.#count > 0) {
      const j = rng.int(this.#count);
      copyRow(into.x, rows * wx, this.#x, j * wx, wx);
      copyRow(into.y, rows * wy, this.#y, j * wy, wy);
      batchOf[rows] = this.#batch[j]!;
      rowOf[rows++] = this.#row[j]!;
      let b = head();
      if (b instanceof Promise) b = await b;
      if (b) this.#put(b, j);
      else this.#move(--this.#count, j);
    }
    return {
      rows,
      where(kind: 'x' | 'y', i: number) {
        const width = kind === 'x' ? wx : wy, row = Math.floor(i / width);
        return `batch ${batchOf[row]}.${kind}[${rowOf[row]! * width + (i % width)}]`;
      },
    };
  }

  /** Row b.at of b into slot j (b.at moves on). */
  #put(b: Batch, j: number): void {
    const { inputs: wx, outputs: wy } = this.t;
    copyRow(this.#x, j * wx, b.x, b.at * wx, wx);
    copyRow(this.#y, j * wy, b.y, b.at * wy, wy);
    this.#batch[j] = b.index;
    this.#row[j] = b.base + b.at++;
  }

  /** Slot `from` into slot `to` (the last row into a drawn one's place). */
  #move(from: number, to: number): void {
    if (from === to) return;
    const { inputs: wx, outputs: wy } = this.t;
    this.#x.copyWithin(to * wx, from * wx, (from + 1) * wx);
    this.#y.copyWithin(to * wy, from * wy, (from + 1) * wy);
    this.#batch[to] = this.#batch[from]!;
    this.#row[to] = this.#row[from]!;
  }
}
