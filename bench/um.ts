// um.ts: an L-class network (6 weight layers of 4096 x 4096, float32, batch 2048, a resident
// data set of 2 batches) trained with a device budget of 25% of its arena, four ways:
//   resident      - memory 'device': the whole arena on the device (no budget);
//   scheduler     - memory 'managed' + the prefetch scheduler (csrc/budget/um_scheduler.cu);
//   on-demand     - memory 'managed', no scheduler: pages fault in (the budget is not enforced);
//   staged        - explicit staging through a pool of the budget's size (csrc/budget/staging.cu);
// plus variants of the scheduler without its discards, and the host link measured in the same
// run. Two bounds the scheduler cannot beat: the resident step time, and the bytes that must
// cross the link per step (linkBytes below) over the link's measured rate.
import { Arena, planLayout, Trainer, type ArenaOptions, type LayoutSpec, type Plan } from '../src/index.js';
import { native, type LinkRates } from '../src/native/addon.js';
import { testAddon } from '../src/internal.js';

export interface UmRow {
  mode: string;
  /** The scheduler's eviction of dead bytes / placement of write-only regions (NN_ARENA_UM_*), where it applies. */
  variant: string;
  steps: number;
  microsPerStep: number;
  /** Device bytes of the arena at the peak: measured (residency report) for budgeted modes, the arena's size resident. */
  peakDeviceBytes: number;
  /** The plan's own count of bytes it had placed on the device at its peak (budgeted, planned modes). */
  scheduledPeakBytes: number | null;
  /** Bytes the plan moved per step, host to device (fetched) and back (written back); null without a plan. */
  toDevicePerStep: number | null;
  toHostPerStep: number | null;
  /** Last run (one epoch): µs the launching thread waited, and the managed movers spent in calls in / out. */
  timing: { waitMicros: number; fetchMicros: number; evictMicros: number } | null;
  /** Set when the variant failed (its figures are then NaN). */
  error?: string;
}

export interface UmResults {
  network: string;
  layers: number[];
  batch: number;
  samples: number;
  optimizer: string;
  arenaBytes: number;
  budget: number;
  layerRangeBytes: number;
  link: LinkRates;
  /** Lower bound of the bytes that must cross the link per step (see linkBytes). */
  mustCross: { toDevice: number; toHost: number };
  bounds: { residentMicros: number; linkMicrosCopy: number; linkMicrosPrefetch: number; largerMicros: number };
  rows: UmRow[];
  ratios: { schedulerToLargerBound: number; schedulerToStaged: number };
  targets: { schedulerToLargerBound: number; schedulerToStaged: number };
}

export const UM_SPEC: LayoutSpec = { layers: [4096, 4096, 4096, 4096, 4096, 4096, 4096], batch: 2048, samples: 4096, optimizer: 'sgd' };

/** A lower bound of the bytes that must cross the link per steady-state step with `budget`
 *  device bytes. At the start of a step (after the gather: z[0], y resident) at most
 *  budget - header - |z[0], y| of the parameters can be on the device; the rest must come in
 *  before its forward. At the output phase (z[L], y, d[L], stats resident) at most
 *  budget - header - that of the parameters, optimizer state and activations z[0..L-1] the
 *  backward pass needs can be there; the rest must come in after it. Both windows are disjoint,
 *  so the two shortfalls add up, plus the batch's rows of the data set (read over the link).
 *  What is updated and not resident at the next step's start must have gone back. Copies of
 *  clean bytes are free in this bound (staging can drop them; managed memory cannot). */
export function linkBytes(plan: Plan, budget: number): { toDevice: number; toHost: number } {
  const L = plan.spec.layers.length - 1;
  const bytes = (l: number, k: Parameters<Plan['region']>[1]) => plan.region(l, k)?.bytes ?? 0;
  let params = 0,
    state = 0,
    acts = 0;
  for (let l = 1; l <= L; l++) {
    params += bytes(l, 'w') + bytes(l, 'b');
    state += bytes(l, 'mw') + bytes(l, 'mb') + bytes(l, 'vw') + bytes(l, 'vb');
  }
  for (let l = 0; l < L; l++) acts += bytes(l, 'z');
  const room = budget - plan.headerBytes;
  const atGather = bytes(0, 'z') + bytes(L, 'y');
  const atOutput = bytes(L, 'z') + bytes(L, 'y') + bytes(L, 'd') + bytes(L, 'stats');
  const elem = plan.spec.dtype === 'float64' ? 8 : 4;
  const rows = plan.spec.samples > 0 ? plan.spec.batch * (plan.spec.layers[0]! + plan.spec.layers[L]!) * elem : 0;
  const pos = (x: number) => Math.max(0, x);
  return {
    toDevice: pos(params - (room - atGather)) + pos(params + state + acts - (room - atOutput)) + rows,
    toHost: pos(params + state - (room - atGather)),
  };
}

/** Uniform weights in +-sqrt(3 / fanIn) (unit variance out) from a seed, written straight into
 *  the arena (Trainer.init's exact normal generator is too slow for 100M weights in a test or
 *  a benchmark). Shared by bench/um.ts and test/gpu/um.gpu.test.ts. */
