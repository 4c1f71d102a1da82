// The compact plan (spec.compact): regions never live at the same time share bytes, an SGD plan
// has no dw; the native replay (csrc/train/aliasing.cc) refuses any other sharing, and training
// on it is bit-identical to the full plan.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  Arena,
  ArenaError,
  inspectCheckpoint,
  KINDS,
  minDeviceBudget,
  planLayout,
  selectRanges,
  Trainer,
  type Kind,
  type LayerSpec,
  type LayoutSpec,
} from '../src/index.js';
import { planToSVG } from '../src/tools.js';
import { runArena, testAddon } from '../src/internal.js';
import * as H from '../src/layout/header.js';
import { plannerShape } from '../src/layout/plan.js';
import { native } from '../src/native/addon.js';
import { toyData } from './support/train-checks.js';
import { compactVsFull, COMPACT_NETS, COMPACT_OPS_NET } from './support/compact-checks.js';

const cpu = { backend: 'cpu' } as const;
const S: LayoutSpec = { layers: [784, 128, 10], batch: 100 };
const DEEP: LayoutSpec = { layers: [784, 256, 128, 64, 10], batch: 100 };

/** A copy of a header with region (layer, kind) moved to `offset`. */
function moved(header: Uint8Array, layer: number, kind: Kind, offset: number): Uint8Array {
  const b = header.slice();
  new DataView(b.buffer).setBigUint64(H.HEADER_SIZE + layer * H.LAYER_SIZE + H.LAYER_FIELDS.region + H.KIND_INDEX[kind] * H.REGION_SIZE, BigInt(offset), true);
  return b;
}

