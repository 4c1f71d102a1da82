// caching-allocator.ts: a model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator,
// default settings: no expandable segments, no max_split_size, one stream), enough to say what
// torch.cuda.memory_allocated() and memory_reserved() report for a sequence of tensor allocations
// and frees. memory_allocated sums block sizes, not tensor sizes: every request is rounded up to
// 512 bytes, and a block taken from the cache is handed out whole when what would remain is too
// small to split off (under 512 B in the small pool, up to 1 MiB in the large one).

export const MIN_BLOCK = 512;
/** Requests up to 1 MiB come from the small pool. */
export const SMALL_SIZE = 1 << 20;
const SMALL_BUFFER = 2 << 20;
const MIN_LARGE_ALLOC = 10 << 20;
const LARGE_BUFFER = 20 << 20;
const ROUND_LARGE = 2 << 20;

export const roundSize = (bytes: number): number => (bytes < MIN_BLOCK ? MIN_BLOCK : Math.ceil(bytes / MIN_BLOCK) * MIN_BLOCK);

/** cudaMalloc size of a new segment for a (rounded) request. */
export function segmentSize(size: number): number {
  if (size <= SMALL_SIZE) return SMALL_BUFFER;
  if (size < MIN_LARGE_ALLOC) return LARGE_BUFFER;
  return Math.ceil(size / ROUND_LARGE) * ROUND_LARGE;
}

interface Block {
  addr: number;
  size: number;
  small: boolean;
  free: boolean;
  prev?: Block;
  next?: Block;
}

export class CachingAllocatorModel {
  /** Sum of allocated block sizes: torch.cuda.memory_allocated(). */
  allocated = 0;
  /** Sum of segment sizes: torch.cuda.memory_reserved(). */
  reserved = 0;
  /** Highest `allocated` since the last resetPeak(): torch.cuda.max_memory_allocated(). */
  peak = 0;
  #free: Block[] = [];
  #nextAddr = 0;

  resetPeak(): void {
    this.peak = this.allocated;
  }

  /** Allocates a tensor of `bytes` (> 0) and returns its block (pass it to free). */
  malloc(bytes: number): object {
    const size = roundSize(bytes);
    const small = size <= SMALL_SIZE;
    let block = this.#bestFit(size, small);
    if (block) this.#free.splice(this.#free.indexOf(block), 1);
    else {
      const seg = segmentSize(size);
      block = { addr: this.#nextAddr, size: seg, small, free: true };
      // Segments come from separate cudaMalloc calls: never adjacent for merging.
      this.#nextAddr += seg + SMALL_BUFFER;
      this.reserved += seg;
    }
    const remaining = block.size - size;
    if (small ? remaining >= MIN_BLOCK : remaining > SMALL_SIZE) {
      const rest: Block = { addr: block.addr + size, size: remaining, small, free: true, prev: block, next: block.next };
      if (block.next) block.next.prev = rest;
      block.next = rest;
      block.size = size;
      this.#free.push(rest);
    }
    block.free = false;
    this.allocated += block.size;
    this.peak = Math.max(this.peak, this.allocated);
    return block;
  }

  free(handle: object): void {
    const block = handle as Block;
    if (block.free) throw new Error('block freed twice');
    this.allocated -= block.size;
    block.free = true;
    // Merge with free neighbours of the same segment, as free_block does.
    for (const n of [block.prev, block.next]) {
      if (!n || !n.free) continue;
      this.#free.splice(this.#free.indexOf(n), 1);
      if (n === block.prev) {
        block.addr = n.addr;
        block.prev = n.prev;
        if (n.prev) n.prev.next = block;
      } else {
        block.next = n.next;
        if (n.next) n.next.prev = block;
      }
      block.size += n.size;
    }
    this.#free.push(block);
  }

  /** The smallest cached block that fits, lowest address first among equals. */
  #bestFit(size: number, small: boolean): Block | undefined {
    let best: Block | undefined;
    for (const b of this.#free) {
      if (b.small !== small || b.size < size) continue;
      if (!best || b.size < best.size || (b.size === best.size && b.addr < best.addr)) best = b;
    }
    return best;
  }
}
