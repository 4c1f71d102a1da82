// Data parallelism on a machine without a GPU: the environment a rank reads, the TCP rendezvous
// (2, 4 and 8 processes exchanging a fake 128-byte id, and every failure it reports), the shard
// arithmetic of a replica's run (CPU backend: the gradients of the shards add up to the
// one-arena gradient of the global batch), and the pass-through and typed errors without
// NCCL. The GPU side is test/gpu/nccl.gpu.test.ts.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, DataParallel, ncclInfo, OptionError, planLayout, readParallelEnv, rendezvous, Trainer, type LayoutSpec } from '../src/index.js';
import { runArena } from '../src/internal.js';
import { OPS, LOSSES } from '../src/native/addon.js';
import { codeOf } from './support/errors.js';
import { freePort } from './support/net.js';

const CHILD = 'test/fixtures/rendezvous-child.mjs';

interface ChildResult {
  rank: number;
  id?: string;
  code?: string;
  message?: string;
}

function rank(env: Record<string, string>): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CHILD], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '',
      err = '';
    p.stdout.on('data', (c) => {
      out += c;
    });
    p.stderr.on('data', (c) => {
      err += c;
    });
    p.on('error', reject);
    p.on('close', (code) => {
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!) as ChildResult);
      } catch {
        reject(new Error(`rank exited ${code}: ${out} ${err}`));
      }
    });
  });
}

const fakeId = (seed: number) => Buffer.from(Uint8Array.from({ length: 128 }, (_, i) => (i * 31 + seed) & 255)).toString('base64');

