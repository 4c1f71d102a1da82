// The authenticated rendezvous (issue 51): with a job secret the NCCL id goes only to peers that
// prove it (HMAC over fresh nonces), rank 0 proves it to each joiner, a peer that fails is
// dropped while the job goes on, and a process on MASTER_PORT without the secret is refused by
// the joiner (RENDEZVOUS_AUTH). Without a secret only a loopback addr is allowed, unless
// allowUnauthenticated. Local TCP on 127.0.0.1, as test/rendezvous-hardening.test.ts.
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ArenaError, OptionError, readParallelEnv, rendezvous } from '../src/index.js';
import { freePort } from './support/net.js';

const SECRET = 'job-51-secret-0123456789abcdef';
const ID = Uint8Array.from({ length: 128 }, (_, i) => (i * 7 + 3) & 255);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A server on `port` that answers every hello with `answer(hello)` (one line, or nothing) and
 *  records every line it got. */
async function squatter(port: number, answer: (hello: Record<string, unknown>) => string | undefined) {
  const lines: string[] = [];
  const server = net.createServer((s) => {
    let buf = '';
    s.setEncoding('utf8');
    s.on('error', () => {});
    s.on('data', (c: string) => {
      buf += c;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        lines.push(line);
        if (lines.length === 1) {
          const a = answer(JSON.parse(line));
          if (a !== undefined) s.write(a + '\n');
        }
      }
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  return { lines, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('rendezvous with a job secret', () => {
  it("a 3-rank exchange completes and every rank gets rank 0's id (string and bytes secrets)", async () => {
    for (const secret of [SECRET, new TextEncoder().encode(SECRET)]) {
      const port = await freePort();
      const base = { world: 3, addr: '127.0.0.1', port, secret, timeoutMs: 10_000 };
      // Peers first: they retry until rank 0 listens.
      const got = await Promise.all([
        rendezvous({ ...base, rank: 2 }),
        rendezvous({ ...base, rank: 1 }),
        sleep(100).then(() => rendezvous({ ...base, rank: 0, id: ID })),
      ]);
      for (const id of got) expect(id).toEqual(ID);
    }
  }, 30_000);

  it('an impostor with a wrong secret never gets the id (RENDEZVOUS_AUTH); the real rank 1 then joins', async () => {
    const port = await freePort();
    const base = { world: 2, addr: '127.0.0.1', port, timeoutMs: 10_000 };
    const served = rendezvous({ ...base, rank: 0, id: ID, secret: SECRET });
    await sleep(100);
    const impostor = await rendezvous({ ...base, rank: 1, secret: 'not-the-job-secret-at-all-0000' }).catch((e) => e);
    expect(impostor).toBeInstanceOf(ArenaError);
    expect(impostor).toMatchObject({ code: 'RENDEZVOUS_AUTH' });
    // Without a secret at all: refused by rank 0, which goes on waiting.
    const bare = await rendezvous({ ...base, rank: 1 }).catch((e) => e);
    expect(bare).toMatchObject({ code: 'RENDEZVOUS_AUTH' });
    expect(await rendezvous({ ...base, rank: 1, secret: SECRET })).toEqual(ID);
    expect(await served).toEqual(ID);
  }, 30_000);

  it('a hand-made impostor that claims rank 1 and sends a bad proof is dropped, never sent the id', async () => {
    const port = await freePort();
    const served = rendezvous({ rank: 0, world: 2, addr: '127.0.0.1', port, id: ID, secret: SECRET, timeoutMs: 10_000 });
    await sleep(100);
    const received = await new Promise<string>((resolve) => {
      let buf = '';
      const s = net.connect(port, '127.0.0.1', () => {
        s.write(JSON.stringify({ magic: 'nn-arena-rendezvous', version: 1, rank: 1, world: 2, nonce: Buffer.alloc(32, 1).toString('base64') }) + '\n');
      });
      s.setEncoding('utf8');
      s.on('data', (c: string) => {
        if (!buf.includes('\n') && (buf += c).includes('\n')) s.write(JSON.stringify({ proof: Buffer.alloc(32, 9).toString('base64') }) + '\n');
        else buf += c;
      });
      s.on('error', () => {});
      s.on('close', () => resolve(buf));
    });
    const lines = received
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines[0]).toHaveProperty('challenge');
    expect(lines.at(-1)).toMatchObject({ ok: false, code: 'RENDEZVOUS_AUTH' });
    expect(received).not.toContain(Buffer.from(ID).toString('base64'));
    // The job went on: the real rank 1 (its rank not taken by the impostor) completes it.
    expect(await rendezvous({ rank: 1, world: 2, addr: '127.0.0.1', port, secret: SECRET, timeoutMs: 10_000 })).toEqual(ID);
    expect(await served).toEqual(ID);
  }, 30_000);

  it('an unproven wrong WORLD_SIZE does not end the job; rank 0 times out naming the missing rank', async () => {
    const port = await freePort();
    const served = rendezvous({ rank: 0, world: 2, addr: '127.0.0.1', port, id: ID, secret: SECRET, timeoutMs: 800 }).catch((e) => e);
    await sleep(100);
    const liar = await rendezvous({ rank: 1, world: 3, addr: '127.0.0.1', port, secret: 'another-secret-of-16-bytes-plus', timeoutMs: 5000 }).catch((e) => e);
    expect(liar).toMatchObject({ code: 'RENDEZVOUS_AUTH' });
    const e = await served;
    expect(e).toMatchObject({ code: 'RENDEZVOUS_TIMEOUT' });
    expect(e.message).toMatch(/missing rank 1/);
  }, 30_000);
});

describe('a squatter on MASTER_PORT', () => {
  const reply = (id: Uint8Array) => JSON.stringify({ ok: true, id: Buffer.from(id).toString('base64') });
  it.each([
    ['answers with an id at once (no secret)', () => reply(new Uint8Array(128).fill(66))],
    ['answers RENDEZVOUS_AUTH (a rank 0 without secret)', () => JSON.stringify({ ok: false, code: 'RENDEZVOUS_AUTH', message: 'x' })],
    [
      'sends a challenge with a made-up proof',
      () => JSON.stringify({ challenge: Buffer.alloc(32, 5).toString('base64'), proof: Buffer.alloc(32, 6).toString('base64') }),
    ],
  ])(
    'that %s: the joiner fails with RENDEZVOUS_AUTH and never accepts its id',
    async (_, answer) => {
      const port = await freePort();
      const sq = await squatter(port, answer);
      try {
        const e = await rendezvous({ rank: 1, world: 2, addr: '127.0.0.1', port, secret: SECRET, timeoutMs: 5000 }).catch((err) => err);
        expect(e).toBeInstanceOf(ArenaError);
        expect(e).toMatchObject({ code: 'RENDEZVOUS_AUTH' });
        // The joiner sent its hello and nothing after it: no proof to a process that gave none.
        expect(sq.lines).toHaveLength(1);
      } finally {
        await sq.close();
      }
    },
    20_000,
  );

  it('a real rank 0 with another secret: the joiner refuses it (RENDEZVOUS_AUTH)', async () => {
    const port = await freePort();
    const served = rendezvous({ rank: 0, world: 2, addr: '127.0.0.1', port, id: ID, secret: 'rank-0-has-this-other-secret!!', timeoutMs: 600 }).catch((e) => e);
    await sleep(100);
    await expect(rendezvous({ rank: 1, world: 2, addr: '127.0.0.1', port, secret: SECRET, timeoutMs: 5000 })).rejects.toMatchObject({
      code: 'RENDEZVOUS_AUTH',
    });
    expect(await served).toMatchObject({ code: 'RENDEZVOUS_TIMEOUT' });
  }, 20_000);

  it('a joiner with a secret against a rank 0 without: both fail with RENDEZVOUS_AUTH', async () => {
    const port = await freePort();
    const served = rendezvous({ rank: 0, world: 2, addr: '127.0.0.1', port, id: ID, timeoutMs: 5000 }).catch((e) => e);
    await sleep(100);
    await expect(rendezvous({ rank: 1, world: 2, addr: '127.0.0.1', port, secret: SECRET, timeoutMs: 5000 })).rejects.toMatchObject({
      code: 'RENDEZVOUS_AUTH',
    });
    expect(await served).toMatchObject({ code: 'RENDEZVOUS_AUTH' });
  }, 20_000);
});

describe('without a secret', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });
  const remote = { rank: 1, world: 2, addr: '10.255.255.1', port: 29500, timeoutMs: 50 };

  it('a non-loopback addr is refused at once: OptionError naming secret', () => {
    for (const addr of ['10.255.255.1', 'node0', '0.0.0.0', '::']) {
      let err: unknown;
      try {
        void rendezvous({ ...remote, addr }).catch(() => {});
      } catch (e) {
        err = e;
      }
      expect(err, addr).toBeInstanceOf(OptionError);
      expect(err).toMatchObject({ code: 'BAD_OPTION', field: 'secret' });
    }
  });

  it('allowUnauthenticated: accepted, one warning line on stderr for the process', async () => {
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const a = rendezvous({ ...remote, addr: '127.0.0.1', port: await freePort(), allowUnauthenticated: true }).catch((e) => e);
    const b = rendezvous({ ...remote, allowUnauthenticated: true }).catch((e) => e);
    const c = rendezvous({ ...remote, allowUnauthenticated: true }).catch((e) => e);
    await Promise.all([a, b, c]);
    const warnings = write.mock.calls.map((c) => String(c[0])).filter((t) => t.includes('unauthenticated rendezvous'));
    expect(warnings).toHaveLength(1); // loopback needs no warning; the remote ones warn once
    expect(warnings[0]!.trim().split('\n')).toHaveLength(1);
  });

  it('a loopback addr keeps working as before', async () => {
    for (const addr of ['127.0.0.1', 'localhost']) {
      const port = await freePort();
      const got = await Promise.all([
        rendezvous({ rank: 0, world: 2, addr, port, id: ID, timeoutMs: 10_000 }),
        rendezvous({ rank: 1, world: 2, addr, port, timeoutMs: 10_000 }),
      ]);
      expect(got).toEqual([ID, ID]);
    }
  }, 30_000);
});

describe('the secret option', () => {
  it.each([['short'], [new Uint8Array(15)], [''], [42], [null]])('secret = %o: OptionError BAD_OPTION naming secret, value not echoed', (secret) => {
    let err: unknown;
    try {
      void rendezvous({ rank: 1, world: 2, addr: '127.0.0.1', port: 29500, timeoutMs: 50, secret } as never).catch(() => {});
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OptionError);
    expect(err).toMatchObject({ code: 'BAD_OPTION', field: 'secret' });
    if (secret === 'short') expect((err as Error).message).not.toContain('short');
  });

  it('allowUnauthenticated must be a boolean', () => {
    expect(() => rendezvous({ rank: 1, world: 2, addr: '127.0.0.1', port: 29500, allowUnauthenticated: 'yes' } as never)).toThrow(OptionError);
  });

  it('readParallelEnv reads NN_ARENA_JOB_SECRET (absent when unset) and refuses a short one without echoing it', () => {
    const env = { RANK: '1', WORLD_SIZE: '2', MASTER_ADDR: 'node0', MASTER_PORT: '29500' };
    expect(readParallelEnv(env)).not.toHaveProperty('secret');
    expect(readParallelEnv({ ...env, NN_ARENA_JOB_SECRET: SECRET }).secret).toBe(SECRET);
    let err: unknown;
    try {
      readParallelEnv({ ...env, NN_ARENA_JOB_SECRET: 'tiny-secret' });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'BAD_ENV', field: 'NN_ARENA_JOB_SECRET' });
    expect((err as Error).message).not.toContain('tiny-secret');
  });
});
