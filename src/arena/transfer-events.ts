// transfer-events.ts: every transfer call of an arena as observers see it (the training
// report's accounting by purpose, src/report/transfers.ts). Keyed by the arena object: this file
// must not import the Arena (arena.ts imports it).
import type { Selector } from '../layout/selector.js';

export interface TransferResult {
  transfers: number;
  bytes: number;
}

/** One transfer call as observers see it: `regions` selects what the bytes belong to. */
export interface TransferEvent extends TransferResult {
  dir: 'toDevice' | 'toHost';
  regions: Selector | undefined;
}

// Each arena's observers: several at once (two recorders on one arena each see every transfer).
const observers = new WeakMap<object, Set<(e: TransferEvent) => void>>();

/** Internal: tells the observers of `arena` about a transfer call; returns `r`. */
export function notifyTransfer(arena: object, dir: TransferEvent['dir'], regions: Selector | undefined, r: TransferResult): TransferResult {
  const set = observers.get(arena);
  if (set) for (const fn of [...set]) fn({ dir, regions, ...r });
  return r;
}

/** Internal: calls `fn` after every transfer of `arena`; returns the function that stops it. */
export function observeTransfers(arena: object, fn: (e: TransferEvent) => void): () => void {
  const set = observers.get(arena) ?? new Set();
  observers.set(arena, set);
  const own = (e: TransferEvent) => fn(e); // its own entry, even for a function added twice
  set.add(own);
  return () => {
    set.delete(own);
  };
}

/** Internal: tells the observers of `arena` about ranges moved (by transferRanges, or by a run
 *  that made the copies itself: the native runInline), one transfer each that is not empty. */
export function notifyRanges(arena: object, dir: TransferEvent['dir'], regions: Selector | undefined, ranges: readonly number[]): TransferResult {
  let transfers = 0,
    bytes = 0;
  for (let i = 1; i < ranges.length; i += 2)
    if (ranges[i]! > 0) {
      transfers++;
      bytes += ranges[i]!;
    }
  return notifyTransfer(arena, dir, regions, { transfers, bytes });
}
