// Transfers by purpose: the recorder files each of the arena's transfer calls under its purpose,
// with the native layer's own counts, and puts the arena back as it was.
import { describe, expect, it } from 'vitest';
import { Arena, Trainer, planLayout, selectRanges } from '../src/index.js';
import { purposeOf, recordTransfers } from '../src/tools.js';

describe('purposeOf', () => {
  it('classifies by direction and selector', () => {
    expect(purposeOf('toDevice', undefined)).toBe('network');
    expect(purposeOf('toDevice', { kinds: ['header'] })).toBe('header');
    expect(purposeOf('toDevice', { kinds: ['xdata', 'ydata'] })).toBe('data');
    expect(purposeOf('toDevice', { layers: [0], kinds: ['z'] })).toBe('data');
    expect(purposeOf('toDevice', { layers: [1], kinds: ['z'] })).toBe('other');
    expect(purposeOf('toDevice', { layers: [2], kinds: ['y'] })).toBe('data');
    expect(purposeOf('toDevice', { kinds: ['w', 'b'] })).toBe('network');
    expect(purposeOf('toHost', { layers: [2], kinds: ['stats'] })).toBe('stats');
    expect(purposeOf('toHost', { kinds: ['w', 'b'] })).toBe('weights back');
    expect(purposeOf('toHost', undefined)).toBe('weights back');
    expect(purposeOf('toHost', { kinds: ['dw', 'db'] })).toBe('other');
    expect(purposeOf('toHost', { kinds: ['w', 'b', 'mw', 'mb', 'vw', 'vb', 'stats'] })).toBe('weights back'); // a Trainer checkpoint's read-back
  });
});

describe('recordTransfers', () => {
  it("attributes a fit's transfers: header at create, what init wrote, data set, stats per report, weights back", async () => {
    const plan = planLayout({ layers: [6, 5, 3], batch: 4, samples: 20 });
    const arena = Arena.create(plan, { backend: 'cpu' });
    try {
      const rec = recordTransfers(arena);
      const t = new Trainer(arena);
      t.init(3);
      const x = Float32Array.from({ length: 20 * 6 }, (_, i) => ((i * 7) % 11) / 11);
      const labels = Uint8Array.from({ length: 20 }, (_, i) => i % 3);
      await t.fit({ x, labels }, { epochs: 3, reportsPerEpoch: 2 });
      const by = Object.fromEntries(rec.byPurpose().map((p) => [p.purpose, p]));
      expect(Object.keys(by)).toEqual(['header', 'network', 'data', 'stats', 'weights back']);
      expect(by.header).toMatchObject({ calls: 1, transfers: 1, bytes: plan.headerBytes, direction: 'to device' });
      // What init wrote of the new arena (w and b, merged across the small regions between).
      const wb = plan.regions.filter((r) => r.kind === 'w' || r.kind === 'b');
      const span = Math.max(...wb.map((r) => r.offset + r.bytes)) - Math.min(...wb.map((r) => r.offset));
      expect(by.network).toMatchObject({ calls: 1, transfers: 1, bytes: span });
      const k = plan.bytesByKind();
      expect(by.data!.bytes).toBe(selectRanges(plan, { kinds: ['xdata', 'ydata'] }).reduce((a, r) => a + r.bytes, 0));
      expect(by.data!.bytes).toBeGreaterThanOrEqual(k.xdata + k.ydata);
      expect(by.stats).toMatchObject({ calls: 6, transfers: 6, bytes: 6 * k.stats, direction: 'to host' });
      expect(by['weights back']!.transfers).toBe(2);
      const s = arena.stats;
      const total = (d: string, f: 'transfers' | 'bytes') =>
        rec
          .byPurpose()
          .filter((p) => p.direction === d)
          .reduce((a, p) => a + p[f], 0);
      expect(total('to device', 'bytes')).toBe(s.toDeviceBytes);
      expect(total('to host', 'transfers')).toBe(s.toHostTransfers);
      rec.stop();
      expect(Object.prototype.hasOwnProperty.call(arena, 'toDevice')).toBe(false);
      arena.toHost();
      expect(rec.byPurpose().find((p) => p.purpose === 'weights back')!.calls).toBe(1); // no longer recorded
    } finally {
      arena.dispose();
    }
  });
});