describe('compact plan: sizes', () => {
  it('S training arena (784-128-10, batch 100, SGD): 837,632 bytes, <= 0.75 x PyTorch measured peak (1,186,304 B)', () => {
    const full = planLayout(S),
      compact = planLayout({ ...S, compact: true });
    expect(full.totalBytes).toBe(1_244_160);
    expect(compact.totalBytes).toBe(837_632);
    expect(compact.totalBytes).toBeLessThanOrEqual(Math.floor(0.75 * 1_186_304));
    // The whole saving is the weight gradients that the folded SGD update never writes.
    expect(compact.bytesByKind().dw).toBe(0);
    expect(full.totalBytes - compact.totalBytes).toBe(full.region(1, 'dw')!.bytes + 256 * Math.ceil(full.region(2, 'dw')!.bytes / 256));
    for (const l of [1, 2]) expect(compact.region(l, 'dw')).toBeUndefined();
    expect(native().validateHeader(compact.header, compact.totalBytes)).toBe('');
  });

  it('deeper nets share bytes between regions never live together; every compact plan passes the native replay', () => {
    for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
      for (const spec of [DEEP, { ...DEEP, samples: 300, order: 'kind-major' as const }, { layers: [30, 40, 40, 40, 40, 40, 3], batch: 7, samples: 20 }]) {
        const full = planLayout({ ...spec, optimizer }),
          compact = planLayout({ ...spec, optimizer, compact: true });
        expect(native().validateHeader(compact.header, compact.totalBytes), `${optimizer} ${spec.layers}`).toBe('');
        expect(compact.totalBytes).toBeLessThan(full.totalBytes);
        const k = compact.bytesByKind();
        expect(k.shared).toBeGreaterThan(0);
        // kinds + header + padding - shared = the arena
        const sum = [...KINDS, 'header', 'padding'].reduce((a, x) => a + k[x as Kind], 0);
        expect(sum - k.shared).toBe(compact.totalBytes);
        expect(compact.shared.length).toBeGreaterThan(0);
        for (const { region, with: others } of compact.shared) {
          for (const q of others) expect(region.offset < q.offset + q.bytes && q.offset < region.offset + region.bytes).toBe(true);
          // Nothing that outlives a run, nor the outputs, ever shares.
          expect(['w', 'b', 'mw', 'mb', 'vw', 'vb', 'xdata', 'ydata', 'stats', 'y']).not.toContain(region.kind);
          expect(region.kind === 'z' && (region.layer === 0 || region.layer === spec.layers.length - 1)).toBe(false);
        }
        // Momentum and Adam keep dw (their update reads it in the per-layer path), shared.
        expect(compact.bytesByKind().dw > 0).toBe(optimizer !== 'sgd');
      }
    }
    // The 3-hidden-layer SGD net: errors of layers 1 and 4 share bytes (never live together).
    const c = planLayout({ ...DEEP, compact: true });
    expect(c.shared.find((s) => s.region.kind === 'd' && s.region.layer === 1)!.with.map((r) => `${r.kind}${r.layer}`)).toContain('d4');
  });

  it('selectors over overlapping regions: every selected byte once, no unselected region beyond an overlap', () => {
    const plan = planLayout({ ...DEEP, compact: true, optimizer: 'adam' });
    for (const kinds of [['d'], ['dw', 'db'], ['z'], ['d', 'z', 'dw']] as Kind[][]) {
      const ranges = selectRanges(plan, { kinds });
      for (let i = 1; i < ranges.length; i++) expect(ranges[i]!.offset).toBeGreaterThanOrEqual(ranges[i - 1]!.offset + ranges[i - 1]!.bytes);
      for (const r of plan.regions.filter((x) => (kinds as readonly string[]).includes(x.kind))) {
        // covered by the ranges, byte for byte
        let at = r.offset;
        for (const g of ranges) if (g.offset <= at && at < g.offset + g.bytes) at = g.offset + g.bytes;
        expect(at, `${r.kind}[${r.layer}]`).toBeGreaterThanOrEqual(r.offset + r.bytes);
      }
      // an unselected region that starts past every selected one it overlaps is not sent whole
      for (const u of plan.regions.filter((x) => !(kinds as readonly string[]).includes(x.kind) && ['w', 'b', 'mw', 'vw'].includes(x.kind))) {
        for (const g of ranges) expect(g.offset < u.offset + u.bytes && u.offset < g.offset + g.bytes, `${u.kind}[${u.layer}]`).toBe(false);
      }
    }
  });

  it('compact: a boolean; the default plan is unchanged (flags 0)', () => {
    expect(() => planLayout({ ...S, compact: 1 as unknown as boolean })).toThrow(expect.objectContaining({ code: 'BAD_SPEC', field: 'compact' }));
    expect(planLayout({ ...S, compact: false }).header).toEqual(planLayout(S).header);
    expect(new DataView(planLayout(S).header.buffer).getBigUint64(H.HEADER_FIELDS.flags, true)).toBe(0n);
  });
});

