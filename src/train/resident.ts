// resident.ts: the data set resident in an arena's data regions (xdata, ydata). A data set is
// read once, natively, straight into the regions' host side (data.ts readNumbers: checked and
// compared with what the regions held in the same pass) and uploaded; it goes up again only
// when what was read differs from what the device holds. A Dataset handle (dataset.ts) that is
// resident is not read at all.
import { transferRanges, type Arena } from '../arena/arena.js';
import type { Dtype } from '../layout/header.js';
import { native } from '../native/addon.js';
import { snapshotData, type Into, type Snapshot } from './data.js';
import type { Dataset } from './dataset.js';
import { stateOf } from './state.js';
import { viewBytes } from './window.js';

/** The shape a resident data set must fit. */
export interface ResidentShape {
  inputs: number;
  outputs: number;
  dtype: Dtype;
}

/** Reads `data` at the call straight into `arena`'s data regions (the caller checked that no
 *  run is queued or in flight, so nothing else reads or writes them before the run that uses
 *  them). A set larger than the regions (`tooBig(count, n)` true, or throwing before anything
 *  is written) is read into new arrays instead (not staged). */
export function readIntoRegions(
  arena: Arena,
  data: unknown,
  shape: ResidentShape,
  field: string,
  targets: boolean,
  tooBig: (count: number, n: number) => boolean,
): Snapshot {
  const L = arena.plan.spec.layers.length - 1;
  const V = shape.dtype === 'float64' ? Float64Array : Float32Array;
  let big = false;
  // The views are taken as each field is written: reading the fields runs the caller's code
  // (getters, Proxies), which may dispose the arena (a view then says DISPOSED).
  const into: Into = {
    x: (n) => {
      big = tooBig(n / shape.inputs, n);
      return big ? new V(n) : arena.view(0, 'xdata').subarray(0, n);
    },
    y: (n) => (big ? new V(n) : arena.view(L, 'ydata').subarray(0, n)),
    compare: true,
  };
  const st = stateOf(arena);
  let d: Snapshot;
  try {
    d = snapshotData(data, shape.inputs, shape.outputs, shape.dtype, field, targets, into);
  } catch (e) {
    if (!big) st.resident = undefined; // the host rows may hold part of it: they go up whole next time
    throw e;
  }
  if (big) return d;
  // What the host side now holds that the device does not goes up with the call's run (the
  // record no longer claims it, should that run never come).
  const rec = st.resident;
  if (rec && rec.count !== d.count) st.resident = undefined;
  else if (rec && (d.xChanged || d.yChanged)) {
    const { dataset: _d, version: _v, ...rows } = rec; // no longer any handle's rows
    st.resident = { ...rows, xCrc: d.xChanged ? undefined : rec.xCrc, yCrc: d.yChanged ? undefined : rec.yCrc };
  }
  return { ...d, staged: 'data' };
}

/** Makes d the resident data set of `arena` (rows [0, count) of xdata, and of ydata when d has
 *  targets; `outputs` units per target row), uploading what the device does not hold. `d`: read
 *  into this arena's regions (readIntoRegions), or values held elsewhere (a snapshot taken while
 *  a run was queued, another replica's rows), copied in and compared natively here. The arena's
 *  device side must be current (syncDevice) first. `dataset`: the handle d was read from. */
export function makeResident(arena: Arena, d: Snapshot, outputs: number, dataset?: { handle: Dataset; version: number }): void {
  if (dataset && holds(arena, dataset.handle, dataset.version)) return;
  const st = stateOf(arena);
  const plan = arena.plan;
  const L = plan.spec.layers.length - 1;
  const xr = plan.region(0, 'xdata')!,
    yr = plan.region(L, 'ydata')!;
  const hostX = arena.view(0, 'xdata').subarray(0, d.x.length);
  const hostY = arena.view(L, 'ydata').subarray(0, d.count * outputs);
  let xSame = true,
    ySame = true;
  if (!(d.staged === 'data' && d.x.buffer === hostX.buffer && d.x.byteOffset === hostX.byteOffset)) {
    xSame = native().checkedCopy(hostX, d.x, true) === false;
    if (d.y) ySame = native().checkedCopy(hostY, d.y, true) === false;
  }
  const rec = st.resident?.count === d.count ? st.resident : undefined;
  const xKeep = rec?.xCrc !== undefined && xSame,
    yKeep = d.y === undefined || (rec?.yCrc !== undefined && ySame);
  if (xKeep && yKeep) {
    if (dataset) st.resident = { ...st.resident!, dataset: dataset.handle, version: dataset.version };
    return;
  }
  const ranges: number[] = [];
  if (!xKeep) ranges.push(xr.offset, hostX.byteLength);
  if (!yKeep) ranges.push(yr.offset, hostY.byteLength);
  // x rows that reach the end of xdata and the ydata rows after it: one range (only
  // alignment padding lies between).
  if (ranges.length === 4 && hostX.byteLength === xr.bytes) ranges.splice(1, 3, yr.offset + ranges[3]! - xr.offset);
  // The record is dropped first: a failed transfer must not leave a stale claim. Inputs alone
  // (predict) leave the ydata rows unclaimed: they belong to another data set.
  st.resident = undefined;
  transferRanges(arena, 'toDevice', { kinds: ['xdata', 'ydata'] }, ranges);
  st.resident = {
    count: d.count,
    xCrc: xKeep ? rec!.xCrc : native().crc32c(viewBytes(hostX)) >>> 0,
    yCrc: d.y === undefined ? undefined : yKeep ? rec!.yCrc : native().crc32c(viewBytes(hostY)) >>> 0,
    ...(dataset ? { dataset: dataset.handle, version: dataset.version } : {}),
  };
}

/** Whether `dataset` at `version` is what `arena`'s data regions hold (nothing to read). */
export function holds(arena: Arena, dataset: Dataset, version: number): boolean {
  const rec = stateOf(arena).resident;
  return rec !== undefined && rec.dataset === dataset && rec.version === version && rec.xCrc !== undefined && rec.yCrc !== undefined;
}
