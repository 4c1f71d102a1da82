// How user regions (planLayout's `extra`) are planned: in both orders with the same alignment,
// recorded in the header's kind table (read back natively through nna_extra_*). Arenas with
// them: test/user-regions.test.ts.
import { describe, expect, it } from 'vitest';
import { LayoutError, planLayout, type LayoutSpec } from '../src/index.js';
import { HEADER_FIELDS } from '../src/layout/header.js';
import { native } from '../src/native/addon.js';
import { testAddon } from '../src/internal.js';
import { SPEC, byName, end } from './support/user-regions.js';

describe('planning user regions', () => {
  it.each(['layer-major', 'kind-major'] as const)('%s: every region aligned, none overlapping, shapes from the kind they are like', (order) => {
    for (const align of [8, 64, 256]) {
      const p = planLayout({ ...SPEC, order, align });
      const sorted = [...p.regions].sort((a, b) => a.offset - b.offset);
      expect(sorted).toEqual(p.regions); // offset order
      expect(p.regions[0]!.offset).toBe(p.headerBytes);
      for (let i = 0; i < sorted.length; i++) {
        expect(sorted[i]!.offset % align).toBe(0);
        if (i > 0) expect(sorted[i]!.offset).toBeGreaterThanOrEqual(end(sorted[i - 1]!));
        if (i > 0) expect(sorted[i]!.offset - end(sorted[i - 1]!)).toBeLessThan(align); // no gap beyond alignment
      }
      expect(p.totalBytes - end(sorted.at(-1)!)).toBeLessThan(align);
      // ema: like w in layers 1 and 2; mask: like z in layers 1 and 2 only; rng: 1000 bytes, global.
      expect(byName(p, 'ema').map((r) => [r.layer, r.length, r.bytes])).toEqual(
        expect.arrayContaining([
          [1, 20, 80],
          [2, 12, 48],
        ]),
      );
      expect(p.find('ema').map((r) => r.layer)).toEqual([1, 2]);
      expect(p.find('mask').map((r) => [r.layer, r.length])).toEqual([
        [1, 8],
        [2, 6],
      ]);
      expect(p.find('rng')).toEqual([expect.objectContaining({ layer: -1, kind: 'rng', extra: 2, length: 1000, bytes: 1000 })]);
      expect(p.region(0, 'mask')).toBeUndefined();
      expect(p.region(1, 'ema')).toBe(p.find('ema')[0]);
      expect(p.bytesByKind()).toMatchObject({ ema: 128, mask: 56, rng: 1000 });
      const b = p.bytesByKind();
      expect(Object.values(b).reduce((a, x) => a + x, 0)).toBe(p.totalBytes);
    }
  });

  it('layer-major: a per-layer user region sits with its layer; global ones follow the network, before the data set', () => {
    const p = planLayout({ ...SPEC, order: 'layer-major' });
    for (const l of [1, 2]) {
      const mine = p.regions.filter((r) => r.layer === l && r.kind !== 'xdata' && r.kind !== 'ydata');
      const first = p.regions.indexOf(mine[0]!);
      expect(p.regions.slice(first, first + mine.length)).toEqual(mine); // one contiguous run per layer
      expect(mine.slice(-2).map((r) => r.kind)).toEqual(['ema', 'mask']); // after its built-in kinds
    }
    const kinds = p.regions.map((r) => r.kind);
    expect(kinds.slice(-3)).toEqual(['rng', 'xdata', 'ydata']);
  });

  it('kind-major: user regions after every built-in kind, in table order, before the data set', () => {
    const p = planLayout({ ...SPEC, order: 'kind-major' });
    expect(p.regions.map((r) => `${r.kind}${r.layer}`).slice(-7)).toEqual(['ema1', 'ema2', 'mask1', 'mask2', 'rng-1', 'xdata0', 'ydata2']);
    const builtIn = p.regions.filter((r) => r.extra === undefined && r.kind !== 'xdata' && r.kind !== 'ydata');
    expect(Math.max(...builtIn.map(end))).toBeLessThanOrEqual(p.find('ema')[0]!.offset);
  });

  it('a plan without extras is laid out as before (version 2 header, no kind table)', () => {
    const p = planLayout({ layers: [5, 4, 3], batch: 2 });
    const v = new DataView(p.header.buffer);
    expect(v.getUint32(HEADER_FIELDS.version, true)).toBe(2);
    expect(v.getBigUint64(HEADER_FIELDS.extras_offset, true)).toBe(0n);
    expect(v.getUint32(HEADER_FIELDS.num_extras, true)).toBe(0);
    expect(v.getUint32(HEADER_FIELDS.extra_size, true)).toBe(0);
    expect(p.spec.extra).toEqual([]);
  });

  it('the header alone says what every byte is: the kind table read natively matches the plan', () => {
    for (const order of ['layer-major', 'kind-major'] as const) {
      const p = planLayout({ ...SPEC, order, dtype: 'float64' });
      expect(native().validateHeader(p.header, p.totalBytes)).toBe('');
      const h = testAddon().decodeHeader(p.header);
      expect(h.extras.map((e) => [e.name, e.found, e.elemBytes])).toEqual([
        ['ema', 0, 8],
        ['mask', 1, 8],
        ['rng', 2, 1],
      ]);
      expect(h.extras[0]!.regions).toEqual(
        [0, 1, 2].map((l) => {
          const r = p.region(l, 'ema');
          return r ? [BigInt(r.offset), BigInt(r.length)] : [0n, 0n];
        }),
      );
      expect(h.extras[2]!.regions).toEqual([[BigInt(p.find('rng')[0]!.offset), 1000n]]);
    }
  });

  const bad: Array<[string, unknown, string]> = [
    ['not an array', { name: 'x', like: 'w' }, 'extra'],
    ['not an object', ['ema'], 'extra[0]'],
    [
      'duplicate name',
      [
        { name: 'a', like: 'w' },
        { name: 'a', bytes: 4 },
      ],
      'extra[1].name',
    ],
    ['built-in kind name', [{ name: 'mw', like: 'w' }], 'extra[0].name'],
    ['reserved name', [{ name: 'header', bytes: 4 }], 'extra[0].name'],
    ['bad charset', [{ name: 'e-ma', like: 'w' }], 'extra[0].name'],
    ['leading digit', [{ name: '1ema', like: 'w' }], 'extra[0].name'],
    ['too long', [{ name: 'x'.repeat(32), like: 'w' }], 'extra[0].name'],
    ['not a string', [{ name: 7, like: 'w' }], 'extra[0].name'],
    ['unknown shape', [{ name: 'e', like: 'dw' }], 'extra[0].like'],
    ['unknown per', [{ name: 'e', per: 'y' }], 'extra[0].per'],
    ['like and per', [{ name: 'e', like: 'w', per: 'w' }], 'extra[0].per'],
    ['no shape', [{ name: 'e' }], 'extra[0]'],
    ['bytes and like', [{ name: 'e', bytes: 4, like: 'w' }], 'extra[0].bytes'],
    ['bytes and layers', [{ name: 'e', bytes: 4, layers: [1] }], 'extra[0].bytes'],
    ['zero bytes', [{ name: 'e', bytes: 0 }], 'extra[0].bytes'],
    ['fractional bytes', [{ name: 'e', bytes: 1.5 }], 'extra[0].bytes'],
    ['layer out of range', [{ name: 'e', like: 'z', layers: [3] }], 'extra[0].layers[0]'],
    ['layer without the kind', [{ name: 'e', like: 'w', layers: [0] }], 'extra[0].layers[0]'],
    ['repeated layer', [{ name: 'e', like: 'b', layers: [1, 1] }], 'extra[0].layers[1]'],
    ['no layers', [{ name: 'e', like: 'b', layers: [] }], 'extra[0].layers'],
    ['too many', Array.from({ length: 65 }, (_, i) => ({ name: `e${i}`, bytes: 1 })), 'extra'],
  ];
  it.each(bad)('refuses %s: LayoutError BAD_EXTRA naming the field', (_, extra, field) => {
    let err: unknown;
    try {
      planLayout({ layers: [5, 4, 3], batch: 2, extra: extra as LayoutSpec['extra'] });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LayoutError);
    expect(err).toMatchObject({ code: 'BAD_EXTRA', field });
  });

  it('64 user regions fit (the checkpoint mask and the table limit)', () => {
    const p = planLayout({ layers: [3, 2], batch: 1, extra: Array.from({ length: 64 }, (_, i) => ({ name: `e${i}`, bytes: i + 1 })) });
    expect(native().validateHeader(p.header, p.totalBytes)).toBe('');
    expect(testAddon().decodeHeader(p.header).extras[63]).toMatchObject({ name: 'e63', found: 63 });
  });

  it('the spec is read once: a getter that changes its answer cannot change the plan', () => {
    let n = 0;
    const e = {
      get name() {
        return n++ === 0 ? 'ema' : 'w';
      },
      like: 'w' as const,
    };
    const p = planLayout({ layers: [3, 2], batch: 1, extra: [e] });
    expect(p.spec.extra[0]!.name).toBe('ema');
    expect(n).toBe(1);
  });
});