describe('compact plan: the native replay refuses any other sharing', () => {
  const plan = planLayout({ ...DEEP, compact: true });
  const check = (h: Uint8Array) => native().validateHeader(h, plan.totalBytes);
  const at = (l: number, k: Kind) => plan.region(l, k)!.offset;
  // An offset inside d[1] (written in backward of layer 2) clear of the regions it already shares with.
  const insideD1 = (bytes: number) => {
    const d1 = plan.region(1, 'd')!;
    const partners = plan.shared.find((x) => x.region === d1)!.with;
    let free = d1.offset;
    while (partners.some((q) => free < q.offset + q.bytes && q.offset < free + bytes)) free += 256;
    expect(free + bytes).toBeLessThanOrEqual(d1.offset + d1.bytes);
    return free;
  };

  it('errors of adjacent layers (both used by backward of layer 2)', () => {
    expect(check(moved(plan.header, 2, 'd', at(1, 'd')))).toMatch(/^d\[[12]\] and d\[[12]\] share bytes but are both used in backward of layer 2/);
  });
  it('a region read after another wrote over its bytes', () => {
    expect(check(moved(plan.header, 3, 'd', at(1, 'z')))).toMatch(
      /^z\[1\] is read in backward of layer 2 \(train, per-layer order\) but d\[3\] wrote over its bytes/,
    );
  });
  it('weights sharing bytes hold no value of their own', () => {
    expect(check(moved(plan.header, 4, 'w', insideD1(plan.region(4, 'w')!.bytes)))).toMatch(
      /^w\[4\] is read in forward of layer 4 \(train, per-layer order\) but holds no value of its own there/,
    );
    expect(check(moved(plan.header, 4, 'b', insideD1(plan.region(4, 'b')!.bytes)))).toMatch(
      /^b\[4\] is read in forward of layer 4 .* holds no value of its own there/,
    );
  });
  it('outputs of the last layer overwritten after the output phase', () => {
    expect(check(moved(plan.header, 4, 'z', insideD1(plan.region(4, 'z')!.bytes)))).toMatch(
      /^z\[4\] must outlive a run \(train, per-layer order\) but d\[1\] wrote over its bytes/,
    );
  });
  it('without the compact flag, any overlap is refused; unknown flags are refused', () => {
    const full = planLayout(DEEP);
    expect(native().validateHeader(moved(full.header, 4, 'd', full.region(1, 'd')!.offset), full.totalBytes)).toMatch(/overlaps/);
    const b = plan.header.slice();
    new DataView(b.buffer).setBigUint64(H.HEADER_FIELDS.flags, 3n, true);
    expect(check(b)).toMatch(/unknown flags 3/);
  });
  it('an arena is never created from a refused header', () => {
    const bad = { ...plan, header: moved(plan.header, 2, 'd', at(1, 'd')) };
    expect(() => Arena.create(bad, cpu)).toThrow(expect.objectContaining({ code: 'BAD_HEADER' }));
  });
});

// The planner reads the phase table of the spec's shape (no header yet); the runs read the one
// of the planned header. They must be the same table.
describe('compact plan: the phases the planner reads are those of the planned header', () => {
  const nets: Array<LayoutSpec<LayerSpec>> = [
    { layers: [5, 4, 3], batch: 3, samples: 6 },
    { layers: [5, 40, 30, 20], batch: 3, samples: 6, optimizer: 'adam' },
    { layers: [5, 17], batch: 2, samples: 4, optimizer: 'momentum', activations: ['softmax'] },
    { layers: [6, 8, 8, 8, 8, 16], batch: 2, compact: true },
    { layers: [6, 8, 8, 8, 8, 17], batch: 2, compact: true, optimizer: 'adam', samples: 3 },
    { layers: COMPACT_OPS_NET, batch: 3, compact: true, samples: 5 },
  ];
  it('every op, resident or not, per-layer and fused order', () => {
    let compared = 0;
    for (const spec of nets) {
      const plan = planLayout(spec);
      for (const [op, code] of [
        ['train', 0],
        ['grad', 1],
        ['eval', 2],
        ['forward', 3],
      ] as const) {
        for (const resident of plan.spec.samples > 0 ? [false, true] : [false]) {
          for (const fused of [false, true]) {
            // uses' access as reads (kRead, bit 0 of csrc/train/phases.h Access), as the planner takes it.
            const ofHeader = testAddon().headerPhases(plan.header, code, resident, fused);
            expect(ofHeader.length, `${spec.layers} ${op}`).toBeGreaterThan(0);
            expect(native().stepPhases(plannerShape(plan.spec), code, resident, fused), `${spec.layers} ${op} ${resident} ${fused}`).toEqual(ofHeader);
            compared++;
          }
        }
      }
    }
    expect(compared).toBe(88);
  });
});

describe('compact plan: training on the CPU is bit-identical to the full plan', () => {
  for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
    for (const [name, spec] of COMPACT_NETS) {
      it(`${optimizer}, ${name}: steps, fit, evaluate, predict`, async () => {
        const { full, compact } = await compactVsFull({ ...spec, optimizer }, cpu, optimizer === 'adam' ? 0.01 : 0.05);
        expect(compact.totalBytes).toBeLessThan(optimizer === 'sgd' ? full.totalBytes : full.totalBytes + 1);
        expect(full.path).toBe('cpu');
        expect(compact.metrics).toEqual(full.metrics);
        expect(Buffer.from(compact.params).equals(Buffer.from(full.params))).toBe(true);
        expect(Buffer.from(compact.predictions).equals(Buffer.from(full.predictions))).toBe(true);
      });
    }
  }
});

