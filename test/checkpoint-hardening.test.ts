// checkpoint-hardening.test.ts: issue 14 items 4-7 and 9 (checkpoint side): one-pass verified
// loads under replacement, concurrent saves from 4 threads, headers over 1 MB, crafted files
// with valid checksums, bad save arguments, a directory given as a checkpoint.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, DataError, inspectCheckpoint, NnArenaError, OptionError, planLayout } from '../src/index.js';
import { loadArena } from '../src/arena/arena.js';
import { native } from '../src/native/addon.js';

const cpu = { backend: 'cpu' } as const;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-ckpt-hard-'));
const file = (name: string) => join(dir, name);
const LIB = resolve('dist/index.cjs');
const SMALL = { layers: [16, 32, 4], batch: 8, optimizer: 'adam' as const };

function failure(f: () => unknown): NnArenaError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(NnArenaError);
    return e as NnArenaError;
  }
  throw new Error('did not throw');
}

/** A checkpoint file written by hand: the file header with valid checksums over `payload`. */
function craft(totalBytes: number, payload: Uint8Array, { steps = 0n, mask = 0 } = {}): Buffer {
  const head = Buffer.alloc(64);
  Buffer.from('NNACKPT\0', 'latin1').copy(head, 0);
  head.writeUInt32LE(1, 8);
  head.writeUInt32LE(0x01020304, 12);
  head.writeBigUInt64LE(BigInt(totalBytes), 16);
  head.writeBigUInt64LE(BigInt(payload.length), 24);
  head.writeBigUInt64LE(steps, 32);
  head.writeUInt32LE(mask, 40);
  head.writeUInt32LE(native().crc32c(payload) >>> 0, 44);
  head.writeUInt32LE(native().crc32c(head.subarray(0, 60)) >>> 0, 60);
  return Buffer.concat([head, payload]);
}

/** Every element of every region holds `salt` (a whole arena from one save). */
const fill = (a: Arena, salt: number) => {
  for (const r of a.plan.regions) a.view(r.layer, r.kind).fill(salt);
};
const salts = (a: Arena) => new Set(a.plan.regions.flatMap((r) => [...new Set(a.view(r.layer, r.kind))]));

describe('item 4: a load reads the file once, verified', () => {
  it('loads racing a writer that replaces the file never mix two saves', async () => {
    const path = file('race.nna');
    {
      using a = Arena.create(planLayout(SMALL), cpu);
      fill(a, 1);
      a.save(path, { steps: 1 });
    }
    // The writer alternates two saves: steps 1 with every value 1, steps 2 with every value 2.
    const worker = new Worker(
      `
      const { parentPort, workerData } = require('node:worker_threads');
      const { Arena, planLayout } = require(workerData.lib);
      const arenas = [1, 2].map((s) => { const a = Arena.create(planLayout(workerData.spec), { backend: 'cpu' });
        for (const r of a.plan.regions) a.view(r.layer, r.kind).fill(s); return a; });
      let stop = false, saves = 0;
      parentPort.on('message', () => { stop = true; });
      (function loop() {
        for (let i = 0; i < 20 && !stop; i++) { arenas[saves % 2].save(workerData.path, { steps: 1 + (saves % 2) }); saves++; }
        if (stop) parentPort.postMessage(saves); else setImmediate(loop);
      })();`,
      { eval: true, workerData: { lib: LIB, spec: SMALL, path } },
    );
    const seen = new Set<number>();
    const t0 = performance.now();
    let loads = 0;
    while (loads < 3000 && performance.now() - t0 < 4000) {
      const { arena, info } = loadArena(path, cpu);
      const got = salts(arena);
      arena.dispose();
      expect([...got], `load ${loads}: steps ${info.steps}`).toEqual([info.steps]);
      seen.add(info.steps);
      loads++;
      if (loads % 50 === 0) await new Promise((r) => setImmediate(r));
    }
    const saves = await new Promise<number>((r) => {
      worker.once('message', r);
      worker.postMessage('stop');
    });
    await worker.terminate();
    expect(saves).toBeGreaterThan(10);
    expect(seen.size).toBe(2);
  });
});

describe('item 5: saves are exclusive, unpredictable and durable', () => {
  it('4 threads saving to one path leave one complete valid file every round', async () => {
    const path = file('shared.nna');
    const workers = [0, 1, 2, 3].map(
      (id) =>
        new Worker(
          `
      const { parentPort, workerData } = require('node:worker_threads');
      const { Arena, planLayout } = require(workerData.lib);
      const a = Arena.create(planLayout(workerData.spec), { backend: 'cpu' });
      for (const r of a.plan.regions) a.view(r.layer, r.kind).fill(workerData.id + 1);
      parentPort.on('message', () => { try { a.save(workerData.path, { steps: workerData.id + 1 }); parentPort.postMessage('ok'); }
        catch (e) { parentPort.postMessage(String(e.code) + ' ' + e.message); } });`,
          { eval: true, workerData: { lib: LIB, spec: SMALL, path, id } },
        ),
    );
    try {
      const rounds = 300;
      for (let round = 0; round < rounds; round++) {
        const replies = await Promise.all(
          workers.map(
            (w) =>
              new Promise((r) => {
                w.once('message', r);
                w.postMessage(round);
              }),
          ),
        );
        expect(replies).toEqual(['ok', 'ok', 'ok', 'ok']);
        const { arena, info } = loadArena(path, cpu);
        const got = [...salts(arena)];
        arena.dispose();
        expect(got, `round ${round}`).toEqual([info.steps]);
      }
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
    }
    expect(readdirSync(dir).filter((f) => f.startsWith('shared.nna.tmp-'))).toEqual([]);
  });
});

