// written.ts: what the host side of a new arena holds that its device side does not, so that
// the arena's first upload sends only that (Arena's uploadWritten): the regions a view or
// bytes() was handed out for, the header's bytes, or everything once the host address was.
import type { Plan } from '../layout/plan.js';

/** Untouched gaps up to this size between written regions go along (they are zero on both sides
 *  of a fresh arena): one transfer instead of several costs less than sending a MiB of zeros. */
const WRITTEN_GAP = 2 ** 20;

export class WrittenRegions {
  readonly #plan: Pick<Plan, 'headerBytes' | 'regions'>;
  // Indices in plan.regions; 'all' once the host address was handed out.
  #written: Set<number> | 'all' = new Set();
  #header = false;
  /** Region indices by offset, and the furthest end among the first i of them (compact plans
   *  overlap): the regions meeting a byte range are found by bisection, not by a scan. */
  #byOffset: { order: number[]; reach: number[] } | undefined;

  constructor(plan: Pick<Plan, 'headerBytes' | 'regions'>) {
    this.#plan = plan;
  }

  /** Anything may have been written (the host address went out). */
  markAll(): void {
    this.#written = 'all';
  }

  /** Host bytes [offset, offset + bytes) were handed out. */
  mark(offset: number, bytes: number): void {
    const written = this.#written;
    if (written === 'all') return;
    if (offset < this.#plan.headerBytes) this.#header = true;
    const regions = this.#plan.regions;
    if (!this.#byOffset) {
      const order = regions.map((_, i) => i).sort((a, b) => regions[a]!.offset - regions[b]!.offset);
      let far = 0;
      this.#byOffset = { order, reach: order.map((i) => (far = Math.max(far, regions[i]!.offset + regions[i]!.bytes))) };
    }
    const { order, reach } = this.#byOffset;
    let lo = 0,
      hi = order.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (reach[mid]! <= offset) lo = mid + 1;
      else hi = mid;
    }
    const end = offset + bytes;
    for (let k = lo; k < order.length && regions[order[k]!]!.offset < end; k++) {
      const r = regions[order[k]!]!;
      if (offset < r.offset + r.bytes) written.add(order[k]!);
    }
  }

  /** What to upload: 'all', or [offset, bytes, ...] ranges (small gaps merged) and the kinds
   *  they belong to. */
  upload(): 'all' | { ranges: number[]; kinds: string[] } {
    const written = this.#written;
    if (written === 'all') return 'all';
    const ranges: number[] = [];
    const add = (offset: number, end: number) => {
      const n = ranges.length;
      if (n && offset - (ranges[n - 2]! + ranges[n - 1]!) <= WRITTEN_GAP) ranges[n - 1] = Math.max(ranges[n - 1]!, end - ranges[n - 2]!);
      else ranges.push(offset, end - offset);
    };
    if (this.#header) add(0, this.#plan.headerBytes);
    this.#plan.regions.forEach((r, i) => {
      if (written.has(i) && r.bytes > 0) add(r.offset, r.offset + r.bytes);
    });
    return { ranges, kinds: [...new Set([...written].map((i) => this.#plan.regions[i]!.kind))] };
  }
}