describe('compact plan with ops: training on the CPU is bit-identical to the full plan', () => {
  for (const optimizer of ['sgd', 'momentum', 'adamw'] as const) {
    it(`${optimizer}, layernorm, dropout, residual, rmsnorm: steps, fit, evaluate, predict`, async () => {
      const spec = { layers: COMPACT_OPS_NET, batch: 8, samples: 60, optimizer };
      const { full, compact } = await compactVsFull(spec, cpu, optimizer === 'adamw' ? 0.01 : 0.05, { dropoutSeed: 3 });
      expect(compact.totalBytes).toBeLessThan(full.totalBytes);
      expect(compact.metrics).toEqual(full.metrics);
      expect(Buffer.from(compact.params).equals(Buffer.from(full.params))).toBe(true);
      expect(Buffer.from(compact.predictions).equals(Buffer.from(full.predictions))).toBe(true);
    });
  }
});

describe('compact plan: what it refuses', () => {
  it('gradients (Trainer.gradients and a native gradient run): NOT_SUPPORTED, naming the reason', async () => {
    const arena = Arena.create(planLayout({ layers: [4, 3, 2], batch: 2, compact: true, optimizer: 'adam' }), cpu);
    try {
      const t = new Trainer(arena);
      t.init(1);
      await expect(t.gradients([1, 2, 3, 4], { labels: [1] })).rejects.toMatchObject({ code: 'NOT_SUPPORTED', message: expect.stringMatching(/compact/) });
      await expect(runArena(arena, { op: 1, rows: 1 })).rejects.toMatchObject({
        code: 'NOT_SUPPORTED',
        message: expect.stringMatching(/compact arena keeps no gradients/),
      });
      expect((await t.step([1, 2, 3, 4], { labels: [1] })).loss).toBeGreaterThan(0); // training still runs
    } finally {
      arena.dispose();
    }
  });

  it('K models: a compact plan holds one (LayoutError naming compact; the native validator refuses such a header)', () => {
    expect(() => planLayout({ ...S, compact: true, models: 2 })).toThrow(
      expect.objectContaining({ name: 'LayoutError', code: 'BAD_SPEC', field: 'compact', message: expect.stringMatching(/holds one model.*models: 2/) }),
    );
    expect(planLayout({ ...S, compact: true, models: 1 }).header).toEqual(planLayout({ ...S, compact: true }).header);
    expect(planLayout({ ...S, compact: false, models: 3 }).spec.models).toBe(3);
    const plan = planLayout({ ...S, compact: true });
    const b = plan.header.slice();
    new DataView(b.buffer).setBigUint64(H.HEADER_FIELDS.models, 2n, true);
    expect(native().validateHeader(b, plan.totalBytes)).toMatch(/a compact plan holds one model; this one has models: 2/);
    expect(native().validateHeader(plan.header, plan.totalBytes)).toBe('');
  });

  it('device budgets: NOT_SUPPORTED (the schedulers do not model shared bytes)', () => {
    const plan = planLayout({ ...S, compact: true });
    expect(() => minDeviceBudget(plan, 'managed')).toThrow(ArenaError);
    expect(() => minDeviceBudget(plan, 'staged')).toThrow(expect.objectContaining({ code: 'NOT_SUPPORTED', message: expect.stringMatching(/compact/) }));
    expect(() => Arena.create(plan, { memory: 'managed', deviceBudget: 1 << 20 })).toThrow(expect.objectContaining({ code: 'NOT_SUPPORTED' }));
  });
});