describe('item 6: headers over 1 MB save and load', () => {
  it('layers [2,3,2] with align 2^20; 4096 layers with align 8192', () => {
    for (const [name, spec, kinds] of [
      ['align-1m', { layers: [2, 3, 2], batch: 2, align: 2 ** 20 }, undefined],
      ['4096-layers', { layers: Array<number>(4096).fill(1), batch: 1, align: 8192, activations: Array(4095).fill('identity') }, ['w', 'b'] as const],
    ] as const) {
      const plan = planLayout(spec);
      expect(plan.headerBytes).toBeGreaterThan(1020032);
      const p = file(`${name}.nna`);
      {
        using a = Arena.create(plan, cpu);
        a.view(1, 'w')[0] = 3.5;
        a.save(p, kinds ? { kinds } : undefined);
      }
      expect(inspectCheckpoint(p).plan.headerBytes).toBe(plan.headerBytes);
      using b = Arena.load(p, cpu);
      expect(b.view(1, 'w')[0]).toBe(3.5);
    }
  });
});

describe('item 7: crafted files with valid checksums', () => {
  it('an arena whose host and device sides do not fit in available memory is refused before allocating', () => {
    // About 3/4 of this machine's memory: one side fits in total memory (inspect passes), the
    // CPU backend's two sides do not fit in what is available.
    const perSample = (784 + 10) * 4;
    const samples = Math.floor((0.75 * totalmem()) / perSample);
    const plan = planLayout({ layers: [784, 10], batch: 1, samples });
    const p = file('huge.nna');
    writeFileSync(p, craft(plan.totalBytes, plan.header));
    expect(readFileSync(p).length).toBe(64 + plan.headerBytes);
    expect(inspectCheckpoint(p).arenaBytes).toBe(plan.totalBytes);
    const e = failure(() => Arena.load(p, cpu));
    expect(e.code).toBe('HOST_OOM');
    expect(e.message).toMatch(/host and device side/);
  });

  it('a step count beyond 2^53 - 1, non-zero reserved bytes, a layer count beyond the table are refused', () => {
    const plan = planLayout(SMALL);
    const cases: Array<[string, Buffer, RegExp]> = [
      ['steps', craft(plan.totalBytes, plan.header, { steps: 2n ** 60n }), /step count/],
      [
        'reserved',
        (() => {
          const b = craft(plan.totalBytes, plan.header);
          b[50] = 1;
          b.writeUInt32LE(native().crc32c(b.subarray(0, 60)) >>> 0, 60);
          return b;
        })(),
        /reserved/,
      ],
      [
        'layers',
        (() => {
          const h = Uint8Array.from(plan.header);
          new DataView(h.buffer).setUint32(20, 5000, true);
          return craft(plan.totalBytes, h);
        })(),
        /5000 layers/,
      ],
    ];
    for (const [name, bytes, why] of cases) {
      const p = file(`crafted-${name}.nna`);
      writeFileSync(p, bytes);
      const e = failure(() => Arena.load(p, cpu));
      expect(e.code, name).toBe('BAD_CHECKPOINT');
      expect(e.message, name).toMatch(why);
    }
  });
});

describe('item 9: checkpoint arguments', () => {
  it('bad save options and paths are typed errors naming the field; a directory is BAD_CHECKPOINT', () => {
    using a = Arena.create(planLayout(SMALL), cpu);
    const p = file('opts.nna');
    for (const [o, field] of [
      [{ kinds: 'w' }, 'kinds'],
      [{ kinds: [5] }, 'kinds[0]'],
      [{ steps: 2n }, 'steps'],
      [{ steps: -1 }, 'steps'],
      [null, 'options'],
    ] as const) {
      const e = failure(() => a.save(p, o as never));
      expect(e).toBeInstanceOf(OptionError);
      expect([e.code, (e as OptionError).field]).toEqual(['BAD_OPTION', field]);
    }
    for (const path of [123, '', 'a\0b', { toString: () => p }]) {
      const e = failure(() => a.save(path as string));
      expect([e.code, (e as DataError).field]).toEqual(['BAD_PATH', 'path']);
    }
    const d = file('a-dir.nna');
    mkdirSync(d, { recursive: true });
    for (const f of [() => inspectCheckpoint(d), () => Arena.load(d, cpu)]) {
      const e = failure(f);
      expect(e).toBeInstanceOf(ArenaError);
      expect(e.code).toBe('BAD_CHECKPOINT');
      expect(e.message).toMatch(/not a regular file/);
    }
  });
});
