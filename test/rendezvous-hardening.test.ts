// The rendezvous server under hostile connections (issue 27): a connection that is not a peer is
// dropped at once (an overlong line is not buffered), every socket closes when the rendezvous
// settles (nothing keeps the process alive), and the options are checked with typed errors.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { OptionError, rendezvous } from '../src/index.js';
import { freePort } from './support/net.js';

const HELLO = (rank: number, world: number) => JSON.stringify({ magic: 'nn-arena-rendezvous', version: 1, rank, world }) + '\n';

/** A peer of rank `rank` that resolves with the line rank 0 sends. */
function peer(port: number, rank: number, world: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(HELLO(rank, world)));
    let buf = '';
    s.setEncoding('utf8');
    s.on('data', (c: string) => {
      buf += c;
    });
    s.on('close', () => resolve(buf));
    s.on('error', reject);
  });
}

/** A connection that resolves with how long it stayed open (ms) and the bytes it wrote. */
function junk(port: number, send: (s: net.Socket) => void): Promise<{ ms: number; written: number }> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const s = net.connect(port, '127.0.0.1', () => send(s));
    s.on('error', () => {});
    s.on('close', () => resolve({ ms: Date.now() - t0, written: s.bytesWritten }));
  });
}

describe('rendezvous: hostile connections', () => {
  it('an overlong line is dropped at once, not buffered; the real peer still joins', async () => {
    const port = await freePort();
    const served = rendezvous({ rank: 0, world: 2, addr: '127.0.0.1', port, id: new Uint8Array(128).fill(7), timeoutMs: 20_000 });
    await new Promise((r) => setTimeout(r, 100));
    // 39 MiB without a newline, written as fast as the socket takes it
    const chunk = Buffer.alloc(1 << 20, 0x61);
    const flood = junk(port, (s) => {
      let left = 39;
      const pump = () => {
        while (left > 0 && !s.destroyed) {
          left--;
          if (!s.write(chunk)) {
            s.once('drain', pump);
            return;
          }
        }
        s.end();
      };
      pump();
    });
    const rss0 = process.memoryUsage().rss;
    const f = await flood;
    expect(f.ms).toBeLessThan(5000);
    // rank 0 closed it long before it could send all 39 MiB: at most the socket buffers got out
    expect(f.written).toBeLessThan(39 << 20);
    expect(process.memoryUsage().rss - rss0).toBeLessThan(64 << 20);
    const line = await peer(port, 1, 2);
    expect(JSON.parse(line)).toMatchObject({ ok: true });
    expect(await served).toEqual(new Uint8Array(128).fill(7));
  }, 30_000);

  it('connections that are not peers are closed when the rendezvous settles (resolved or not)', async () => {
    for (const outcome of ['resolved', 'timeout'] as const) {
      const port = await freePort();
      const served = rendezvous({ rank: 0, world: 2, addr: '127.0.0.1', port, id: new Uint8Array(128), timeoutMs: outcome === 'timeout' ? 400 : 10_000 }).then(
        () => 'resolved',
        (e) => e.code,
      );
      await new Promise((r) => setTimeout(r, 100));
      const silent = junk(port, () => {}); // connects and says nothing
      await new Promise((r) => setTimeout(r, 100));
      if (outcome === 'resolved') await peer(port, 1, 2);
      expect(await served).toBe(outcome === 'resolved' ? 'resolved' : 'RENDEZVOUS_TIMEOUT');
      const closed = await Promise.race([silent.then(() => true), new Promise((r) => setTimeout(() => r(false), 3000))]);
      expect(closed, outcome).toBe(true);
    }
  }, 30_000);

  it('a connection that is not ours (junk, a wrong magic) is dropped at once', async () => {
    const port = await freePort();
    const served = rendezvous({ rank: 0, world: 2, addr: '127.0.0.1', port, id: new Uint8Array(128), timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 100));
    for (const text of ['GET / HTTP/1.0\n\n', '{"magic":"other"}\n', 'null\n']) {
      const j = await junk(port, (s) => s.write(text)); // resolves when rank 0 closed it
      expect(j.ms).toBeLessThan(3000);
    }
    await peer(port, 1, 2);
    await served;
  }, 30_000);
});

describe('rendezvous: options are checked', () => {
  const ok = { rank: 1, world: 2, addr: '127.0.0.1', port: 29500, timeoutMs: 1000 };
  it.each([
    ['timeoutMs', 2 ** 31],
    ['timeoutMs', 0],
    ['timeoutMs', -5],
    ['timeoutMs', NaN],
    ['timeoutMs', 1.5],
    ['timeoutMs', '100'],
    ['port', 70000],
    ['port', 0],
    ['port', -1],
    ['port', 80.5],
    ['port', '29500'],
    ['world', 0],
    ['world', -1],
    ['world', 2.5],
    ['world', '2'],
    ['rank', 2],
    ['rank', -1],
    ['rank', '1'],
    ['addr', ''],
    ['addr', 7],
  ] as const)('%s = %s: OptionError BAD_OPTION naming it', (field, value) => {
    let err: unknown;
    try {
      void rendezvous({ ...ok, [field]: value } as never).catch(() => {});
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OptionError);
    expect(err).toMatchObject({ code: 'BAD_OPTION', field });
  });

  it('options that are not an object', () => {
    for (const o of [null, undefined, 5]) expect(() => rendezvous(o as never)).toThrow(OptionError);
  });
});
