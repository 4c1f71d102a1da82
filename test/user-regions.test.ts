// Arenas with user regions (planLayout's `extra`): viewed and transferred by name, checkpointed,
// never touched by training, shown by the CLI and the memory map; and checkpoints of the
// version-1 format still load. How they are planned: test/user-regions-plan.test.ts.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, inspectCheckpoint, KINDS, LayoutError, planLayout, selectRanges, Trainer, type LayoutSpec, type Region } from '../src/index.js';
import { EXTRA_COLORS, planToSVG } from '../src/tools.js';
import { HEADER_FIELDS } from '../src/layout/header.js';
import { native } from '../src/native/addon.js';
import { codeOf } from './support/errors.js';
import { SPEC, end } from './support/user-regions.js';
import { toyData } from './support/train-checks.js';
import { testAddon } from '../src/internal.js';

const cpu = { backend: 'cpu' } as const;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-extra-'));
describe('arenas with user regions', () => {
  it('views by name: typed like the dtype, raw bytes as Uint8Array, at the planned offsets', () => {
    using a = Arena.create(planLayout(SPEC), cpu);
    const ema = a.view('ema', 1);
    expect(ema).toBeInstanceOf(Float32Array);
    expect(ema.length).toBe(20);
    expect(a.view(1, 'ema')).toBe(ema);
    const rng = a.view('rng');
    expect(rng).toBeInstanceOf(Uint8Array);
    expect(rng.length).toBe(1000);
    expect(a.view('w', 2)).toBe(a.view(2, 'w')); // built-in kinds by name too
    ema[3] = 1.5;
    rng[999] = 7;
    const r = a.plan.region(1, 'ema')!;
    expect(new Float32Array(a.bytes(r.offset, r.bytes).slice().buffer)[3]).toBe(1.5);
    expect(a.bytes(a.plan.find('rng')[0]!.offset + 999, 1)[0]).toBe(7);
    expect(codeOf(() => a.view('ema'))).toBe('NO_REGION');
    expect(codeOf(() => a.view('rng', 1))).toBe('NO_REGION');
    expect(codeOf(() => a.view('mask', 0))).toBe('NO_REGION');
    expect(codeOf(() => a.view('nope', 1))).toBe('BAD_KIND');
    expect(codeOf(() => a.view('ema', 1.5))).toBe('BAD_OPTION');
  });

  it('selectors take user region names; ranges never swallow an unselected user region', () => {
    const p = planLayout({ ...SPEC, order: 'layer-major' });
    expect(selectRanges(p, { kinds: ['ema'] })).toEqual(p.find('ema').map((r) => ({ offset: r.offset, bytes: r.bytes })));
    expect(selectRanges(p, { kinds: ['rng'], layers: [1] })).toEqual([{ offset: p.find('rng')[0]!.offset, bytes: 1000 }]);
    expect(
      selectRanges(p, { layers: [1] })
        .flatMap((g) => p.regions.filter((r) => r.offset >= g.offset && end(r) <= g.offset + g.bytes))
        .map((r) => r.kind),
    ).toEqual(p.regions.filter((r) => r.layer === 1).map((r) => r.kind)); // a layer's range holds its user regions
    // Every built-in kind of layer 1 but not its user regions: the ranges stop before them.
    const ranges = selectRanges(p, { kinds: [...KINDS], layers: [1] });
    for (const x of [...p.find('ema'), ...p.find('mask')]) for (const g of ranges) expect(x.offset >= g.offset + g.bytes || end(x) <= g.offset).toBe(true);
    expect(codeOf(() => selectRanges(p, { kinds: ['nope'] }))).toBe('BAD_SELECTOR');
  });

  it('transfers by name move exactly those bytes, both ways', () => {
    using a = Arena.create(planLayout(SPEC), cpu);
    a.view('ema', 2).fill(3);
    const before = a.stats;
    expect(a.toDevice({ kinds: ['ema'], layers: [2] })).toEqual({ transfers: 1, bytes: 48 });
    a.view('ema', 2).fill(0);
    expect(a.toHost({ kinds: ['ema', 'rng'] })).toEqual({ transfers: 3, bytes: 80 + 48 + 1000 });
    expect([...a.view('ema', 2)]).toEqual(Array(12).fill(3));
    expect(a.stats.toDeviceBytes - before.toDeviceBytes).toBe(48);
  });

  it("nn-arena's training never reads or writes user regions", async () => {
    const p = planLayout({
      layers: [5, 4, 3],
      batch: 4,
      optimizer: 'adam',
      samples: 8,
      extra: [
        { name: 'ema', like: 'w' },
        { name: 'zz', like: 'z' },
        { name: 'rng', bytes: 64 },
      ],
    });
    using a = Arena.create(p, cpu);
    const t = new Trainer(a, { lr: 0.05 });
    t.init(3);
    const pattern = (r: Region) => Float64Array.from({ length: r.length }, (_, i) => (r.extra! + 1) * 1000 + r.layer * 100 + i);
    for (const r of p.regions) if (r.extra !== undefined) a.view(r.layer, r.kind).set(pattern(r));
    a.toDevice();
    const w1 = [...a.view('w', 1)];
    await t.fit(toyData(5, 3, 8, 1, false), { epochs: 3 });
    a.toHost();
    expect([...a.view('w', 1)]).not.toEqual(w1);
    for (const r of p.regions)
      if (r.extra !== undefined) expect([...a.view(r.layer, r.kind)]).toEqual([...pattern(r)].map((x) => (r.kind === 'rng' ? x & 255 : x)));
  });
});