describe('readParallelEnv', () => {
  const ok = { RANK: '1', WORLD_SIZE: '4', LOCAL_RANK: '1', MASTER_ADDR: 'node0', MASTER_PORT: '29500' };
  it('reads a full set, and LOCAL_RANK defaults to RANK', () => {
    expect(readParallelEnv(ok)).toEqual({ rank: 1, world: 4, localRank: 1, masterAddr: 'node0', masterPort: 29500 });
    const { LOCAL_RANK: _, ...noLocal } = ok;
    expect(readParallelEnv({ ...noLocal, RANK: '3' }).localRank).toBe(3);
    // A world of one needs no rendezvous address.
    expect(readParallelEnv({ RANK: '0', WORLD_SIZE: '1' })).toMatchObject({ rank: 0, world: 1, masterPort: 0 });
  });
  it.each([
    [{ ...ok, WORLD_SIZE: undefined }, 'WORLD_SIZE'],
    [{ ...ok, WORLD_SIZE: '0' }, 'WORLD_SIZE'],
    [{ ...ok, WORLD_SIZE: 'two' }, 'WORLD_SIZE'],
    [{ ...ok, RANK: undefined }, 'RANK'],
    [{ ...ok, RANK: '4' }, 'RANK'],
    [{ ...ok, RANK: '-1' }, 'RANK'],
    [{ ...ok, RANK: '1.5' }, 'RANK'],
    [{ ...ok, LOCAL_RANK: 'gpu1' }, 'LOCAL_RANK'],
    [{ ...ok, MASTER_ADDR: undefined }, 'MASTER_ADDR'],
    [{ ...ok, MASTER_ADDR: '  ' }, 'MASTER_ADDR'],
    [{ ...ok, MASTER_PORT: undefined }, 'MASTER_PORT'],
    [{ ...ok, MASTER_PORT: '70000' }, 'MASTER_PORT'],
    [{ ...ok, MASTER_PORT: '0' }, 'MASTER_PORT'],
  ])('BAD_ENV for %o names %s', (env, field) => {
    let error: unknown;
    try {
      readParallelEnv(env);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(OptionError);
    expect(error).toMatchObject({ code: 'BAD_ENV', field, value: env[field as keyof typeof env] });
  });
});

describe('rendezvous over TCP', () => {
  it.each([2, 4, 8])(
    "%i processes all receive rank 0's id",
    async (world) => {
      const port = await freePort();
      const base = { WORLD_SIZE: String(world), MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port), FAKE_ID_SEED: String(world) };
      // Peers first: they retry until rank 0 listens.
      const results = await Promise.all(Array.from({ length: world }, (_, r) => rank({ ...base, RANK: String(world - 1 - r) })));
      expect(results.map((r) => r.rank).sort()).toEqual(Array.from({ length: world }, (_, r) => r));
      for (const r of results) expect(r).toEqual({ rank: r.rank, id: fakeId(world) });
    },
    60_000,
  );

  it('WORLD_MISMATCH on both sides when a peer has another WORLD_SIZE', async () => {
    const port = await freePort();
    const base = { MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port) };
    const [r0, r1] = await Promise.all([rank({ ...base, RANK: '0', WORLD_SIZE: '2' }), rank({ ...base, RANK: '1', WORLD_SIZE: '3' })]);
    expect(r0).toMatchObject({ code: 'WORLD_MISMATCH' });
    expect(r1).toMatchObject({ code: 'WORLD_MISMATCH' });
    expect(r1.message).toMatch(/WORLD_SIZE=3.*WORLD_SIZE=2/);
  }, 30_000);

  it('BAD_RANK when two processes claim one rank', async () => {
    const port = await freePort();
    const base = { WORLD_SIZE: '3', MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port) };
    const rs = await Promise.all([rank({ ...base, RANK: '0' }), rank({ ...base, RANK: '2' }), rank({ ...base, RANK: '2' })]);
    expect(rs.find((r) => r.rank === 0)).toMatchObject({ code: 'BAD_RANK' });
    expect(rs.filter((r) => r.code === 'BAD_RANK').length).toBeGreaterThanOrEqual(2);
  }, 30_000);

  it('PORT_BUSY when MASTER_PORT is taken', async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      await expect(rendezvous({ rank: 0, world: 2, addr: '127.0.0.1', port, id: new Uint8Array(128), timeoutMs: 5000 })).rejects.toMatchObject({
        name: 'ArenaError',
        code: 'PORT_BUSY',
      });
    } finally {
      blocker.close();
    }
  });

  it('RENDEZVOUS_TIMEOUT names the ranks missing, and on a peer without rank 0', async () => {
    const port = await freePort();
    const e0 = await rendezvous({ rank: 0, world: 4, addr: '127.0.0.1', port, id: new Uint8Array(128), timeoutMs: 300 }).catch((e) => e);
    expect(e0).toBeInstanceOf(ArenaError);
    expect(e0).toMatchObject({ code: 'RENDEZVOUS_TIMEOUT' });
    expect(e0.message).toMatch(/missing ranks 1, 2, 3/);
    const e1 = await rendezvous({ rank: 1, world: 2, addr: '127.0.0.1', port, timeoutMs: 400 }).catch((e) => e);
    expect(e1).toMatchObject({ code: 'RENDEZVOUS_TIMEOUT' });
  });

  it('PEER_LOST when a peer disconnects before every rank joined; junk connections are ignored', async () => {
    const port = await freePort();
    const served = rendezvous({ rank: 0, world: 3, addr: '127.0.0.1', port, id: new Uint8Array(128), timeoutMs: 10_000 }).catch((e) => e);
    await new Promise((r) => setTimeout(r, 100));
    const junk = net.connect(port, '127.0.0.1', () => junk.write('GET / HTTP/1.0\n\n'));
    junk.on('error', () => {});
    await new Promise((r) => setTimeout(r, 100));
    const peer = net.connect(port, '127.0.0.1', () => {
      peer.write(JSON.stringify({ magic: 'nn-arena-rendezvous', version: 1, rank: 2, world: 3 }) + '\n');
      setTimeout(() => peer.destroy(), 100);
    });
    const e = await served;
    expect(e).toMatchObject({ code: 'PEER_LOST' });
    expect(e.message).toMatch(/rank 2/);
  });

  it('PEER_LOST on a peer whose rank 0 goes away without an answer', async () => {
    const port = await freePort();
    const server = net.createServer((s) => s.once('data', () => s.destroy()));
    await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
    try {
      await expect(rendezvous({ rank: 1, world: 2, addr: '127.0.0.1', port, timeoutMs: 5000 })).rejects.toMatchObject({ code: 'PEER_LOST' });
    } finally {
      server.close();
    }
  });
});

