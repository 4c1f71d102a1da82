// resident.ts: the data set resident in an arena's data regions (xdata, ydata), uploaded once
// and again only when its contents change.
import { transferRanges, type Arena } from '../arena.js';
import { native } from '../native.js';
import type { Snapshot, Values } from './data.js';
import { stateOf } from './state.js';
import { viewBytes } from './window.js';


/** Makes d the resident data set of `arena` (rows [0, count) of xdata, and of ydata when d has
 *  targets; `outputs` units per target row). The device holds what is resident as long as the
 *  host bytes of those rows are unchanged: a part goes up again unless its snapshot equals the
 *  host bytes byte for byte and those bytes still have the checksum they had at upload (an edit
 *  of the host copy that was not uploaded). Object identity plays no part: a data set changed
 *  in place goes up again. The arena's device side must be current (syncDevice) first. */
export function makeResident(arena: Arena, d: Snapshot, outputs: number): void {
  const st = stateOf(arena);
  const plan = arena.plan;
  const L = plan.spec.layers.length - 1;
  const xr = plan.region(0, 'xdata')!, yr = plan.region(L, 'ydata')!;
  const hostX = arena.view(0, 'xdata').subarray(0, d.x.length);
  const hostY = arena.view(L, 'ydata').subarray(0, d.count * outputs);
  const same = (snap: Values, host: Values, crc: number | undefined) =>
    crc !== undefined && st.resident?.count === d.count && Buffer.compare(viewBytes(snap), viewBytes(host)) === 0 &&
    (native().crc32c(viewBytes(host)) >>> 0) === crc;
  const xKeep = same(d.x, hostX, st.resident?.xCrc);
  const yKeep = d.y === undefined || same(d.y, hostY, st.resident?.yCrc);
  if (xKeep && yKeep) return;
  const ranges: number[] = [];
  if (!xKeep) { hostX.set(d.x); ranges.push(xr.offset, d.x.byteLength); }
  if (!yKeep) { hostY.set(d.y!); ranges.push(yr.offset, d.y!.byteLength); }
  // x rows that reach the end of xdata and the ydata rows after it: one range (only
  // alignment padding lies between).
  if (ranges.length === 4 && d.x.byteLength === xr.bytes) ranges.splice(1, 3, yr.offset + ranges[3]! - xr.offset);
  // The record is dropped first: a failed transfer must not leave a stale claim. Inputs alone
  // (predict) leave the ydata rows unclaimed: they belong to another data set.
  st.resident = undefined;
  transferRanges(arena, 'toDevice', { kinds: ['xdata', 'ydata'] }, ranges);
  st.resident = {
    count: d.count,
    xCrc: native().crc32c(viewBytes(hostX)) >>> 0,
    yCrc: d.y === undefined ? undefined : native().crc32c(viewBytes(hostY)) >>> 0,
  };
}