describe('checkpoints with user regions', () => {
  it('save and load them (all, or a subset by name)', () => {
    const p = planLayout({ ...SPEC, order: 'kind-major' });
    const all = join(dir, 'all.nna'),
      some = join(dir, 'some.nna');
    {
      using a = Arena.create(p, cpu);
      a.view('ema', 1).fill(1.25);
      a.view('mask', 2).fill(-2);
      a.view('rng').fill(9);
      a.view('w', 2).fill(4);
      a.save(all);
      a.save(some, { kinds: ['w', 'ema'] });
      expect(codeOf(() => a.save(join(dir, 'x.nna'), { kinds: ['nope'] }))).toBe('BAD_OPTION');
    }
    const info = inspectCheckpoint(some);
    expect(info).toMatchObject({ version: 3, kinds: ['w'], extras: ['ema'] });
    expect(inspectCheckpoint(all).extras).toEqual(['ema', 'mask', 'rng']);
    {
      using b = Arena.load(all, cpu);
      expect(b.plan.spec.extra).toEqual(p.spec.extra);
      expect([...b.view('ema', 1)]).toEqual(Array(20).fill(1.25));
      expect([...b.view('mask', 2)]).toEqual(Array(6).fill(-2));
      expect([...b.view('rng')]).toEqual(Array(1000).fill(9));
    }
    {
      using c = Arena.load(some, cpu);
      expect([...c.view('ema', 1)]).toEqual(Array(20).fill(1.25));
      expect([...c.view('w', 2)]).toEqual(Array(12).fill(4));
      expect([...c.view('rng')]).toEqual(Array(1000).fill(0));
    }
  });

  it('a saved-regions mask beyond the kind table, or one in a version-1 file, is BAD_CHECKPOINT', () => {
    const f = join(dir, 'mask.nna');
    {
      using a = Arena.create(planLayout(SPEC), cpu);
      a.save(f, { kinds: ['w', 'ema'] });
    }
    const patched = (from: string, edit: (b: Buffer) => void) => {
      const b = Buffer.from(readFileSync(from));
      edit(b);
      b.writeUInt32LE(native().crc32c(b.subarray(0, 60)) >>> 0, 60); // the file header's own checksum
      const out = join(dir, `patched-${Math.random().toString(36).slice(2)}.nna`);
      writeFileSync(out, b);
      return out;
    };
    expect(inspectCheckpoint(f).extras).toEqual(['ema']);
    const beyond = patched(f, (b) => b.writeBigUInt64LE(1n | (1n << 3n), 48));
    expect(codeOf(() => inspectCheckpoint(beyond))).toBe('BAD_CHECKPOINT');
    expect(() => inspectCheckpoint(beyond)).toThrow(/unknown user regions in the saved mask 0x9/);
    const v1 = patched(resolve(__dirname, 'fixtures', 'v1-adam-kind-major.nnackpt'), (b) => b.writeBigUInt64LE(1n, 48));
    expect(() => inspectCheckpoint(v1)).toThrow(/reserved header bytes are not zero/);
    const v4 = patched(f, (b) => b.writeUInt32LE(4, 8));
    expect(() => inspectCheckpoint(v4)).toThrow(/unsupported checkpoint version 4/);
  });

  it('version-1 checkpoints (committed fixtures) still load, with every saved value', () => {
    // Written by the version-1 code: every element = kind index * 1000 + layer * 100 + i (+ 0.5 in the float64 one).
    const f1 = resolve(__dirname, 'fixtures', 'v1-adam-kind-major.nnackpt');
    const info = inspectCheckpoint(f1);
    expect(info).toMatchObject({ version: 1, steps: 7, extras: [] });
    expect(info.kinds).toEqual([...KINDS]);
    expect(info.plan.spec).toMatchObject({ layers: [3, 4, 2], batch: 2, optimizer: 'adam', samples: 5, order: 'kind-major', align: 64, extra: [] });
    {
      using a = Arena.load(f1, cpu);
      for (const r of a.plan.regions)
        expect([...a.view(r.layer, r.kind)]).toEqual(Array.from({ length: r.length }, (_, i) => KINDS.indexOf(r.kind as never) * 1000 + r.layer * 100 + i));
      expect(new DataView(a.bytes(0, 8).slice().buffer).getUint32(HEADER_FIELDS.version, true)).toBe(2); // loaded as version 2
      const again = join(dir, 'v1-resaved.nna');
      a.save(again);
      expect(inspectCheckpoint(again)).toMatchObject({ version: 3, arenaBytes: info.arenaBytes });
    }
    const f2 = resolve(__dirname, 'fixtures', 'v1-f64-layer-major-wb.nnackpt');
    expect(inspectCheckpoint(f2)).toMatchObject({ version: 1, kinds: ['b', 'w'], extras: [] });
    const t = Trainer.load(f2, cpu);
    try {
      for (const k of ['w', 'b'] as const)
        for (const l of [1, 2]) {
          expect([...t.arena.view(l, k)]).toEqual(
            Array.from({ length: t.arena.plan.region(l, k)!.length }, (_, i) => KINDS.indexOf(k) * 1000 + l * 100 + i + 0.5),
          );
        }
      expect([...t.arena.view(1, 'z')].every((x) => x === 0)).toBe(true); // not saved
    } finally {
      t.arena.dispose();
    }
  });
});

