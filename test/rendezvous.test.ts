// The environment a data-parallel rank reads (readParallelEnv) and the TCP rendezvous that hands
// out rank 0's NCCL id: 2, 4 and 8 processes exchanging a fake 128-byte id, and every failure it
// reports. The rest of data parallelism without a GPU: test/parallel.test.ts.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { ArenaError, OptionError, readParallelEnv, rendezvous } from '../src/index.js';
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
