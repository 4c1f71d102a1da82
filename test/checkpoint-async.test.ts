// checkpoint-async.test.ts: issue 26, the asynchronous, queued forms of the long operations:
// saveAsync / loadAsync (Arena and Trainer) and syncToHostAsync. They queue behind the arena's
// work instead of throwing BUSY, let the event loop run while they work, report progress, and
// give the bytes the synchronous forms give.
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, inspectCheckpoint, planLayout, Trainer } from '../src/index.js';
import { codeOf } from './support/errors.js';
import { toyData } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-async-'));
const file = (name: string) => join(dir, name);
// About 40 MB of data set: three 16 MiB chunks.
const BIG = { layers: [1000, 8, 4], batch: 10, optimizer: 'adam' as const, samples: 10_000 };

describe('saveAsync and loadAsync', () => {
  it('write the file save() writes, with progress, while timers keep running; load it back', async () => {
    using a = Arena.create(planLayout(BIG), cpu);
    const x = a.view(0, 'xdata');
    for (let i = 0; i < x.length; i += 997) x[i] = i;
    a.view(1, 'w').fill(0.25);
    const sync = file('sync.nna');
    const n = a.save(sync, { data: true, metadata: { tag: 1 } });
    const payload = inspectCheckpoint(sync).payloadBytes;
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    const progress: number[] = [];
    const async = file('async.nna');
    let m: number;
    try {
      m = await a.saveAsync(async, {
        data: true,
        metadata: { tag: 1 },
        onProgress: (p) => {
          expect(p.totalBytes).toBe(payload);
          progress.push(p.bytes);
        },
      });
    } finally {
      clearInterval(timer);
    }
    expect(m).toBe(n);
    expect(readFileSync(async).equals(readFileSync(sync))).toBe(true);
    expect(progress.length).toBeGreaterThanOrEqual(3);
    expect(progress).toEqual([...progress].sort((p, q) => p - q));
    expect(progress.at(-1)).toBe(payload);
    expect(ticks).toBeGreaterThan(0); // the event loop ran during the save
    const loads: number[] = [];
    using b = await Arena.loadAsync(async, cpu, { onProgress: (p) => loads.push(p.bytes) });
    expect(loads.length).toBeGreaterThanOrEqual(3);
    expect(Buffer.from(b.bytes()).equals(Buffer.from(a.bytes()))).toBe(true);
    b.toHost(); // the device side got every region the file held
    expect(Buffer.from(b.bytes()).equals(Buffer.from(a.bytes()))).toBe(true);
    expect(readdirSync(dir).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('a save of an arena disposed while it writes fails typed and leaves no file', async () => {
    const a = Arena.create(planLayout(BIG), cpu);
    const p = file('disposed.nna');
    const pending = a.saveAsync(p, { data: true, onProgress: () => a.dispose() });
    await expect(pending).rejects.toMatchObject({ code: 'DISPOSED' });
    expect(readdirSync(dir).filter((f) => f.startsWith('disposed.nna'))).toEqual([]);
  });

  it('bad paths, options and special files are typed errors', async () => {
    using a = Arena.create(planLayout({ layers: [3, 2], batch: 1 }), cpu);
    await expect(a.saveAsync('')).rejects.toMatchObject({ code: 'BAD_PATH' });
    await expect(a.saveAsync(file('x.nna'), { onProgress: 3 } as never)).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'onProgress' });
    expect(codeOf(() => a.save(file('x.nna'), { onProgress: () => {} }))).toBe('BAD_OPTION'); // progress is for saveAsync
    await expect(Arena.loadAsync(dir, cpu)).rejects.toMatchObject({ code: 'BAD_CHECKPOINT' });
    await expect(Arena.loadAsync('/dev/zero', cpu)).rejects.toThrow(/not a regular file/);
    await expect(Arena.loadAsync(file('none.nna'), cpu, { onProgress: 1 } as never)).rejects.toMatchObject({ code: 'BAD_OPTION' });
  });
});

describe('queued behind running work instead of BUSY', () => {
  const spec = { layers: [6, 9, 4], batch: 5, optimizer: 'momentum' as const, samples: 23 };
  const d = toyData(6, 4, 23, 3, false);

  it('Trainer.saveAsync and syncToHostAsync wait for a fit in flight; the sync forms are BUSY', async () => {
    using arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena, { lr: 0.02 });
    t.init(1);
    const fit = t.fit(d, { epochs: 3 });
    expect(codeOf(() => t.save(file('busy.nna')))).toBe('BUSY');
    expect(codeOf(() => t.syncToHost())).toBe('BUSY');
    const saved = t.saveAsync(file('queued.nna'));
    const synced = t.syncToHostAsync({ onProgress: (p) => expect(p.bytes).toBeLessThanOrEqual(p.totalBytes) });
    const [res] = await Promise.all([fit, saved, synced]);
    expect(inspectCheckpoint(file('queued.nna')).steps).toBe(res.steps); // saved after the fit
    t.save(file('after.nna'));
    expect(readFileSync(file('queued.nna')).equals(readFileSync(file('after.nna')))).toBe(true);
    await using r = await Trainer.loadAsync(file('queued.nna'), cpu, {}, { onProgress: () => {} });
    expect(r.steps).toBe(t.steps);
    const [x, y] = [d.x.subarray(0, 30), { labels: d.labels!.subarray(0, 5) }];
    expect(await r.step(x, y)).toEqual(await t.step(x, y));
  });
});
