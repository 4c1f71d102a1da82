// Data parallelism on 2+ GPUs over NCCL (skips with fewer GPUs or without libnccl):
//   - in one process (DataParallel.create): replicas bit-identical after every fit / step, and
//     equal to one GPU on the global batch within rounding (float64), for both orders, SGD and
//     Adam, with an uneven last global batch (one replica's shard empty);
//   - across processes (2 node processes, RANK etc., the TCP rendezvous, ncclCommInitRank):
//     both ranks end bit-identical and equal to the in-process group;
//   - float32 with precision tf32x3 / tf32 / bf16 / fp16 (a workspace per replica, on its device;
//     fp16's loss scale moves alike on every replica: each sees the reduced gradients);
//   - a failing replica rejects the run with its cause instead of hanging its peers.
// Runs on the GPU machine: bash .gpu/run.sh bash scripts/gpu-session.sh nccl
import { spawn } from 'node:child_process';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Arena, cudaInfo, DataParallel, ncclInfo, planLayout, Trainer, type LayoutSpec, type Order, type Optimizer } from '../../src/index.js';
import { runGroup } from '../../src/parallel/data-parallel.js';
import { EVERY_OP_NET, everyOpRows } from '../support/ops-fixtures.js';
import { handleOf } from '../../src/arena/arena.js';
import { LOSSES, OPS } from '../../src/native/addon.js';

const info = cudaInfo();
const nccl = info.built && info.devices > 0 ? ncclInfo() : { available: false, why: 'no GPU', version: 0 };
const ready = info.built && info.devices >= 2 && nccl.available;
if (!ready && process.env.NN_ARENA_REQUIRE_GPU === '1') console.log(`nccl.gpu: skipped (${info.devices} GPU(s); NCCL: ${nccl.why || 'ok'})`);

const PER_GPU = 16;
const spec = (batch: number, samples: number, order: Order, optimizer: Optimizer): LayoutSpec => ({
  layers: [20, 48, 32, 5],
  batch,
  samples,
  activations: ['relu', 'tanh', 'softmax'],
  dtype: 'float64',
  order,
  optimizer,
});

function data(samples: number) {
  const x = Float64Array.from({ length: samples * 20 }, (_, i) => Math.sin(i * 0.37));
  const labels = Int32Array.from({ length: samples }, (_, i) => (i * 7) % 5);
  return { x, labels };
}

/** Every parameter and optimizer state region of `a`, from the device. */
function params(a: Arena): Float64Array[] {
  a.toHost();
  const out: Float64Array[] = [];
  for (let l = 1; l < a.plan.spec.layers.length; l++)
    for (const k of ['w', 'b', 'mw', 'mb', 'vw', 'vb'] as const) if (a.plan.region(l, k)) out.push(Float64Array.from(a.view(l, k)));
  return out;
}

function maxRel(a: Float64Array[], b: Float64Array[]): number {
  let m = 0;
  a.forEach((x, i) =>
    x.forEach((v, j) => {
      m = Math.max(m, Math.abs(v - b[i]![j]!) / Math.max(1e-3, Math.abs(v)));
    }),
  );
  return m;
}

const identical = (a: Float64Array[], b: Float64Array[]) => a.every((x, i) => Buffer.compare(Buffer.from(x.buffer), Buffer.from(b[i]!.buffer)) === 0);

/** Layer 1's weights of `a`, from the device (float32 plans). */
function layer1W(a: Arena): Float32Array {
  a.toHost();
  return Float32Array.from(a.view(1, 'w'));
}

const maxAbsDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);

