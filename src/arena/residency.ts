// residency.ts: device budgets. Validation of the options that ask for one (before anything is
// allocated), and the residency report of a budgeted arena. The plan itself is native
// (csrc/budget/residency.h): the smallest budget comes from the same phase table it plans from.
import { LayoutError, OptionError } from '../core/errors.js';
import { KINDS, type Kind } from '../layout/header.js';
import type { Plan } from '../layout/plan.js';
import { call, native, type NativeResidency, type ResidencyCounters } from '../native/addon.js';

export type ResidencyMode = 'scheduler' | 'on-demand';

/** Checks the `residency` option against the memory kind and returns whether the managed
 *  scheduler runs (else pages fault in on demand). The budget itself is checked once, natively,
 *  when the arena is made (csrc/budget/budgeted_block.cc): OptionError BAD_BUDGET,
 *  BUDGET_TOO_SMALL, BUDGET_NEEDS_MANAGED, BUDGET_REQUIRED with field 'deviceBudget'. */
export function residencyOption(memory: string, deviceBudget: unknown, residency: unknown): boolean {
  if (residency === undefined) return true;
  if (residency !== 'scheduler' && residency !== 'on-demand') throw new OptionError('BAD_OPTION', 'residency', residency, "must be 'scheduler' or 'on-demand'");
  if (memory !== 'managed' || deviceBudget === undefined)
    throw new OptionError('BAD_OPTION', 'residency', residency, "applies to memory 'managed' with a deviceBudget");
  return residency === 'scheduler';
}

/** The smallest device budget for `plan` ('managed' rounds regions to 64 KiB pages, 'staged' to the plan's alignment). */
export function minDeviceBudget(plan: Plan, memory: 'managed' | 'staged'): { bytes: number; stage: string; layer: number } {
  if (memory !== 'managed' && memory !== 'staged') throw new OptionError('BAD_OPTION', 'memory', memory, "must be 'managed' or 'staged'");
  const header: unknown = plan !== null && typeof plan === 'object' ? plan.header : undefined;
  if (!(header instanceof Uint8Array)) throw new LayoutError('BAD_PLAN', 'plan', typeof plan, 'must be a plan from planLayout');
  return call(() => native().minDeviceBudget(header, memory));
}

export type Where = 'device' | 'host' | 'none';

export interface LayerResidency {
  layer: number;
  /** The bytes from the layer's first region to the end of its last (its range in layer-major order). */
  range: { offset: number; bytes: number };
  /** Where all its regions are (managed: were last prefetched); 'mixed' when they differ. The
   *  data set (xdata, ydata) is left out: it is read in place on the host, never prefetched. */
  location: Where | 'mixed';
  regions: Partial<Record<Kind, Where>>;
}

export interface ResidencyReport {
  placement: 'scheduler' | 'on-demand' | 'staged';
  budget: number;
  /** Whether the last run was measured (false before the first run). */
  measured: boolean;
  /** The arena's share of the device at the last run's peak: device memory in use
   *  (cudaMemGetInfo, sampled every 0.2 ms through the run) minus the baseline, what was in use
   *  with none of the arena on the device. Device-wide: other processes' allocations count too. */
  peakDeviceBytes: number;
  /** Device memory in use at that peak, and the baseline. */
  peakDeviceInUse: number;
  baselineDeviceBytes: number;
  samples: number;
  /** Bytes the plan had placed on the device at its peak (its own count, in 64 KiB pages / aligned slots). */
  peakScheduledBytes: number;
  /** Where the last run's time went (µs): the launching thread waiting (managed: for fetches it
   *  needs now; staged: for the GPU to catch up), and the managed movers' calls in and out. */
  timing: { waitMicros: number; fetchMicros: number; evictMicros: number };
  lastRun: ResidencyCounters;
  total: ResidencyCounters;
  layers: LayerResidency[];
}

const DATA_KINDS: readonly Kind[] = ['xdata', 'ydata'];

export function residencyReport(n: NativeResidency): ResidencyReport {
  const layers = new Map<number, LayerResidency>();
  for (const r of n.regions) {
    const kind = KINDS[r.kind]!;
    const where: Where = n.placement === 'staged' ? (r.resident ? 'device' : 'host') : (r.lastPrefetch ?? 'none');
    let l = layers.get(r.layer);
    if (!l) {
      l = { layer: r.layer, range: { offset: r.offset, bytes: 0 }, location: 'none', regions: {} };
      layers.set(r.layer, l);
    }
    l.regions[kind] = DATA_KINDS.includes(kind) && n.placement === 'staged' ? 'host' : where;
    if (DATA_KINDS.includes(kind)) continue;
    const end = Math.max(l.range.offset + l.range.bytes, r.offset + r.bytes);
    l.range.offset = Math.min(l.range.offset, r.offset);
    l.range.bytes = end - l.range.offset;
  }
  for (const l of layers.values()) {
    const places = new Set(
      Object.entries(l.regions)
        .filter(([k]) => !DATA_KINDS.includes(k as Kind))
        .map(([, w]) => w),
    );
    l.location = places.size === 1 ? [...places][0]! : places.size === 0 ? 'none' : 'mixed';
  }
  return {
    placement: n.placement,
    budget: n.budget,
    measured: n.measured,
    peakDeviceBytes: n.peakDeviceBytes,
    peakDeviceInUse: n.peakDeviceInUse,
    baselineDeviceBytes: n.baselineDeviceBytes,
    samples: n.samples,
    peakScheduledBytes: n.lastRun.peakScheduledBytes,
    lastRun: n.lastRun,
    total: n.total,
    timing: { waitMicros: n.waitMicros, fetchMicros: n.fetchMicros, evictMicros: n.evictMicros },
    layers: [...layers.values()].sort((a, b) => a.layer - b.layer),
  };
}
