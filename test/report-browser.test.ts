// The training report opened in a real headless Chromium (Debian's `chromium`, driven by
// playwright-core): the charts render with one point per progress report, the memory map and the
// transfer table are there, and the page makes no network request.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { planLayout, selectRanges } from '../src/index.js';

// page.evaluate callbacks run in the page; this Node project has no DOM types (lib dom would
// apply to every file), so the page's document is typed loosely here.
declare const document: any; // eslint-disable-line @typescript-eslint/no-explicit-any

const CHROMIUM = process.env.NN_ARENA_CHROMIUM ?? '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`report-browser.test.ts: skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set NN_ARENA_CHROMIUM)`);

describe.skipIf(!haveChromium)('nn-arena train --report in headless Chromium', () => {
  it('renders both charts with one point per report, the memory map and transfers by purpose, fetching nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nna-report-'));
    const file = join(dir, 'report.html');
    const epochs = 2;
    const r = spawnSync(process.execPath, ['dist/cli.js', 'train', '--backend', 'cpu', '--epochs', String(epochs), '--report', file, '--json'], {
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain(`training report written to ${file}`);
    const summary = JSON.parse(r.stdout);
    expect(summary.report).toBe(file);
    const html = readFileSync(file, 'utf8');
    // Self-contained: no script, no URL to load anything from.
    expect(html).not.toMatch(/<script|<link|\bsrc=|url\((?!#)|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);

    const { chromium } = await import('playwright-core');
    const profile = join(dir, 'profile');
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      // The browser is not ours: under npm run test:asan it must not inherit the sanitizer preload.
      env: { ...process.env, LD_PRELOAD: '' },
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    try {
      const page = await context.newPage();
      const requests: string[] = [];
      const problems: string[] = [];
      page.on('request', (q) => requests.push(q.url()));
      page.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warning') problems.push(m.text());
      });
      page.on('pageerror', (e) => problems.push(String(e)));
      const url = `file://${file}`;
      await page.goto(url, { waitUntil: 'load' });

      const reports = epochs * 4; // the CLI asks for 4 progress reports per epoch
      for (const id of ['loss-chart', 'accuracy-chart']) {
        const chart = await page.evaluate((id) => {
          const svg = document.getElementById(id);
          const box = svg.getBoundingClientRect();
          const path = svg.querySelector('path.c-line')!;
          const pts = [...svg.querySelectorAll('circle.c-pt')].map((c) => {
            const b = c.getBoundingClientRect();
            return { value: Number(c.getAttribute('data-value')), cy: b.top + b.height / 2 - box.top, w: b.width };
          });
          return {
            width: box.width,
            height: box.height,
            vertices: (path.getAttribute('d')!.match(/[ML]/g) ?? []).length,
            pathLength: path.getTotalLength(),
            pts,
          };
        }, id);
        expect(chart.width, id).toBeGreaterThan(200);
        expect(chart.height, id).toBeGreaterThan(100);
        expect(chart.vertices, id).toBe(reports);
        expect(chart.pathLength, id).toBeGreaterThan(0);
        expect(chart.pts, id).toHaveLength(reports);
        for (const p of chart.pts) {
          expect(Number.isFinite(p.value)).toBe(true);
          expect(p.w).toBeGreaterThan(0); // laid out, visible
          expect(p.cy).toBeGreaterThanOrEqual(0);
          expect(p.cy).toBeLessThanOrEqual(chart.height);
        }
        // Higher values are drawn higher up: the smallest and largest values at the bottom and top.
        const lo = chart.pts.reduce((a, p) => (p.value < a.value ? p : a));
        const hi = chart.pts.reduce((a, p) => (p.value > a.value ? p : a));
        expect(hi.cy).toBeLessThan(lo.cy);
      }
      const last = await page.evaluate(() => Number(document.querySelector('#accuracy-chart circle.c-pt:last-of-type')!.getAttribute('data-value')));
      expect(last).toBeCloseTo(summary.trainAccuracy, 6);

      // The memory map: the plan the CLI trained with, one to-scale rect per region (+ header).
      const plan = planLayout({ layers: [784, 128, 10], batch: 50, optimizer: 'momentum', samples: 8000 });
      const map = await page.evaluate(() => {
        const svg = document.querySelector('svg.nna-map')!;
        return {
          total: Number(svg.getAttribute('data-total-bytes')),
          scale: svg.querySelectorAll('rect[data-view="scale"]').length,
          width: svg.getBoundingClientRect().width,
        };
      });
      expect(map.total).toBe(plan.totalBytes);
      expect(map.scale).toBe(plan.regions.length + 1);
      expect(map.width).toBeGreaterThan(300);

      // Transfers by purpose add up to the arena's own totals.
      const rows = await page.evaluate(() =>
        [...document.querySelectorAll('#transfers .purpose')].map((e) => ({
          purpose: e.getAttribute('data-purpose'),
          direction: e.getAttribute('data-direction'),
          transfers: Number(e.getAttribute('data-transfers')),
          bytes: Number(e.getAttribute('data-bytes')),
        })),
      );
      const get = (p: string) => rows.find((x) => x.purpose === p)!;
      expect(rows.map((x) => x.purpose)).toEqual(['header', 'network', 'data', 'stats', 'weights back']);
      expect(get('header')).toMatchObject({ direction: 'to device', transfers: 1, bytes: plan.headerBytes });
      // The first upload sends what init wrote, never the still-empty data regions (test/first-upload.test.ts).
      const kinds = plan.bytesByKind();
      expect(get('network').direction).toBe('to device');
      expect(get('network').transfers).toBeGreaterThanOrEqual(1);
      expect(get('network').bytes).toBeLessThanOrEqual(plan.totalBytes - kinds.xdata! - kinds.ydata!);
      expect(get('network').bytes).toBeGreaterThanOrEqual(kinds.w! + kinds.b! + kinds.mw! + kinds.mb!);
      expect(get('stats')).toMatchObject({ direction: 'to host', transfers: reports + 1 });
      expect(get('weights back').bytes).toBe(selectRanges(plan, { kinds: ['w', 'b'] }).reduce((a, x) => a + x.bytes, 0));
      const sum = (dir: string, k: 'transfers' | 'bytes') => rows.filter((x) => x.direction === dir).reduce((a, x) => a + x[k], 0);
      expect(sum('to device', 'transfers')).toBe(summary.transfers.toDevice.transfers);
      expect(sum('to device', 'bytes')).toBe(summary.transfers.toDevice.bytes);
      expect(sum('to host', 'transfers')).toBe(summary.transfers.toHost.transfers);
      expect(sum('to host', 'bytes')).toBe(summary.transfers.toHost.bytes);

      // Machine and settings are on the page.
      const text = await page.evaluate(() => document.body.innerText);
      expect(text).toMatch(/CPU\s+.+, \d+ cores/);
      expect(text).toMatch(/optimizer\s+momentum/);

      expect(requests.filter((u) => u !== url)).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