describe('memory map and CLI', () => {
  it('the SVG colours user regions, gives them legend entries and a global row', () => {
    const p = planLayout(SPEC);
    const svg = planToSVG(p);
    for (const [i, name] of ['ema', 'mask', 'rng'].entries()) {
      expect(svg).toContain(`data-kind="${name}" data-extra="${i}"`);
      expect(svg).toMatch(
        new RegExp(`class="nna-legend" data-kind="${name}" data-extra="${i}" data-bytes="${p.bytesByKind()[name]}"><rect [^>]*fill="${EXTRA_COLORS[i]}"`),
      );
    }
    expect(svg).toContain('data-row="global (user)" data-bytes="1000"');
    expect(svg).toContain('user region ema of layer 1');
  });

  const CLI = 'dist/cli.js';
  const run = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });

  it('nn-arena plan --extra lists user regions (text and JSON); a bad one is one line naming the field', () => {
    const r = run('plan', '--layers', '5,4,3', '--batch', '2', '--extra', 'ema:w', '--extra', 'mask:z:2,1', '--extra', 'rng:1000');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('user region ema: like w in layers 1, 2');
    expect(r.stdout).toContain('user region rng: 1,000 raw bytes, global');
    expect(r.stdout).toMatch(/^\s+-\s+rng \(user\)\s+[\d,]+\s+1,000\s+1,000$/m);
    const j = JSON.parse(run('plan', '--layers', '5,4,3', '--batch', '2', '--extra', 'ema:w', '--extra', 'rng:1000', '--json').stdout);
    const p = planLayout({
      layers: [5, 4, 3],
      batch: 2,
      extra: [
        { name: 'ema', like: 'w' },
        { name: 'rng', bytes: 1000 },
      ],
    });
    expect(j.regions).toEqual(p.regions);
    expect(j.bytesByKind).toEqual(p.bytesByKind());
    const bad = run('plan', '--layers', '5,4,3', '--extra', 'w:w');
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/BAD_EXTRA: extra\[0\]\.name/);
    expect(run('plan', '--extra', 'ema').stderr).toMatch(/BAD_ARGUMENT: --extra/);
  });

  it('nn-arena inspect lists the saved user regions', () => {
    const f = join(dir, 'cli.nna');
    {
      using a = Arena.create(planLayout(SPEC), cpu);
      a.save(f, { kinds: ['w', 'rng'] });
    }
    const r = run('inspect', f);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('saved user regions rng');
    expect(r.stdout).toMatch(/^rng\s+1,000/m);
    expect(r.stdout).not.toMatch(/^ema\s/m);
    const j = JSON.parse(run('inspect', f, '--json').stdout);
    expect(j.extras).toEqual(['rng']);
    expect(Object.keys(j.bytesByKind)).toEqual(['w', 'rng']);
  });
});