describe.skipIf(!ready)('data parallelism over NCCL', () => {
  const world = Math.min(info.devices, 8);
  const devices = Array.from({ length: world }, (_, i) => i);
  // Tests that set NN_ARENA_SYNC_GRAPHS leave it unset, whatever failed.
  afterEach(() => {
    delete process.env.NN_ARENA_SYNC_GRAPHS;
  });

  it('an arena on device 1 trains exactly as one on device 0', async () => {
    const plan = planLayout(spec(PER_GPU, 64, 'layer-major', 'adam'));
    const a = Arena.create(plan, { backend: 'cuda', device: 0 }),
      b = Arena.create(plan, { backend: 'cuda', device: 1 });
    try {
      expect(b.device).toBe(1);
      for (const arena of [a, b]) {
        const t = new Trainer(arena, { lr: 0.01 });
        t.init(3);
        await t.fit(data(64), { epochs: 2, seed: 1 });
      }
      expect(identical(params(a), params(b))).toBe(true);
    } finally {
      a.dispose();
      b.dispose();
    }
  });

  for (const order of ['layer-major', 'kind-major'] as const) {
    for (const optimizer of ['sgd', 'adam'] as const) {
      it(`${world} GPUs, ${order}, ${optimizer}: fit keeps replicas bit-identical and equals one GPU on the global batch`, async () => {
        // Uneven: the last global batch has fewer rows than one replica's batch, so the other
        // replicas' shards are empty in that step.
        const samples = PER_GPU * world * 3 + 5;
        const group = DataParallel.create(planLayout(spec(PER_GPU, samples, order, optimizer)), { devices });
        const one = Arena.create(planLayout(spec(PER_GPU * world, samples, order, optimizer)), { backend: 'cuda' });
        try {
          expect(group).toMatchObject({ world, reduces: true, globalBatch: PER_GPU * world });
          const tg = new Trainer(group, { lr: 0.02 }),
            t1 = new Trainer(one, { lr: 0.02 });
          tg.init(5);
          t1.init(5);
          const rg = await tg.fit(data(samples), { epochs: 3, seed: 9, reportsPerEpoch: 2 });
          const r1 = await t1.fit(data(samples), { epochs: 3, seed: 9, reportsPerEpoch: 2 });
          expect(rg.steps).toBe(r1.steps);
          expect(rg.path).toMatch(/^layers/);
          const reps = group.replicas.map(params);
          for (const r of reps.slice(1)) expect(identical(reps[0]!, r)).toBe(true);
          const rel = maxRel(reps[0]!, params(one));
          console.log(`nccl ${order} ${optimizer}: group vs one GPU max rel ${rel.toExponential(2)}, loss ${rg.loss} vs ${r1.loss}`);
          // Adam's step is about lr whatever the gradient's size: rounding noise in a near-zero
          // gradient moves a weight further than under SGD.
          const tol = optimizer === 'adam' ? 1e-6 : 1e-9;
          expect(rel).toBeLessThanOrEqual(tol);
          expect(rg.loss).toBeCloseTo(r1.loss, 9);
          expect(rg.accuracy).toBe(r1.accuracy);
          // Further steps on a caller's global batch (fewer rows than the global batch).
          const d = data(PER_GPU * world - 3);
          const mg = await tg.step(d.x, { labels: d.labels }),
            m1 = await t1.step(d.x, { labels: d.labels });
          expect(mg.loss).toBeCloseTo(m1.loss, 9);
          const after = group.replicas.map(params);
          for (const r of after.slice(1)) expect(identical(after[0]!, r)).toBe(true);
          expect(maxRel(after[0]!, params(one))).toBeLessThanOrEqual(tol);
          // gradients(): the group's gradient of the mean loss is the one-GPU gradient.
          await tg.gradients(d.x, { labels: d.labels });
          await t1.gradients(d.x, { labels: d.labels });
          const g = (a: Arena) => [Float64Array.from(a.view(1, 'dw')), Float64Array.from(a.view(3, 'db'))];
          expect(maxRel(g(group.replicas[0]!), g(one))).toBeLessThanOrEqual(1e-9);
        } finally {
          group.dispose();
          one.dispose();
        }
      }, 120_000);
    }
  }

  it('float32: replicas stay bit-identical and close to one GPU', async () => {
    const s32 = (batch: number): LayoutSpec => ({ ...spec(batch, PER_GPU * world * 4, 'layer-major', 'momentum'), dtype: 'float32' });
    const group = DataParallel.create(planLayout(s32(PER_GPU)), { devices });
    const one = Arena.create(planLayout(s32(PER_GPU * world)), { backend: 'cuda' });
    try {
      const tg = new Trainer(group, { lr: 0.02 }),
        t1 = new Trainer(one, { lr: 0.02 });
      tg.init(2);
      t1.init(2);
      const x = Float32Array.from(data(PER_GPU * world * 4).x),
        labels = data(PER_GPU * world * 4).labels;
      await tg.fit({ x, labels }, { epochs: 2, seed: 4 });
      await t1.fit({ x, labels }, { epochs: 2, seed: 4 });
      const bytes = (a: Arena) => {
        a.toHost();
        return Buffer.from(a.bytes(a.plan.region(1, 'w')!.offset, a.plan.region(1, 'w')!.bytes));
      };
      for (const r of group.replicas.slice(1)) expect(Buffer.compare(bytes(group.replicas[0]!), bytes(r))).toBe(0);
      const b = group.replicas[0]!.view(1, 'w');
      one.toHost();
      const w1 = one.view(1, 'w');
      let m = 0;
      for (let i = 0; i < b.length; i++) m = Math.max(m, Math.abs(b[i]! - w1[i]!));
      expect(m).toBeLessThanOrEqual(1e-4);
    } finally {
      group.dispose();
      one.dispose();
    }
  }, 120_000);

  // precision on a group: every replica's run allocates its tf32x3 workspace on its own device
  // (cudaMallocAsync on the replica's stream); the products differ from fp32 (the option reaches
  // every replica) and the replicas stay bit-identical, close to one GPU in the same precision.
  it.each([
    ['tf32x3', 1e-4],
    ['tf32', 1e-3],
    ['bf16', 1e-3],
    ['fp16', 1e-3],
  ] as const)(
    'float32, precision %s: replicas bit-identical, close to one GPU',
    async (precision, tol) => {
      const s32 = (batch: number): LayoutSpec => ({ ...spec(batch, PER_GPU * world * 4, 'layer-major', 'sgd'), dtype: 'float32' });
      const group = DataParallel.create(planLayout(s32(PER_GPU)), { devices });
      const one = Arena.create(planLayout(s32(PER_GPU * world)), { backend: 'cuda' });
      const fp32 = Arena.create(planLayout(s32(PER_GPU * world)), { backend: 'cuda' });
      try {
        const tg = new Trainer(group, { lr: 0.02, precision }),
          t1 = new Trainer(one, { lr: 0.02, precision }),
          tf = new Trainer(fp32, { lr: 0.02 });
        tg.init(2);
        t1.init(2);
        tf.init(2);
        const x = Float32Array.from(data(PER_GPU * world * 4).x),
          labels = data(PER_GPU * world * 4).labels;
        for (const t of [tg, t1, tf]) await t.fit({ x, labels }, { epochs: 2, seed: 4 });
        const w0 = layer1W(group.replicas[0]!);
        for (const r of group.replicas.slice(1)) expect(Buffer.compare(Buffer.from(w0.buffer), Buffer.from(layer1W(r).buffer))).toBe(0);
        expect(maxAbsDiff(w0, layer1W(one))).toBeLessThanOrEqual(tol);
        expect(maxAbsDiff(layer1W(one), layer1W(fp32))).toBeGreaterThan(0); // the precision took effect
        if (precision === 'fp16') expect({ scale: tg.lossScale, skipped: tg.skippedSteps }).toEqual({ scale: t1.lossScale, skipped: t1.skippedSteps });
      } finally {
        group.dispose();
        one.dispose();
        fp32.dispose();
      }
    },
    120_000,
  );

  // The overlapped schedule (NN_ARENA_SYNC_OVERLAP, default on): each layer's dw before its error
  // product, handed over between them, the steps on a stream of their own; here with the first
  // layer's dw, large, reduced in slices as its product writes them (NN_ARENA_SYNC_SLICE=16:
  // 2 slices of 2,056 units in float64; 3 uneven ones of 4,099 in float32). The same training as
  // the schedule before it (0), replicas bit-identical, and in float64 one GPU on the global batch.
  it.each([
    ['float64', 'fp32', [2048, 2056, 5], 8],
    ['float32', 'fp32', [3072, 4099, 5], 512],
    ['float32', 'tf32', [3072, 4099, 5], 512],
    ['float32', 'bf16', [3072, 4099, 5], 512],
  ] as const)(
    '%s, %s: a large first layer reduced in slices trains as the unsliced schedule',
    async (dtype, precision, layers, perGpu) => {
      const samples = perGpu * world * 2;
      const big = (batch: number): LayoutSpec => ({
        layers: [...layers],
        batch,
        samples,
        activations: ['relu', 'softmax'],
        dtype,
        order: 'layer-major',
        optimizer: 'momentum',
      });
      const values = Array.from({ length: samples * layers[0] }, (_, i) => Math.sin(i * 0.37));
      const x = dtype === 'float64' ? Float64Array.from(values) : Float32Array.from(values);
      const labels = Int32Array.from({ length: samples }, (_, i) => (i * 7) % 5);
      const trained = async (overlap: boolean, target: Arena | DataParallel) => {
        process.env.NN_ARENA_SYNC_OVERLAP = overlap ? '1' : '0';
        process.env.NN_ARENA_SYNC_SLICE = '16';
        try {
          const t = new Trainer(target, { lr: 0.01, precision });
          t.init(3);
          await t.fit({ x, labels }, { epochs: 2, seed: 5 });
          const arena = target instanceof DataParallel ? target.replicas[0]! : target;
          arena.toHost();
          return ['w', 'b'].flatMap((k) => [1, 2].map((l) => Float64Array.from(arena.view(l, k as 'w' | 'b'))));
        } finally {
          delete process.env.NN_ARENA_SYNC_OVERLAP;
          delete process.env.NN_ARENA_SYNC_SLICE;
        }
      };
      const groups = [DataParallel.create(planLayout(big(perGpu)), { devices }), DataParallel.create(planLayout(big(perGpu)), { devices })];
      const one = Arena.create(planLayout(big(perGpu * world)), { backend: 'cuda' });
      try {
        const sliced = await trained(true, groups[0]!);
        const whole = await trained(false, groups[1]!);
        for (const g of groups) {
          const first = params(g.replicas[0]!);
          for (const r of g.replicas.slice(1)) expect(identical(first, params(r))).toBe(true);
        }
        const tol = dtype === 'float64' ? 1e-9 : precision === 'fp32' ? 1e-4 : 1e-3;
        console.log(`nccl slices ${dtype} ${precision}: sliced vs whole max rel ${maxRel(sliced, whole)} (bit-identical: ${identical(sliced, whole)})`);
        expect(maxRel(sliced, whole)).toBeLessThanOrEqual(tol);
        if (dtype === 'float64') expect(maxRel(sliced, await trained(true, one))).toBeLessThanOrEqual(tol);
      } finally {
        for (const g of groups) g.dispose();
        one.dispose();
      }
    },
    240_000,
  );

  // Graphed group steps (NN_ARENA_SYNC_GRAPHS, on by default; GradSync::graphs): from the second
  // step a replica's step, its all-reduces and its other streams' steps included, is captured
  // once and replayed; the same kernels and collectives in the same order as direct launches
  // (NN_ARENA_SYNC_GRAPHS=0), so the same bits, in either schedule, either order, on either wire, with an
  // uneven last step.
  it.each([
    ['float64', 'layer-major', 'momentum', 'full', '1'],
    ['float64', 'kind-major', 'adam', 'full', '1'],
    ['float64', 'layer-major', 'adam', 'full', '0'],
    ['float32', 'layer-major', 'momentum', 'bf16', '1'],
  ] as const)(
    '%s, %s, %s, %s wire, overlap %s: graphed group steps give the bits of direct ones',
    async (dtype, order, optimizer, gradients, overlap) => {
      const samples = PER_GPU * world * 5 - 3;
      const plan = planLayout({ ...spec(PER_GPU, samples, order, optimizer), dtype });
      const x = dtype === 'float64' ? data(samples).x : Float32Array.from(data(samples).x);
      const labels = data(samples).labels;
      const trained = async (graph: boolean) => {
        process.env.NN_ARENA_SYNC_GRAPHS = graph ? '1' : '0';
        process.env.NN_ARENA_SYNC_OVERLAP = overlap;
        const g = DataParallel.create(plan, { devices, gradients });
        try {
          const t = new Trainer(g, { lr: 0.01 });
          t.init(6);
          const r = await t.fit({ x, labels }, { epochs: 3, seed: 2 });
          const graphSteps = g.replicas.map((a) => handleOf(a).graphSteps());
          const first = params(g.replicas[0]!);
          for (const a of g.replicas.slice(1)) expect(identical(first, params(a))).toBe(true);
          return { first, loss: r.loss, graphSteps };
        } finally {
          g.dispose();
          delete process.env.NN_ARENA_SYNC_GRAPHS;
          delete process.env.NN_ARENA_SYNC_OVERLAP;
        }
      };
      const direct = await trained(false);
      const graphed = await trained(true);
      expect(direct.graphSteps.every((n) => n === 0)).toBe(true);
      // The last epoch's steps, the uneven last one aside, replayed (the first run captured at its second).
      for (const n of graphed.graphSteps) expect(n).toBeGreaterThanOrEqual(3);
      expect(identical(graphed.first, direct.first)).toBe(true);
      expect(graphed.loss).toBe(direct.loss);
    },
    120_000,
  );

  it('every op (embedding, norms, dropout, residual): replicas bit-identical, equal to one GPU on the global batch', async () => {
    // Dropout draws its mask by the group's row (a replica's rows are the group's [rank x batch,
    // ...)), so the group drops what one GPU drops on the global batch, and replicas differ.
    const layers = [...EVERY_OP_NET];
    const per = 8,
      samples = per * world * 4;
    const x = everyOpRows(samples, 0.37);
    const labels = Int32Array.from({ length: samples }, (_, i) => (i * 7) % 3);
    const plan = (batch: number) => planLayout({ layers, batch, samples, dtype: 'float64', optimizer: 'adamw' });
    const group = DataParallel.create(plan(per), { devices });
    const one = Arena.create(plan(per * world), { backend: 'cuda' });
    try {
      const tg = new Trainer(group, { lr: 0.01, dropoutSeed: 4 }),
        t1 = new Trainer(one, { lr: 0.01, dropoutSeed: 4 });
      tg.init(3);
      t1.init(3);
      const rg = await tg.fit({ x, labels }, { epochs: 2, seed: 1 });
      const r1 = await t1.fit({ x, labels }, { epochs: 2, seed: 1 });
      const reps = group.replicas.map(params);
      for (const r of reps.slice(1)) expect(identical(reps[0]!, r)).toBe(true);
      const rel = maxRel(reps[0]!, params(one));
      console.log(`nccl ops: group vs one GPU max rel ${rel.toExponential(2)}, loss ${rg.loss} vs ${r1.loss}`);
      expect(rel).toBeLessThanOrEqual(1e-6); // AdamW: as the adam cases above
      expect(rg.loss).toBeCloseTo(r1.loss, 9);
    } finally {
      group.dispose();
      one.dispose();
    }
  });

  // The measured advice (nn-arena doctor --data-parallel): both sides timed, the throughput their
  // ratio, the advice what the ratio says. S-sized: two GPUs were slower than one on 2 x H200.
  it('adviseDataParallel times one GPU and the group and advises by the ratio', async () => {
    const { adviseDataParallel } = await import('../../src/tools.js');
    const r = await adviseDataParallel({ layers: [784, 128, 10], batch: 100 }, { devices, precision: 'tf32', steps: 50 });
    console.log(`nccl advice: ${r.advice}: ${r.why}`);
    expect(r.oneGpuUsPerStep).toBeGreaterThan(0);
    expect(r.groupUsPerStep).toBeGreaterThan(0);
    expect(r.throughput).toBeCloseTo((world * r.oneGpuUsPerStep!) / r.groupUsPerStep!, 9);
    expect(r.advice).toBe(r.throughput! >= 1.1 ? 'group' : 'one-gpu');
    expect(r).toMatchObject({ devices, precision: 'tf32', perGpuBatch: 100 });
  }, 120_000);

  // gradients: 'bf16': each range rounded to bf16 on the wire, the sums widened back. After a
  // step every dw is a bf16 value (the group's sum of bf16 values, rounded once); training keeps the replicas bit-identical, near the full wire's and not equal to it.
  it("gradients 'bf16' on the wire: reduced gradients are bf16 values, replicas bit-identical, near the full wire", async () => {
    const s32 = (batch: number): LayoutSpec => ({ ...spec(batch, PER_GPU * world * 4, 'layer-major', 'sgd'), dtype: 'float32' });
    const wired = DataParallel.create(planLayout(s32(PER_GPU)), { devices, gradients: 'bf16' });
    const full = DataParallel.create(planLayout(s32(PER_GPU)), { devices });
    try {
      const x = Float32Array.from(data(PER_GPU * world * 4).x),
        labels = data(PER_GPU * world * 4).labels;
      const trainers = [wired, full].map((g) => new Trainer(g, { lr: 0.02 }));
      for (const t of trainers) t.init(2);
      for (const t of trainers) await t.fit({ x, labels }, { epochs: 2, seed: 4 });
      // The last step's reduced gradients stay in dw (SGD in a group never folds the step).
      for (const a of wired.replicas) {
        a.toHost();
        for (let l = 1; l <= 3; l++) {
          const bits = new Uint32Array(Float32Array.from(a.view(l, 'dw')).buffer);
          expect(bits.some((b) => b !== 0)).toBe(true);
          expect(bits.every((b) => (b & 0xffff) === 0)).toBe(true);
        }
      }
      const w0 = layer1W(wired.replicas[0]!);
      for (const r of wired.replicas.slice(1)) expect(Buffer.compare(Buffer.from(w0.buffer), Buffer.from(layer1W(r).buffer))).toBe(0);
      const d = maxAbsDiff(w0, layer1W(full.replicas[0]!));
      console.log(`nccl bf16 wire: max |w - full wire's w| ${d}`);
      expect(d).toBeGreaterThan(0);
      expect(d).toBeLessThanOrEqual(1e-3);
    } finally {
      wired.dispose();
      full.dispose();
    }
  }, 120_000);

  it.each(['0', '1'])(
    'two processes (RANK, WORLD_SIZE, MASTER_ADDR/PORT) end bit-identical and equal to the in-process group (graphs %s)',
    async (graphs) => {
      process.env.NN_ARENA_SYNC_GRAPHS = graphs; // the ranks inherit it
      const port = await new Promise<number>((resolve) => {
        const s = net.createServer().listen(0, '127.0.0.1', () => {
          const p = (s.address() as net.AddressInfo).port;
          s.close(() => resolve(p));
        });
      });
      const samples = PER_GPU * 2 * 4 + 3;
      const sp = spec(PER_GPU, samples, 'kind-major', 'adam');
      const run = { samples, epochs: 2, seed: 6, lr: 0.01 };
      const rank = (r: number) =>
        new Promise<{ rank: number; weights?: string; loss?: number; code?: string; message?: string }>((resolve, reject) => {
          const p = spawn(process.execPath, ['test/fixtures/nccl-rank.mjs'], {
            env: {
              ...process.env,
              RANK: String(r),
              LOCAL_RANK: String(r),
              WORLD_SIZE: '2',
              MASTER_ADDR: '127.0.0.1',
              MASTER_PORT: String(port),
              DP_SPEC: JSON.stringify(sp),
              DP_RUN: JSON.stringify(run),
            },
            stdio: ['ignore', 'pipe', 'inherit'],
          });
          let out = '';
          p.stdout.on('data', (c) => {
            out += c;
          });
          p.on('error', reject);
          p.on('close', () => {
            try {
              resolve(JSON.parse(out.trim().split('\n').pop()!));
            } catch {
              reject(new Error(`rank ${r}: ${out}`));
            }
          });
        });
      const [r0, r1] = await Promise.all([rank(0), rank(1)]);
      expect(r0.code, r0.message).toBeUndefined();
      expect(r1.code, r1.message).toBeUndefined();
      expect(r0.weights).toBe(r1.weights);
      expect(r0.loss).toBe(r1.loss);
      // The same training in one process.
      const group = DataParallel.create(planLayout(sp), { devices: [0, 1] });
      try {
        const t = new Trainer(group, { lr: run.lr });
        t.init(run.seed);
        const d = data(samples);
        const r = await t.fit(d, { epochs: run.epochs, seed: run.seed });
        const a = group.replicas[0]!;
        a.toHost();
        const mine: Buffer[] = [];
        for (let l = 1; l < sp.layers.length; l++) for (const k of ['w', 'b'] as const) mine.push(Buffer.from(Float64Array.from(a.view(l, k)).buffer));
        expect(Buffer.concat(mine).toString('base64')).toBe(r0.weights);
        expect(r.loss).toBe(r0.loss);
      } finally {
        group.dispose();
        delete process.env.NN_ARENA_SYNC_GRAPHS;
      }
    },
    180_000,
  );

  // Graphed (NN_ARENA_SYNC_GRAPHS, on by default): the healthy replica's run replays the graph
  // its fit left, whose all-reduce waits for the failed one; the group aborts on a thread of its
  // own and destroys the graphs meanwhile (NCCL's abort waits until none names the communicator).
  it.each(['0', '1'])(
    'a failing replica rejects the run with its cause; the group then refuses to run (graphs %s)',
    async (graphs) => {
      process.env.NN_ARENA_SYNC_GRAPHS = graphs;
      const group = DataParallel.create(planLayout(spec(PER_GPU, 64, 'layer-major', 'sgd')), { devices });
      try {
        const t = new Trainer(group);
        t.init(1);
        await t.fit(data(64), { epochs: 1 }); // connections up
        const base = { op: OPS.train, loss: LOSSES['cross-entropy'], resident: true, samples: 64, reduce: true, globalBatch: PER_GPU * world };
        const params = devices.map((_, r) => ({ ...base, shardOffset: r * PER_GPU }));
        params[world - 1] = { ...params[world - 1]!, shardOffset: PER_GPU * world }; // outside the global batch
        await expect(runGroup(group, params)).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
        await expect(
          runGroup(
            group,
            devices.map((_, r) => ({ ...base, shardOffset: r * PER_GPU })),
          ),
        ).rejects.toMatchObject({ code: 'NCCL_ERROR' });
      } finally {
        group.dispose();
        delete process.env.NN_ARENA_SYNC_GRAPHS;
      }
    },
    60_000,
  );
});
