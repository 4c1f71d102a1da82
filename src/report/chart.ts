// chart.ts: a small inline-SVG line chart (no script, no fetch): one path through the points and
// one circle per point, each circle carrying its index and value as data attributes.
import { esc } from './text.js';

export interface ChartOptions {
  id: string;
  title: string;
  /** x of each point (e.g. epochs done, fractional) and its y. */
  xs: readonly number[];
  ys: readonly number[];
  xLabel: string;
  format: (y: number) => string;
  color?: string;
  width?: number;
  height?: number;
}

const f = (x: number) => (Math.round(x * 100) / 100).toString();

/** Ticks: min, max and up to 3 between, rounded for reading. */
function ticks(lo: number, hi: number): number[] {
  if (hi === lo) return [lo];
  return [0, 0.25, 0.5, 0.75, 1].map((t) => lo + t * (hi - lo));
}

/** [min, max] of values, or `empty` for none: a loop, since Math.min(...xs) overflows the stack
 *  for a few hundred thousand points. */
function extent(values: readonly number[], empty: [number, number]): [number, number] {
  if (values.length === 0) return empty;
  let lo = Infinity,
    hi = -Infinity;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return [lo, hi];
}

export function lineChart(o: ChartOptions): string {
  const W = o.width ?? 460,
    H = o.height ?? 230;
  const left = 56,
    right = 14,
    top = 28,
    bottom = 38;
  const pw = W - left - right,
    ph = H - top - bottom;
  const n = o.ys.length;
  const finite = o.ys.filter(Number.isFinite);
  let [lo, hi] = extent(finite, [0, 1]);
  if (hi === lo) {
    lo -= Math.abs(lo) * 0.05 || 0.5;
    hi += Math.abs(hi) * 0.05 || 0.5;
  }
  const pad = (hi - lo) * 0.06;
  lo -= pad;
  hi += pad;
  const [x0, x1] = extent(n ? o.xs : [], [0, 1]);
  const sx = (x: number) => left + (x1 === x0 ? pw / 2 : ((x - x0) / (x1 - x0)) * pw);
  const sy = (y: number) => top + ph - ((y - lo) / (hi - lo)) * ph;
  const color = o.color ?? '#2563eb';
  const parts: string[] = [];
  parts.push(`<text x="${left}" y="16" class="c-title">${esc(o.title)}</text>`);
  parts.push(`<rect x="${left}" y="${top}" width="${pw}" height="${ph}" fill="#fafafa" stroke="#ddd"/>`);
  for (const t of ticks(lo + pad, hi - pad)) {
    const y = sy(t);
    parts.push(
      `<line x1="${left}" x2="${left + pw}" y1="${f(y)}" y2="${f(y)}" stroke="#eee"/><text x="${left - 4}" y="${f(y + 3)}" text-anchor="end" class="c-tick">${esc(o.format(t))}</text>`,
    );
  }
  const xt = x1 === x0 ? [x0] : [x0, (x0 + x1) / 2, x1];
  for (const t of xt)
    parts.push(`<text x="${f(sx(t))}" y="${top + ph + 14}" text-anchor="middle" class="c-tick">${esc(String(Math.round(t * 100) / 100))}</text>`);
  parts.push(`<text x="${left + pw / 2}" y="${H - 6}" text-anchor="middle" class="c-axis">${esc(o.xLabel)}</text>`);
  const pts = o.ys.map((y, i) => [sx(o.xs[i]!), sy(Number.isFinite(y) ? y : lo)] as const);
  if (n > 0)
    parts.push(
      `<path class="c-line" data-points="${n}" d="${pts.map(([x, y], i) => `${i ? 'L' : 'M'}${f(x)} ${f(y)}`).join(' ')}" fill="none" stroke="${color}" stroke-width="2"/>`,
    );
  pts.forEach(([x, y], i) => {
    parts.push(
      `<circle class="c-pt" data-i="${i}" data-value="${o.ys[i]}" cx="${f(x)}" cy="${f(y)}" r="3" fill="${color}"><title>${esc(`${o.xLabel} ${Math.round(o.xs[i]! * 100) / 100}: ${o.format(o.ys[i]!)}`)}</title></circle>`,
    );
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" id="${esc(o.id)}" class="chart" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" data-points="${n}">${parts.join('')}</svg>`;
}