describe('user regions and K models (models > 1)', () => {
  it('planLayout refuses extra with models > 1: a LayoutError BAD_EXTRA naming the field', () => {
    for (const models of [2, 7]) {
      const e = (() => {
        try {
          planLayout({ ...SPEC, models });
        } catch (x) {
          return x;
        }
        return undefined;
      })();
      expect(e).toBeInstanceOf(LayoutError);
      expect(e).toMatchObject({ code: 'BAD_EXTRA', field: 'extra', value: ['ema', 'mask', 'rng'] });
      expect((e as Error).message).toMatch(new RegExp(`models: ${models}`));
    }
    // models: 1 (or none) with extra, and models > 1 without extra, still plan.
    expect(planLayout({ ...SPEC, models: 1 }).header).toEqual(planLayout(SPEC).header);
    expect(planLayout({ ...SPEC, extra: [], models: 3 }).spec.models).toBe(3);
  });

  it('the native validator refuses a header whose kind table meets models > 1', () => {
    const p = planLayout(SPEC);
    const h = p.header.slice();
    new DataView(h.buffer).setBigUint64(HEADER_FIELDS.models, 2n, true);
    expect(native().validateHeader(h, p.totalBytes * 4)).toMatch(/user regions cannot be combined with models: 2/);
    new DataView(h.buffer).setBigUint64(HEADER_FIELDS.models, 1n, true); // 1 and 0 both mean one model
    expect(native().validateHeader(h, p.totalBytes)).toBe('');
  });

  it('a version-1 header of K models (models in reserved[3]) validates, decodes and loads from a version-1 checkpoint', () => {
    const spec: LayoutSpec = { layers: [4, 6, 3], batch: 2, samples: 4, models: 3, optimizer: 'momentum' };
    const p = planLayout(spec);
    const v1 = p.header.slice();
    new DataView(v1.buffer).setUint32(HEADER_FIELDS.version, 1, true);
    expect(native().validateHeader(v1, p.totalBytes)).toBe('');
    expect(testAddon().decodeHeader(v1).models).toBe(3n);
    // A checkpoint as the version-1 code with K models wrote it: file version 1, arena header version 1.
    const f = join(dir, 'k-models.nna');
    {
      using a = Arena.create(p, cpu);
      for (let m = 0; m < 3; m++) a.view(1, 'w', m).fill(m + 0.5);
      a.save(f);
    }
    // Version 3's empty metadata block (8 bytes after the file header) taken out.
    const saved = readFileSync(f);
    expect(saved.readUInt32LE(64)).toBe(0);
    const b = Buffer.concat([saved.subarray(0, 64), saved.subarray(72)]);
    b.writeUInt32LE(1, 8);
    b.writeUInt32LE(1, 64 + HEADER_FIELDS.version);
    b.writeUInt32LE(native().crc32c(b.subarray(64)) >>> 0, 44);
    b.writeUInt32LE(native().crc32c(b.subarray(0, 60)) >>> 0, 60);
    const old = join(dir, 'k-models-v1.nna');
    writeFileSync(old, b);
    expect(inspectCheckpoint(old)).toMatchObject({ version: 1, extras: [] });
    expect(inspectCheckpoint(old).plan.spec.models).toBe(3);
    using back = Arena.load(old, cpu);
    expect(back.plan.spec.models).toBe(3);
    for (let m = 0; m < 3; m++) expect([...back.view(1, 'w', m)]).toEqual(Array(24).fill(m + 0.5));
  });
});
