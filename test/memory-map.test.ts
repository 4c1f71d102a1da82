// The SVG memory map: every region drawn at its offset, to scale, and still visible when tiny.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OptionError, planLayout, type Plan } from '../src/index.js';
import { planToSVG } from '../src/tools.js';

interface Drawn {
  view: string;
  kind: string;
  layer: number;
  offset: number;
  bytes: number;
  x: number;
  width: number;
  widened: boolean;
}

function drawn(svg: string): Drawn[] {
  return [...svg.matchAll(/<rect class="nna-span"([^>]*)>/g)].map((m) => {
    const a = (k: string) => m[1]!.match(new RegExp(` ${k}="([^"]*)"`))?.[1];
    return {
      view: a('data-view')!,
      kind: a('data-kind')!,
      layer: Number(a('data-layer')),
      offset: Number(a('data-offset')),
      bytes: Number(a('data-bytes')),
      x: Number(a('x')),
      width: Number(a('width')),
      widened: a('data-widened') === '1',
    };
  });
}

const deep = (order: 'layer-major' | 'kind-major') =>
  planLayout({
    layers: Array.from({ length: 50 }, (_, i) => (i === 0 ? 784 : i === 49 ? 10 : 32 + 5 * i)),
    batch: 16,
    optimizer: 'adam',
    order,
  });

function checkScale(plan: Plan, svg: string) {
  const d = drawn(svg);
  const scale = d.filter((r) => r.view === 'scale');
  expect(scale).toHaveLength(plan.regions.length + 1); // + the header
  // Default width 960: a 120 px label column, a 10 px right margin.
  const x0 = 120,
    plotW = 960 - 120 - 10;
  expect(scale.find((r) => r.kind === 'header')!.x).toBe(x0);
  for (const r of plan.regions) {
    const s = scale.find((q) => q.layer === r.layer && q.kind === r.kind)!;
    expect(s.offset).toBe(r.offset);
    expect(s.x).toBeCloseTo(x0 + (r.offset / plan.totalBytes) * plotW, 1);
    expect(s.width).toBeCloseTo(Math.max(0.5, (r.bytes / plan.totalBytes) * plotW), 1);
  }
}

describe('planToSVG', () => {
  for (const order of ['layer-major', 'kind-major'] as const) {
    it(`draws a 2-layer ${order} arena to scale, one row per layer, every gap in the log strip`, () => {
      const plan = planLayout({ layers: [784, 128, 10], batch: 100, optimizer: 'adam', order });
      const svg = planToSVG(plan);
      expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
      checkScale(plan, svg);
      const d = drawn(svg);
      // By layer: each row holds exactly that layer's regions.
      const rows = d.filter((r) => r.view === 'layer' && r.kind !== 'header');
      for (let l = 0; l < 3; l++) {
        expect(
          rows
            .filter((r) => r.layer === l)
            .map((r) => r.kind)
            .sort(),
        ).toEqual(
          plan.regions
            .filter((r) => r.layer === l)
            .map((r) => r.kind)
            .sort(),
        );
      }
      // Log strip: header, regions and padding tile [0, totalBytes) in offset order.
      const log = d.filter((r) => r.view === 'log');
      let cursor = 0;
      for (const s of log) {
        expect(s.offset).toBe(cursor);
        cursor += s.bytes;
      }
      expect(cursor).toBe(plan.totalBytes);
      expect(log.filter((s) => s.kind === 'padding').reduce((a, s) => a + s.bytes, 0)).toBe(plan.bytesByKind().padding);
      expect(log.filter((s) => s.kind !== 'padding')).toHaveLength(plan.regions.length + 1);
      expect(svg).toContain(`data-order="${order}"`);
    });

    it(`keeps all regions of a 50-layer ${order} arena visible, marking the widened ones`, () => {
      const plan = deep(order);
      const svg = planToSVG(plan, { minRegionWidth: 3 });
      checkScale(plan, svg);
      const rows = drawn(svg).filter((r) => r.view === 'layer');
      expect(rows).toHaveLength(plan.regions.length + 1);
      for (const r of rows) expect(r.width).toBeGreaterThanOrEqual(3);
      const widened = rows.filter((r) => r.widened);
      expect(widened.length).toBeGreaterThan(0);
      // Widened exactly where the true width is under 3 px, with one marker each.
      const plotW = 960 - 120 - 10;
      for (const r of rows) expect(r.widened).toBe((r.bytes / plan.totalBytes) * plotW < 3);
      expect(svg.match(/class="nna-widened"/g)).toHaveLength(widened.length);
      for (const r of drawn(svg).filter((q) => q.view === 'log')) expect(r.width).toBeGreaterThanOrEqual(1.5);
    });
  }

  it('refuses bad options with an OptionError naming the field', () => {
    const plan = planLayout({ layers: [4, 3, 2], batch: 2 });
    expect(() => planToSVG(plan, { width: 100 })).toThrow(OptionError);
    try {
      planToSVG(plan, { minRegionWidth: 0 });
    } catch (e) {
      expect((e as OptionError).code).toBe('BAD_OPTION');
      expect((e as OptionError).field).toBe('minRegionWidth');
    }
    expect(() => planToSVG(plan, { minRegionWidth: 0 })).toThrow(/minRegionWidth/);
  });

  it('nn-arena plan --svg writes the map and says where', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'nna-svg-')), 'map.svg');
    const r = spawnSync(process.execPath, ['dist/cli.js', 'plan', '--layers', '784,128,10', '--order', 'kind-major', '--svg', file], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`memory map written to ${file}`);
    const plan = planLayout({ layers: [784, 128, 10], batch: 100, order: 'kind-major' });
    const written = readFileSync(file, 'utf8');
    expect(drawn(written)).toEqual(drawn(planToSVG(plan)));
    expect(written.length).toBe(planToSVG(plan).length);
  });
});