// The arithmetic of a replica's run, on the CPU backend: rows [shardOffset, +batch) of every
// global batch, and the loss mean over the group's rows, so that the gradients of the shards
// add up to the gradient of the global batch.
describe('shards of a global batch (CPU backend)', () => {
  const spec = (batch: number, samples: number): LayoutSpec => ({ layers: [6, 5, 3], batch, samples, activations: ['tanh', 'softmax'], dtype: 'float64' });
  const X = Float64Array.from({ length: 12 * 6 }, (_, i) => Math.sin(i * 0.7));
  const Y = Float64Array.from({ length: 12 * 3 }, (_, i) => (i % 3 === Math.floor(i / 3) % 3 ? 1 : 0));

  function arena(batch: number, samples: number): Arena {
    const a = Arena.create(planLayout(spec(batch, samples)), { backend: 'cpu' });
    for (let l = 1; l < 3; l++) {
      const w = a.view(l, 'w');
      for (let i = 0; i < w.length; i++) w[i] = Math.cos(i * 1.3 + l);
      a.view(l, 'b').fill(0.01 * l);
    }
    a.view(0, 'xdata').set(X.subarray(0, samples * 6));
    a.view(2, 'ydata').set(Y.subarray(0, samples * 3));
    a.toDevice();
    return a;
  }
  const grads = (a: Arena) => {
    a.toHost();
    return [...a.view(1, 'dw'), ...a.view(1, 'db'), ...a.view(2, 'dw'), ...a.view(2, 'db')];
  };
  const base = { op: OPS.grad, loss: LOSSES['cross-entropy'], resident: true, permA: 7, permC: 3 };

  it.each([
    [12, 0],
    [12, 1],
    [10, 1],
  ])('samples %i, step %i: the shards add up to the whole', async (samples, firstBatch) => {
    const whole = arena(8, samples);
    const shards = [arena(4, samples), arena(4, samples)];
    try {
      await runArena(whole, { ...base, samples, firstBatch });
      for (const [r, a] of shards.entries()) await runArena(a, { ...base, samples, firstBatch, globalBatch: 8, shardOffset: 4 * r });
      const g = grads(whole);
      const [g0, g1] = shards.map(grads);
      for (let i = 0; i < g.length; i++) expect(g0![i]! + g1![i]!).toBeCloseTo(g[i]!, 12);
      expect(g.some((v) => Math.abs(v) > 1e-3)).toBe(true);
      if (samples === 10 && firstBatch === 1) expect(g1!.every((v) => v === 0)).toBe(true); // rows 8, 9: shard 1 is empty
      // Rows accumulated: the whole step's rows split between the shards.
      const rows = (a: Arena) => {
        a.toHost({ layers: [2], kinds: ['stats'] });
        return a.view(2, 'stats')[2]!;
      };
      expect(rows(shards[0]!) + rows(shards[1]!)).toBe(rows(whole));
    } finally {
      whole.dispose();
      for (const a of shards) a.dispose();
    }
  });

  it('a run on z[0]/y divides by lossRows; a replica with no rows has zero gradients', async () => {
    const whole = arena(8, 12),
      half = arena(4, 12),
      none = arena(4, 12);
    try {
      whole.view(0, 'z').set(X.subarray(0, 8 * 6));
      whole.view(2, 'y').set(Y.subarray(0, 8 * 3));
      whole.toDevice();
      half.view(0, 'z').set(X.subarray(0, 4 * 6));
      half.view(2, 'y').set(Y.subarray(0, 4 * 3));
      half.toDevice();
      await runArena(whole, { op: OPS.grad, loss: LOSSES['cross-entropy'], rows: 4 });
      await runArena(half, { op: OPS.grad, loss: LOSSES['cross-entropy'], rows: 4, lossRows: 8 });
      await runArena(none, { op: OPS.grad, loss: LOSSES['cross-entropy'], rows: 0, lossRows: 8 });
      const g = grads(whole),
        h = grads(half);
      for (let i = 0; i < g.length; i++) expect(h[i]!).toBeCloseTo(g[i]! / 2, 12);
      expect(grads(none).every((v) => v === 0)).toBe(true);
      await expect(runArena(none, { op: OPS.grad, loss: LOSSES['cross-entropy'], rows: 0 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(none, { op: OPS.grad, loss: LOSSES['cross-entropy'], rows: 4, lossRows: 2 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(none, { ...base, samples: 12, globalBatch: 8, shardOffset: 5 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(none, { ...base, samples: 12, globalBatch: 2 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(none, { ...base, samples: 12, globalBatch: 8, firstBatch: 2 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(none, { ...base, samples: 12, reduce: true })).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
    } finally {
      for (const a of [whole, half, none]) a.dispose();
    }
  });
});

describe('data parallelism and K models', () => {
  it('a plan of K models makes no group (NOT_SUPPORTED naming models); reduce on one is refused natively, naming models', async () => {
    const plan = planLayout({ layers: [4, 6, 3], batch: 4, samples: 8, models: 2 });
    const err = (() => {
      try {
        DataParallel.create(plan, { devices: [0], backend: 'cpu' });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ArenaError);
    expect(err).toMatchObject({ code: 'NOT_SUPPORTED', message: expect.stringMatching(/models/) });
    await expect(DataParallel.join(plan, { env: { RANK: '0', WORLD_SIZE: '1' }, backend: 'cpu' })).rejects.toMatchObject({
      code: 'NOT_SUPPORTED',
      message: expect.stringMatching(/models/),
    });
    const a = Arena.create(plan, { backend: 'cpu' });
    try {
      await expect(runArena(a, { op: OPS.grad, loss: LOSSES['cross-entropy'], resident: true, samples: 8, reduce: true })).rejects.toMatchObject({
        code: 'NOT_SUPPORTED',
        message: expect.stringMatching(/models/),
      });
    } finally {
      a.dispose();
    }
  });

  it("shard runs of a K-model arena: each model's shards add up to its whole step", async () => {
    const spec = (batch: number): LayoutSpec => ({ layers: [6, 5, 3], batch, samples: 10, activations: ['tanh', 'softmax'], dtype: 'float64', models: 2 });
    const mk = (batch: number): Arena => {
      const a = Arena.create(planLayout(spec(batch)), { backend: 'cpu' });
      for (let m = 0; m < 2; m++)
        for (let l = 1; l < 3; l++) {
          const w = a.view(l, 'w', m);
          for (let i = 0; i < w.length; i++) w[i] = Math.cos(i * 1.3 + l + 5 * m);
        }
      a.view(0, 'xdata').set(Float64Array.from({ length: 60 }, (_, i) => Math.sin(i * 0.7)));
      a.view(2, 'ydata').set(Float64Array.from({ length: 30 }, (_, i) => (i % 3 === Math.floor(i / 3) % 3 ? 1 : 0)));
      a.toDevice();
      return a;
    };
    const grads = (a: Arena, m: number) => {
      a.toHost();
      return [...a.view(1, 'dw', m), ...a.view(2, 'db', m)];
    };
    const base = { op: OPS.grad, loss: LOSSES['cross-entropy'], resident: true, samples: 10, permA: 7, permC: 3, firstBatch: 1 };
    const whole = mk(8),
      shards = [mk(4), mk(4)];
    try {
      await runArena(whole, base);
      for (const [r, a] of shards.entries()) await runArena(a, { ...base, globalBatch: 8, shardOffset: 4 * r });
      for (let m = 0; m < 2; m++) {
        const g = grads(whole, m),
          g0 = grads(shards[0]!, m),
          g1 = grads(shards[1]!, m);
        for (let i = 0; i < g.length; i++) expect(g0[i]! + g1[i]!).toBeCloseTo(g[i]!, 12);
        expect(g.some((v) => Math.abs(v) > 1e-3)).toBe(true);
        expect(g1.every((v) => v === 0)).toBe(true); // rows 8, 9 of 10: shard 1 is empty, for every model
      }
      expect(grads(whole, 0)).not.toEqual(grads(whole, 1));
    } finally {
      whole.dispose();
      for (const a of shards) a.dispose();
    }
  });
});

describe('data parallelism, compact plans and the trainer primitives', () => {
  const spec: LayoutSpec = { layers: [4, 6, 3], batch: 4, samples: 8, activations: ['relu', 'softmax'] };

  it.each(['sgd', 'adam'] as const)(
    'a compact %s plan makes no group (NOT_SUPPORTED naming compact); reduce on one is refused natively, naming compact',
    async (optimizer) => {
      const plan = planLayout({ ...spec, optimizer, compact: true });
      const err = (() => {
        try {
          DataParallel.create(plan, { devices: [0], backend: 'cpu' });
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(err).toBeInstanceOf(ArenaError);
      expect(err).toMatchObject({ code: 'NOT_SUPPORTED', message: expect.stringMatching(/compact/) });
      await expect(DataParallel.join(plan, { env: { RANK: '0', WORLD_SIZE: '1' }, backend: 'cpu' })).rejects.toMatchObject({
        code: 'NOT_SUPPORTED',
        message: expect.stringMatching(/compact/),
      });
      // The same plan without compact makes a group.
      DataParallel.create(planLayout({ ...spec, optimizer }), { devices: [0], backend: 'cpu' }).dispose();
      const a = Arena.create(plan, { backend: 'cpu' });
      try {
        // checkRun (both backends) names compact before the CPU backend's own refusal of reduce.
        await expect(runArena(a, { op: OPS.train, loss: LOSSES['cross-entropy'], resident: true, samples: 8, reduce: true })).rejects.toMatchObject({
          code: 'NOT_SUPPORTED',
          message: expect.stringMatching(/compact/),
        });
      } finally {
        a.dispose();
      }
    },
  );

  it('forward / backward / update on a group are refused (NOT_SUPPORTED naming the group); step() on it still trains', async () => {
    const group = DataParallel.create(planLayout(spec), { devices: [0], backend: 'cpu' });
    try {
      const t = new Trainer(group, { lr: 0.1 });
      t.init(1);
      const x = Float32Array.from({ length: 16 }, (_, i) => Math.cos(i));
      for (const call of [() => t.forward(x), () => t.backward({ labels: [0, 1, 2, 0] }), () => t.update()]) {
        const e = await (async () => {
          try {
            await call();
          } catch (err) {
            return err;
          }
          return undefined;
        })();
        expect(e).toBeInstanceOf(ArenaError);
        expect(e).toMatchObject({ code: 'NOT_SUPPORTED', message: expect.stringMatching(/data-parallel group/) });
      }
      const before = Array.from(group.replicas[0]!.view(1, 'w'));
      const m = await t.step(x, { labels: [0, 1, 2, 0] });
      expect(Number.isFinite(m.loss)).toBe(true);
      t.syncToHost();
      expect(Array.from(group.replicas[0]!.view(1, 'w'))).not.toEqual(before);
    } finally {
      group.dispose();
    }
  });

  it("backward and update runs take none of a group's run parameters (BAD_ARGUMENT)", async () => {
    const a = Arena.create(planLayout(spec), { backend: 'cpu' });
    try {
      const ce = LOSSES['cross-entropy'];
      await runArena(a, { op: OPS.forward, loss: ce, rows: 4 });
      await expect(runArena(a, { op: OPS.backward, loss: ce, rows: 4, lossRows: 8 })).rejects.toMatchObject({
        code: 'BAD_ARGUMENT',
        message: expect.stringMatching(/lossRows/),
      });
      await expect(runArena(a, { op: OPS.update, loss: ce, lossRows: 8 })).rejects.toMatchObject({
        code: 'BAD_ARGUMENT',
        message: expect.stringMatching(/lossRows/),
      });
      await expect(runArena(a, { op: OPS.backward, loss: ce, rows: 4, reduce: true })).rejects.toMatchObject({
        code: 'BAD_ARGUMENT',
        message: expect.stringMatching(/reduce/),
      });
      await expect(runArena(a, { op: OPS.backward, loss: ce, rows: 4 })).resolves.toBeDefined();
    } finally {
      a.dispose();
    }
  });
});

describe('DataParallel without NCCL', () => {
  const spec: LayoutSpec = { layers: [4, 8, 3], batch: 5, samples: 23, activations: ['relu', 'softmax'], optimizer: 'adam' };
  const x = Float32Array.from({ length: 23 * 4 }, (_, i) => Math.sin(i));
  const labels = Int32Array.from({ length: 23 }, (_, i) => i % 3);

  it('a group of one is a pass-through: the same training as the arena alone', async () => {
    const plan = planLayout(spec);
    const group = DataParallel.create(plan, { devices: [0], backend: 'cpu' });
    const alone = Arena.create(plan, { backend: 'cpu' });
    try {
      expect(group).toMatchObject({ world: 1, rank: 0, globalBatch: 5, reduces: false });
      const a = new Trainer(group, { lr: 0.01 }),
        b = new Trainer(alone, { lr: 0.01 });
      expect(a.globalBatch).toBe(5);
      a.init(7);
      b.init(7);
      const ra = await a.fit({ x, labels }, { epochs: 2, seed: 3 });
      const rb = await b.fit({ x, labels }, { epochs: 2, seed: 3 });
      expect(ra.loss).toBe(rb.loss);
      expect(await a.step(x.subarray(0, 20), { labels: labels.subarray(0, 5) })).toEqual(await b.step(x.subarray(0, 20), { labels: labels.subarray(0, 5) }));
      a.syncToHost();
      b.syncToHost();
      expect(Array.from(group.replicas[0]!.view(2, 'w'))).toEqual(Array.from(alone.view(2, 'w')));
      // From the environment: WORLD_SIZE=1.
      const joined = await DataParallel.join(plan, { env: { RANK: '0', WORLD_SIZE: '1' }, backend: 'cpu' });
      expect(joined.world).toBe(1);
      joined.dispose();
      expect(joined.replicas[0]!.disposed).toBe(true);
    } finally {
      group.dispose();
      alone.dispose();
    }
  });

  it('typed errors: several devices on the CPU, bad devices, a device on the CPU backend, a rank without CUDA', async () => {
    const plan = planLayout(spec);
    expect(codeOf(() => DataParallel.create(plan, { devices: [0, 1], backend: 'cpu' }))).toBe('NOT_SUPPORTED');
    expect(codeOf(() => DataParallel.create(plan, { devices: [] }))).toBe('BAD_OPTION');
    expect(codeOf(() => DataParallel.create(plan, { devices: [1, 1] }))).toBe('BAD_OPTION');
    expect(codeOf(() => DataParallel.create(plan, { devices: [-1] }))).toBe('BAD_OPTION');
    expect(codeOf(() => DataParallel.create(plan, { devices: [0, 1.5] }))).toBe('BAD_OPTION');
    expect(codeOf(() => Arena.create(plan, { backend: 'cpu', device: 1 }))).toBe('BAD_OPTION');
    expect(codeOf(() => Arena.create(plan, { backend: 'cpu', device: -2 }))).toBe('BAD_OPTION');
    await expect(
      DataParallel.join(plan, { env: { RANK: '0', WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1', MASTER_PORT: '1' }, backend: 'cpu' }),
    ).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
    await expect(DataParallel.join(plan, { env: { RANK: '2', WORLD_SIZE: '2' } })).rejects.toMatchObject({ code: 'BAD_ENV', field: 'RANK' });
    const n = ncclInfo();
    expect(typeof n.available).toBe('boolean');
    if (!n.available) expect(n.why).not.toBe('');
  });

  it("gradients on the wire: 'full' or 'bf16' (float32 plans only), typed errors naming gradients, checked before any device", async () => {
    const f32 = planLayout({ ...spec, dtype: 'float32' });
    const f64 = planLayout({ ...spec, dtype: 'float64' });
    for (const gradients of ['full', 'bf16'] as const) DataParallel.create(f32, { devices: [0], backend: 'cpu', gradients }).dispose();
    const refused = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return { code: (e as { code?: string }).code, field: (e as { field?: string }).field, message: (e as Error).message };
      }
      return null;
    };
    expect(refused(() => DataParallel.create(f64, { devices: [0], backend: 'cpu', gradients: 'bf16' }))).toMatchObject({
      code: 'BAD_OPTION',
      field: 'gradients',
      message: expect.stringContaining('float32'),
    });
    expect(refused(() => DataParallel.create(f32, { devices: [0, 1], gradients: 'fp8' as never }))).toMatchObject({ code: 'BAD_OPTION', field: 'gradients' });
    await expect(DataParallel.join(f64, { env: { RANK: '0', WORLD_SIZE: '1' }, backend: 'cpu', gradients: 'bf16' })).rejects.toMatchObject({
      code: 'BAD_OPTION',
      field: 'gradients',
    });
  });

  it('a Trainer on a group of one takes a batch up to the global batch only', async () => {
    const group = DataParallel.create(planLayout(spec), { devices: [0], backend: 'cpu' });
    try {
      const t = new Trainer(group);
      t.init(1);
      await expect(t.step(x.subarray(0, 24), { labels: labels.subarray(0, 6) })).rejects.toMatchObject({ code: 'BAD_DATA' });
      group.dispose();
      expect(() => new Trainer(group)).toThrow(ArenaError);
    } finally {
      group.dispose();
    }
  });
});
