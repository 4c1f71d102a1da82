// shuffle-buffer.ts: how a shuffled iterable source (src/train/stream.ts) fills its windows,
// tf.data's shuffle buffer: B rows are held, each window row is drawn uniformly at random (the
// fit's seeded Rng) from them, and its place taken by the source's next row. An iterable has no
// random access, so this is not a uniform shuffle of the whole source: a row leaves at most
// about B draws before or after its place in the source (early rows come out early), and the
// larger B, the closer to uniform. Once the source is exhausted the buffer drains.
// The rows are held natively (csrc/addon/shuffle_pool.cc): a batch's rows are copied in once,
// and window rows out, in parallel off the JS thread; the draws are made there with the same
// generator (the fit's Rng state goes in and comes back), so a seed gives the same order as
// drawing here would.
import { fromNative } from '../core/errors.js';
import { call, native, type NativeShufflePool } from '../native/addon.js';
import type { Rng } from './rng.js';
import { subarray, viewBytes, type Batch, type Filled, type StreamTarget, type WindowBuffers } from './window.js';

/** The batch holding the source's next row, or undefined once it is exhausted. */
export type Head = () => Batch | undefined | Promise<Batch | undefined>;

export class ShuffleBuffer {
  readonly #pool: NativeShufflePool;
  readonly #state = new BigUint64Array(1);

  constructor(
    private readonly t: StreamTarget,
    readonly size: number,
  ) {
    const bpe = t.dtype === 'float64' ? 8 : 4;
    this.#pool = call(() => new (native().ShufflePool)(size, t.inputs * bpe, t.outputs * bpe));
  }

  /** Empties the buffer (a new epoch). */
  reset(): void {
    call(() => this.#pool.reset());
  }

  /** Frees the held rows (once a copy in flight ends). */
  dispose(): void {
    this.#pool.dispose();
  }

  /** Up to `max` rows drawn into `into` (0: the source and the buffer are exhausted). */
  async fill(max: number, into: WindowBuffers, head: Head, rng: Rng): Promise<Filled> {
    const { inputs: wx, outputs: wy } = this.t;
    const where = new Float64Array(2 * max),
      ox = viewBytes(into.x),
      oy = viewBytes(into.y);
    let rows = 0;
    while (rows < max) {
      const h = head();
      const b = h instanceof Promise ? await h : h;
      this.#state[0] = rng.bits;
      const [taken, out, done] = b
        ? call(() => this.#pool.push(this.#rows(b.x, b, wx), this.#rows(b.y, b, wy), b.index, b.at, ox, oy, rows, max - rows, this.#state, where))
        : [0, ...call(() => this.#pool.drain(ox, oy, rows, max - rows, this.#state, where))];
      rng.bits = this.#state[0]!;
      try {
        await done;
      } catch (e) {
        throw fromNative(e);
      }
      rows += out;
      if (!b) break;
      b.at += taken;
    }
    return {
      rows,
      where(kind: 'x' | 'y', i: number) {
        const width = kind === 'x' ? wx : wy,
          row = Math.floor(i / width);
        return `batch ${where[2 * row]}.${kind}[${where[2 * row + 1]! * width + (i % width)}]`;
      },
    };
  }

  /** The rows of `b` from b.at of `v` (row width `w`) as bytes of the window's type: in place
   *  where `v` is of that type, else converted (a copy). */
  #rows(v: ArrayLike<number>, b: Batch, w: number): Uint8Array {
    const part = subarray.call(v, b.at * w, b.count * w);
    const V = this.t.dtype === 'float64' ? Float64Array : Float32Array;
    return viewBytes(part instanceof V ? part : new V(part as ArrayLike<number>));
  }
}