describe('compact plan: checkpoints, plan output and the memory map', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nna-compact-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('save and load a compact arena: same plan, same weights, training goes on identically', async () => {
    const spec: LayoutSpec = { ...COMPACT_NETS[1]![1], optimizer: 'adam', compact: true };
    const plan = planLayout(spec);
    const file = join(dir, 'c.nna');
    const a = Arena.create(plan, cpu);
    try {
      const t = new Trainer(a, { lr: 0.01 });
      t.init(3);
      const x = Float64Array.from({ length: 12 * 16 }, (_, i) => Math.sin(i));
      const labels = Uint8Array.from({ length: 16 }, (_, i) => i % 3);
      await t.fit({ x, labels }, { epochs: 2 });
      await t.save(file);
      const info = inspectCheckpoint(file);
      expect(info.plan.spec.compact).toBe(true);
      expect(info.plan.header).toEqual(plan.header);
      const t2 = Trainer.load(file, cpu, { lr: 0.01 });
      try {
        for (let l = 1; l < spec.layers.length; l++) for (const k of ['w', 'b', 'mw', 'vw'] as const) expect(t2.arena.view(l, k)).toEqual(a.view(l, k));
        const [r1, r2] = [await t.fit({ x, labels }, { epochs: 1, seed: 4 }), await t2.fit({ x, labels }, { epochs: 1, seed: 4 })];
        expect(r2.loss).toBe(r1.loss);
        t.syncToHost();
        t2.syncToHost();
        for (let l = 1; l < spec.layers.length; l++) expect(t2.arena.view(l, 'w')).toEqual(a.view(l, 'w'));
      } finally {
        t2.arena.dispose();
      }
    } finally {
      a.dispose();
    }
  });

  it('the memory map draws shared bytes and names them', () => {
    const plan = planLayout({ ...DEEP, compact: true });
    const svg = planToSVG(plan);
    expect(svg).toContain(`compact: ${plan.bytesByKind().shared.toLocaleString('en-US')} bytes shared`);
    const bands = [...svg.matchAll(/class="nna-shared" data-offset="(\d+)" data-bytes="(\d+)"/g)].map((m) => [Number(m[1]), Number(m[2])]);
    const pairs = plan.shared.reduce((a, s) => a + s.with.length, 0) / 2;
    expect(bands.length).toBe(pairs);
    for (const [off, bytes] of bands) expect(plan.shared.some((s) => s.region.offset <= off! && off! + bytes! <= s.region.offset + s.region.bytes)).toBe(true);
    expect(svg).toMatch(/data-kind="shared" data-bytes="\d+"/);
    expect(planToSVG(planLayout(DEEP))).not.toMatch(/nna-shared|data-kind="shared"/);
  });

  const cli = (...args: string[]) => spawnSync(process.execPath, ['dist/cli.js', ...args], { encoding: 'utf8' });

  it('nn-arena plan --compact: totals, the shared bytes, who shares with whom; --vs-pytorch shows both plans', () => {
    const r = cli('plan', '--layers', '784,256,128,64,10', '--compact');
    expect(r.status, r.stderr).toBe(0);
    const plan = planLayout({ ...DEEP, compact: true });
    expect(r.stdout).toContain(`arena ${plan.totalBytes.toLocaleString('en-US')} bytes`);
    expect(r.stdout).toContain(`${plan.shared.length} of them share ${plan.bytesByKind().shared.toLocaleString('en-US')} bytes`);
    expect(r.stdout).toMatch(/shares bytes with/);
    expect(r.stdout).toMatch(/^\s*1\s+d\s+[\d,]+\s+[\d,]+\s+[\d,]+\s+.*d\[4\]/m);
    const v = cli('plan', '--layers', '784,128,10', '--batch', '100', '--compact', '--vs-pytorch');
    expect(v.status, v.stderr).toBe(0);
    expect(v.stdout).toContain('peak: PyTorch 1,186,304 B');
    expect(v.stdout).toContain('nn-arena 837,632 B');
    expect(v.stdout).toContain("= 0.71x PyTorch's peak");
    expect(v.stdout).toContain("plans: full 1,244,160 B = 1.05x; compact (regions never live together share bytes, no dw) 837,632 B = 0.71x PyTorch's peak");
    const j = JSON.parse(cli('plan', '--layers', '784,128,10', '--batch', '100', '--vs-pytorch', '--json').stdout);
    expect([j.vsPytorch.arena.fullBytes, j.vsPytorch.arena.compactBytes]).toEqual([1_244_160, 837_632]);
  });

  it('nn-arena train --compact --report and inspect of its checkpoint', () => {
    const report = join(dir, 'report.html'),
      save = join(dir, 'mnist.nna');
    const r = cli('train', '--backend', 'cpu', '--epochs', '1', '--optimizer', 'sgd', '--compact', '--report', report, '--save', save, '--json');
    expect(r.status, r.stderr).toBe(0);
    const html = readFileSync(report, 'utf8');
    expect(html).toMatch(/nn-arena [\d,]+ B \(compact plan\)/);
    // batch 50: without the 8,000-digit data set, both plans beside PyTorch's peak
    const full = planLayout({ layers: [784, 128, 10], batch: 50, samples: 8000 }),
      compact = planLayout({ layers: [784, 128, 10], batch: 50, samples: 8000, compact: true });
    const data = full.bytesByKind().xdata + full.bytesByKind().ydata;
    expect(html).toContain(`the full plan ${(full.totalBytes - data).toLocaleString('en-US')} B`);
    expect(html).toContain(`the compact plan (regions never live together share bytes) ${(compact.totalBytes - data).toLocaleString('en-US')} B`);
    expect(html).toContain('class="nna-map"');
    const i = cli('inspect', save);
    expect(i.status, i.stderr).toBe(0);
    expect(i.stdout).toMatch(/compact/);
    expect(i.stdout).toContain(`arena ${compact.totalBytes.toLocaleString('en-US')} bytes`);
  });
});

