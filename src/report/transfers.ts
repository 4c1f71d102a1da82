// transfers.ts: transfers by purpose. The arena counts transfers only in total; this recorder
// observes one arena's transfer calls (observeTransfers: each call's transfers and bytes as the
// native layer counted them) and files each under what it was for, judged from the regions it
// selected. The one transfer before recording starts is Arena.create's header.
import { Arena } from '../arena/arena.js';
import { observeTransfers } from '../arena/transfer-events.js';
import { OptionError } from '../core/errors.js';
import type { Selector, SelectorKind } from '../layout/selector.js';

export const PURPOSES = ['header', 'network', 'data', 'stats', 'weights back', 'other'] as const;
export type Purpose = (typeof PURPOSES)[number];

export interface PurposeTotals {
  purpose: Purpose;
  direction: 'to device' | 'to host';
  /** Calls of toDevice / toHost (or Arena.create for the header). */
  calls: number;
  transfers: number;
  bytes: number;
  /** What the calls moved, e.g. "whole arena", "xdata, ydata". */
  what: string[];
}

export interface TransferRecorder {
  /** Totals per purpose and direction, in PURPOSES order; only those with transfers. */
  byPurpose(): PurposeTotals[];
  /** Puts the arena's own methods back. */
  stop(): void;
}

const only = (kinds: readonly SelectorKind[] | undefined, allowed: readonly SelectorKind[]) =>
  kinds !== undefined && kinds.length > 0 && kinds.every((k) => allowed.includes(k));

/** What a transfer was for, from its direction and selector. */
export function purposeOf(dir: 'toDevice' | 'toHost', sel: Selector | undefined): Purpose {
  const kinds = sel?.kinds;
  if (dir === 'toDevice') {
    if (sel === undefined) return 'network'; // the whole arena: header, network, data regions
    if (only(kinds, ['header'])) return 'header';
    if (only(kinds, ['xdata', 'ydata', 'z', 'y']) && (!kinds!.includes('z') || (sel.layers?.length === 1 && sel.layers[0] === 0))) return 'data';
    if (only(kinds, ['w', 'b', 'mw', 'mb', 'vw', 'vb'])) return 'network';
    return 'other';
  }
  if (only(kinds, ['stats'])) return 'stats';
  // The trained weights, or what a Trainer checkpoint brings back first (state and stats too).
  if (sel === undefined || only(kinds, ['w', 'b', 'mw', 'mb', 'vw', 'vb', 'stats'])) return 'weights back';
  return 'other';
}

const describeSel = (sel: Selector | undefined): string =>
  sel === undefined
    ? 'whole arena'
    : `${(sel.kinds ?? ['all kinds']).join(', ')}${sel.layers ? ` of layer${sel.layers.length > 1 ? 's' : ''} ${sel.layers.join(', ')}` : ''}`;

export function recordTransfers(arena: Arena): TransferRecorder {
  if (!(arena instanceof Arena)) throw new OptionError('BAD_OPTION', 'arena', arena, 'must be an Arena');
  const totals = new Map<string, PurposeTotals>();
  const add = (purpose: Purpose, direction: PurposeTotals['direction'], transfers: number, bytes: number, what: string) => {
    const key = `${purpose}|${direction}`;
    const t = totals.get(key) ?? { purpose, direction, calls: 0, transfers: 0, bytes: 0, what: [] };
    t.calls++;
    t.transfers += transfers;
    t.bytes += bytes;
    if (!t.what.includes(what)) t.what.push(what);
    totals.set(key, t);
  };
  const s0 = arena.stats;
  if (s0.toDeviceTransfers > 0) add('header', 'to device', s0.toDeviceTransfers, s0.toDeviceBytes, 'header at Arena.create');
  if (s0.toHostTransfers > 0) add('other', 'to host', s0.toHostTransfers, s0.toHostBytes, 'before recording');

  const stop = observeTransfers(arena, (e) => {
    add(purposeOf(e.dir, e.regions), e.dir === 'toDevice' ? 'to device' : 'to host', e.transfers, e.bytes, describeSel(e.regions));
  });

  return {
    byPurpose: () =>
      [...totals.values()]
        .sort((a, b) => PURPOSES.indexOf(a.purpose) - PURPOSES.indexOf(b.purpose) || a.direction.localeCompare(b.direction))
        .map((t) => ({ ...t, what: [...t.what] })),
    stop,
  };
}