export function fillWeights(arena: Arena, seed: number): void {
  const layers = arena.plan.spec.layers;
  let s = seed >>> 0;
  for (let l = 1; l < layers.length; l++) {
    const w = arena.view(l, 'w');
    const a = Math.sqrt(3 / layers[l - 1]!);
    for (let i = 0; i < w.length; i++) {
      s ^= s << 13;
      s ^= s >>> 17;
      s ^= s << 5;
      w[i] = (((s >>> 0) / 2 ** 32) * 2 - 1) * a;
    }
    arena.view(l, 'b').fill(0);
  }
}

const ENV = ['NN_ARENA_UM_EVICT_DEAD', 'NN_ARENA_UM_PLACE', 'NN_ARENA_UM_MOVERS', 'NN_ARENA_UM_SLACK', 'NN_ARENA_UM_READ_DUP'] as const;

export async function benchUm(quick: boolean, log: (s: string) => void): Promise<UmResults | null> {
  const info = native().cudaInfo();
  if (!info.built || info.devices === 0) {
    log('  um: no CUDA device, skipped');
    return null;
  }
  const spec = UM_SPEC;
  const plan = planLayout(spec);
  const budget = Math.floor(plan.totalBytes / 4);
  const layerRangeBytes = (['z', 'b', 'w', 'd', 'db', 'dw'] as const).reduce((a, k) => a + plan.region(1, k)!.bytes, 0);
  const MB = (x: number) => (x / 1e6).toFixed(1);
  log(`  um: arena ${MB(plan.totalBytes)} MB, budget ${MB(budget)} MB (25%), one layer's range ${MB(layerRangeBytes)} MB`);
  const link = testAddon().measureLink(256 * 2 ** 20);
  log(
    `  link (256 MiB): copy ${link.copyToDevice.toFixed(1)} / ${link.copyToHost.toFixed(1)} GB/s, prefetch ${link.prefetchToDevice.toFixed(1)} / ${link.prefetchToHost.toFixed(1)} GB/s ` +
      `(to host on 4 threads ${link.prefetchToHost4.toFixed(1)} GB/s; ${link.prefetchRetainedBytes} B still taken on the device once back on the host), ` +
      `discard+prefetch ${link.discardToDevice.toFixed(1)} / ${link.discardToHost.toFixed(1)} GB/s, discard ${link.discardOnly.toFixed(1)} GB/s freeing ${link.discardFreedBytes} B${link.discard ? ` (${link.discard})` : ''}`,
  );

  const init = Arena.create(plan, { backend: 'cpu' });
  fillWeights(init, 12345);
  const inputs = spec.layers[0]!,
    outputs = spec.layers[spec.layers.length - 1]!;
  let s = 12345;
  const x = new Float32Array(spec.samples! * inputs);
  for (let i = 0; i < x.length; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    x[i] = (s >>> 8) / 2 ** 24;
  }
  const data = { x, labels: Int32Array.from({ length: spec.samples! }, (_, i) => (i * 7919) % outputs) };
  const epochs = quick ? 4 : 11; // the first is not timed (uploads, first faults, caches)

  // The scheduler as shipped, then without what each of its choices brings: one mover thread
  // each way and no eviction in flight while fetching; dead pages moved to the host after
  // their discard; dead bytes copied like live ones. Last, weights fetched for the forward
  // pass as read-only duplicates, so that evicting them copies nothing back.
  const managed: ArenaOptions = { backend: 'cuda', memory: 'managed', deviceBudget: budget };
  const modes: Array<[string, ArenaOptions, Record<string, string>]> = [
    ['resident', { backend: 'cuda' }, {}],
    ['scheduler', managed, {}],
    ['scheduler', managed, { NN_ARENA_UM_MOVERS: '1,1', NN_ARENA_UM_SLACK: '0' }],
    // A prefetch to the host slows down by half while a prefetch to the device runs
    // (bench/micro/um_release.cu, "both ways"): no eviction in flight while fetching, and fewer evicting threads.
    ['scheduler', managed, { NN_ARENA_UM_SLACK: '0' }],
    ['scheduler', managed, { NN_ARENA_UM_MOVERS: '2,1' }],
    ['scheduler', managed, { NN_ARENA_UM_EVICT_DEAD: 'discard-host' }],
    ['scheduler', managed, { NN_ARENA_UM_EVICT_DEAD: 'host', NN_ARENA_UM_PLACE: 'device' }],
    ['scheduler', managed, { NN_ARENA_UM_READ_DUP: '1' }],
    ['on-demand', { ...managed, residency: 'on-demand' }, {}],
    ['staged', { backend: 'cuda', memory: 'staged', deviceBudget: budget }, {}],
  ];
  const rows: UmRow[] = [];
  try {
    for (const [mode, options, env] of modes) {
      for (const k of ENV) delete process.env[k];
      Object.assign(process.env, env);
      const variant =
        mode === 'scheduler'
          ? Object.entries(env)
              .map(([k, v]) => `${k.replace('NN_ARENA_UM_', '').toLowerCase()}=${v}`)
              .join(' ') || 'as shipped'
          : '';
      using arena = Arena.create(plan, options);
      for (let l = 1; l < spec.layers.length; l++) arena.view(l, 'w').set(init.view(l, 'w'));
      const t = new Trainer(arena, { lr: 1e-3 });
      // Step time between the end of the first epoch and the end of the last: neither the
      // first uploads nor fit's final download of the weights count.
      const ends: number[] = [];
      try {
        await t.fit(data, { epochs, onProgress: () => ends.push(performance.now()) });
      } catch (e) {
        // a variant that fails is a finding too: keep the other rows
        log(`  ${mode} ${variant}: failed: ${(e as Error).message}`);
        rows.push({
          mode,
          variant,
          steps: 0,
          microsPerStep: NaN,
          peakDeviceBytes: NaN,
          scheduledPeakBytes: null,
          toDevicePerStep: null,
          toHostPerStep: null,
          timing: null,
          error: (e as Error).message,
        });
        continue;
      }
      const steps = (epochs - 1) * 2;
      const microsPerStep = ((ends[ends.length - 1]! - ends[0]!) * 1000) / steps;
      const rep = arena.deviceBudget ? arena.residency() : null;
      const row: UmRow = {
        mode,
        variant,
        steps,
        microsPerStep,
        peakDeviceBytes: rep ? rep.peakDeviceBytes : plan.totalBytes,
        scheduledPeakBytes: rep && mode !== 'on-demand' ? rep.peakScheduledBytes : null,
        toDevicePerStep: rep && mode !== 'on-demand' ? rep.lastRun.fetchedBytes / rep.lastRun.steps : null,
        toHostPerStep: rep && mode !== 'on-demand' ? rep.lastRun.writtenBackBytes / rep.lastRun.steps : null,
        timing: rep ? rep.timing : null,
      };
      rows.push(row);
      log(
        `  ${mode.padEnd(10)} ${variant.padEnd(40)} ${microsPerStep.toFixed(0).padStart(8)} us/step  peak ${MB(row.peakDeviceBytes)} MB measured` +
          (row.scheduledPeakBytes !== null ? ` (${MB(row.scheduledPeakBytes)} MB planned)` : '') +
          (row.toDevicePerStep !== null ? `  moved ${MB(row.toDevicePerStep)} MB in, ${MB(row.toHostPerStep!)} MB out per step` : '') +
          (row.timing
            ? `  last run: waited ${(row.timing.waitMicros / 1e3).toFixed(1)} ms, mover calls in ${(row.timing.fetchMicros / 1e3).toFixed(1)} ms, out ${(row.timing.evictMicros / 1e3).toFixed(1)} ms`
            : ''),
      );
    }
  } finally {
    for (const k of ENV) delete process.env[k];
    init.dispose();
  }
  const mustCross = linkBytes(plan, budget);
  const resident = rows.find((r) => r.mode === 'resident')!.microsPerStep;
  const linkMicros = (inRate: number, outRate: number) => Math.max(mustCross.toDevice / inRate, mustCross.toHost / outRate) / 1e3;
  const bounds = {
    residentMicros: resident,
    linkMicrosCopy: linkMicros(link.copyToDevice, link.copyToHost),
    linkMicrosPrefetch: linkMicros(link.prefetchToDevice, link.prefetchToHost),
    largerMicros: 0,
  };
  bounds.largerMicros = Math.max(bounds.residentMicros, bounds.linkMicrosCopy);
  const scheduler = rows.find((r) => r.mode === 'scheduler' && r.variant === 'as shipped')!.microsPerStep;
  const staged = rows.find((r) => r.mode === 'staged')!.microsPerStep;
  const ratios = { schedulerToLargerBound: scheduler / bounds.largerMicros, schedulerToStaged: scheduler / staged };
  log(
    `  must cross per step >= ${MB(mustCross.toDevice)} MB in, ${MB(mustCross.toHost)} MB out: ${bounds.linkMicrosCopy.toFixed(0)} us at the copy rates, ` +
      `${bounds.linkMicrosPrefetch.toFixed(0)} us at the prefetch rates; resident ${resident.toFixed(0)} us`,
  );
  log(
    `  scheduler / larger bound ${ratios.schedulerToLargerBound.toFixed(3)} (target <= 1.25), scheduler / staged ${ratios.schedulerToStaged.toFixed(3)} (target <= 1.1)`,
  );
  return {
    network: `L ${spec.layers.length - 1}x4096`,
    layers: [...spec.layers],
    batch: spec.batch,
    samples: spec.samples!,
    optimizer: spec.optimizer!,
    arenaBytes: plan.totalBytes,
    budget,
    layerRangeBytes,
    link,
    mustCross,
    bounds,
    rows,
    ratios,
    targets: { schedulerToLargerBound: 1.25, schedulerToStaged: 1.1 },
  };
}