describe('compact plan with user regions: the user data keeps its bytes', () => {
  const EXTRA = [
    { name: 'ema', like: 'w' },
    { name: 'mask', like: 'z', layers: [1, 2] },
    { name: 'rng', bytes: 1000 },
  ] as const;
  const spec: LayoutSpec = { ...COMPACT_NETS[1]![1], extra: EXTRA };
  const isExtra = (r: { extra?: number }) => r.extra !== undefined;
  /** A copy of a header with entry `entry` of the kind table moved to `offset`. */
  const movedExtra = (header: Uint8Array, layers: number, entry: number, offset: number) => {
    const b = header.slice();
    const at = H.HEADER_SIZE + layers * H.LAYER_SIZE + EXTRA.length * H.EXTRA_SIZE + entry * H.REGION_SIZE + H.LAYER_FIELDS.region_offset;
    new DataView(b.buffer).setBigUint64(at, BigInt(offset), true);
    return b;
  };

  it('the bytes still shrink; user regions share bytes with nothing; the native checks accept it', () => {
    for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
      const full = planLayout({ ...spec, optimizer });
      const c = planLayout({ ...spec, optimizer, compact: true });
      expect(c.totalBytes).toBeLessThan(full.totalBytes);
      expect(c.headerBytes).toBe(full.headerBytes); // the same kind table
      expect(c.shared.length).toBeGreaterThan(0);
      const extras = c.regions.filter(isExtra);
      expect(extras.map((r) => `${r.kind}${r.layer}`)).toEqual(full.regions.filter(isExtra).map((r) => `${r.kind}${r.layer}`));
      for (const x of extras) {
        expect(c.shared.some((s) => s.region === x || s.with.includes(x))).toBe(false);
        for (const r of c.regions)
          if (r !== x) expect(r.offset >= x.offset + x.bytes || r.offset + r.bytes <= x.offset, `${x.kind}[${x.layer}] vs ${r.kind}[${r.layer}]`).toBe(true);
      }
      const k = c.bytesByKind();
      const sum = [...KINDS, 'header', 'padding', ...EXTRA.map((e) => e.name)].reduce((a, n) => a + k[n]!, 0);
      expect(sum - k.shared).toBe(c.totalBytes);
      expect(k.ema).toBe(full.bytesByKind().ema);
      expect(native().validateHeader(c.header, c.totalBytes)).toBe('');
    }
  });

  it('the validator refuses any overlap with a user region, in a compact header too', () => {
    const c = planLayout({ ...spec, compact: true });
    const L = c.spec.layers.length;
    const check = (h: Uint8Array) => native().validateHeader(h, c.totalBytes);
    const ema1 = c.region(1, 'ema')!,
      rng = c.find('rng')[0]!;
    // a scratch region (d[1], which shares bytes with others) moved onto a user region
    expect(check(moved(c.header, 1, 'd', ema1.offset))).toMatch(/^user region 'ema' of layer 1 overlaps layer 1 region d$/);
    // a kept region moved onto one
    expect(check(moved(c.header, 2, 'b', rng.offset))).toMatch(/^user region 'rng' overlaps layer 2 region b$/);
    // a user region moved onto a scratch region, and onto another user region
    const rngEntry = L * 2; // ema and mask have one entry per layer before it
    expect(check(movedExtra(c.header, L, rngEntry, c.region(2, 'd')!.offset))).toMatch(/^user region 'rng' overlaps layer 2 region d$/);
    expect(check(movedExtra(c.header, L, rngEntry, ema1.offset))).toMatch(
      /user region 'rng' overlaps user region 'ema' of layer 1|user region 'ema' of layer 1 overlaps user region 'rng'/,
    );
    expect(() => Arena.create({ ...c, header: moved(c.header, 1, 'd', ema1.offset) }, cpu)).toThrow(expect.objectContaining({ code: 'BAD_HEADER' }));
  });

  for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
    it(`${optimizer}: CPU training is bit-identical to the full plan with the same user regions`, async () => {
      const { full, compact } = await compactVsFull({ ...spec, optimizer }, cpu, optimizer === 'adam' ? 0.01 : 0.05);
      expect(compact.totalBytes).toBeLessThan(full.totalBytes);
      expect(compact.metrics).toEqual(full.metrics);
      expect(Buffer.from(compact.params).equals(Buffer.from(full.params))).toBe(true);
      expect(Buffer.from(compact.predictions).equals(Buffer.from(full.predictions))).toBe(true);
    });
  }

  it('training, evaluation, prediction and the primitives leave every user region bit for bit', async () => {
    const p = planLayout({ ...spec, compact: true, optimizer: 'adam' });
    const a = Arena.create(p, cpu);
    try {
      const t = new Trainer(a, { lr: 0.01 });
      t.init(2);
      const pattern = (r: { extra?: number; layer: number; length: number }) =>
        Float64Array.from({ length: r.length }, (_, i) => (r.extra! + 1) * 1000 + r.layer * 100 + i);
      for (const r of p.regions) if (isExtra(r)) a.view(r.layer, r.kind).set(pattern(r));
      const want = p.regions.filter(isExtra).map((r) => a.bytes(r.offset, r.bytes).slice());
      a.toDevice();
      const inputs = spec.layers[0]!,
        outputs = spec.layers[spec.layers.length - 1]!;
      const data = toyData(inputs, outputs, 60, 3, false);
      const w1 = [...a.view('w', 1)];
      await t.fit({ x: data.x, labels: data.labels! }, { epochs: 2, seed: 3 });
      await t.evaluate({ x: data.x, labels: data.labels! });
      await t.predict(data.x.subarray(0, inputs * 4));
      const x = data.x.subarray(0, inputs * 4);
      await t.forward(x);
      // backward / update would keep gradients between runs, which a compact arena does not
      await expect(t.backward({ labels: data.labels!.subarray(0, 4) })).rejects.toMatchObject({ name: 'ArenaError', code: 'NOT_SUPPORTED' });
      await expect(t.update()).rejects.toMatchObject({ code: 'NO_GRADIENTS' });
      t.syncToHost();
      expect([...a.view('w', 1)]).not.toEqual(w1);
      p.regions
        .filter(isExtra)
        .forEach((r, i) => expect(Buffer.from(a.bytes(r.offset, r.bytes)).equals(Buffer.from(want[i]!)), `${r.kind}[${r.layer}]`).toBe(true));
    } finally {
      a.dispose();
    }
  });
});
