// svg.ts: the arena drawn as an SVG memory map. Three views of the same bytes: the whole arena to
// scale (padding shows as hatching between regions), one row per layer on the same axis (so a
// layer-major plan is a staircase, a kind-major one columns), and every region and gap in offset
// order on a log scale, so that a 40-byte bias beside a 3 MiB weight matrix stays visible.
import { OptionError } from '../core/errors.js';
import { KINDS, type Kind } from '../layout/header.js';
import { requirePlan, type Plan, type Region } from '../layout/plan.js';
import { bytesText, esc, int } from './text.js';

export interface SvgOptions {
  /** Drawing width in px (default 960, at least 320). */
  width?: number;
  /** Narrowest drawn width of a region in px; narrower ones are widened and marked (default 3). */
  minRegionWidth?: number;
}

/** One colour per kind: parameters blue, gradients orange, optimizer state green/teal, data grey. */
export const KIND_COLORS: Readonly<Record<Kind | 'header' | 'padding', string>> = {
  header: '#6b7280',
  z: '#8b5cf6',
  b: '#1d4ed8',
  w: '#3b82f6',
  d: '#f97316',
  db: '#c2410c',
  dw: '#fb923c',
  mw: '#16a34a',
  mb: '#15803d',
  vw: '#14b8a6',
  vb: '#0f766e',
  y: '#e11d48',
  xdata: '#a3a3a3',
  ydata: '#737373',
  stats: '#eab308',
  padding: '#d4d4d4',
};

const KIND_NAMES: Readonly<Record<Kind | 'header' | 'padding', string>> = {
  header: 'header + layer table',
  z: 'outputs (z)',
  b: 'biases (b)',
  w: 'weights (w)',
  d: 'errors (d)',
  db: 'bias gradients (db)',
  dw: 'weight gradients (dw)',
  mw: 'momentum / Adam m of w',
  mb: 'momentum / Adam m of b',
  vw: 'Adam v of w',
  vb: 'Adam v of b',
  y: 'targets (y)',
  xdata: 'resident inputs',
  ydata: 'resident targets',
  stats: 'loss / accuracy stats',
  padding: 'padding (alignment)',
};

/** User regions (planLayout's `extra`), by their index in the kind table: pinks, ambers, limes
 *  and cyans, none of them a built-in kind's colour. */
export const EXTRA_COLORS: readonly string[] = ['#db2777', '#d97706', '#65a30d', '#0891b2', '#c026d3', '#a16207', '#059669', '#be123c'];

/** A built-in kind, 'header' or 'padding', or a user region (its name, with `extra` its index). */
interface Span {
  kind: string;
  layer: number;
  offset: number;
  bytes: number;
  extra?: number;
}

const colorOf = (s: { kind: string; extra?: number }) =>
  s.extra !== undefined ? EXTRA_COLORS[s.extra % EXTRA_COLORS.length]! : KIND_COLORS[s.kind as Kind | 'header' | 'padding'];

/** Header, regions and the padding gaps between them, in offset order, covering [0, totalBytes)
 *  (in a compact plan, regions that share bytes overlap). */
export function arenaSpans(plan: Plan): Span[] {
  requirePlan(plan);
  // The header struct and layer table; the padding after it up to headerBytes is shown as padding.
  const header = plan.bytesByKind().header;
  const out: Span[] = [{ kind: 'header', layer: -1, offset: 0, bytes: header }];
  let cursor = header;
  const push = (r: Region) => {
    if (r.offset > cursor) out.push({ kind: 'padding', layer: -1, offset: cursor, bytes: r.offset - cursor });
    out.push({ kind: r.kind, layer: r.layer, offset: r.offset, bytes: r.bytes, ...(r.extra !== undefined ? { extra: r.extra } : {}) });
    cursor = Math.max(cursor, r.offset + r.bytes); // a compact plan's regions overlap
  };
  plan.regions.forEach(push);
  if (plan.totalBytes > cursor) out.push({ kind: 'padding', layer: -1, offset: cursor, bytes: plan.totalBytes - cursor });
  return out;
}

/** 784-128-10; long networks shortened to their ends and the layer count. */
export const networkText = (layers: readonly number[]): string =>
  layers.length <= 8 ? layers.join('-') : `${layers.slice(0, 3).join('-')}-…-${layers.slice(-2).join('-')} (${layers.length} layers)`;

const f = (x: number) => (Math.round(x * 100) / 100).toString();

function spanTitle(s: Span): string {
  const who =
    s.extra !== undefined
      ? `user region ${s.kind}${s.layer >= 0 ? ` of layer ${s.layer}` : ' (global)'}`
      : s.layer >= 0
        ? `layer ${s.layer} ${s.kind}`
        : KIND_NAMES[s.kind as Kind | 'header' | 'padding'];
  return `${who}: offset ${int(s.offset)}, ${int(s.bytes)} bytes (${bytesText(s.bytes)}), ends at ${int(s.offset + s.bytes)}`;
}

function rect(view: string, s: Span, x: number, y: number, w: number, h: number, widened: boolean): string {
  const fill = s.kind === 'padding' ? 'url(#nna-hatch)' : colorOf(s);
  return `<rect class="nna-span" data-view="${view}" data-kind="${s.kind}"${s.extra !== undefined ? ` data-extra="${s.extra}"` : ''} data-layer="${s.layer}" data-offset="${s.offset}" data-bytes="${s.bytes}"${widened ? ' data-widened="1"' : ''} x="${f(x)}" y="${f(y)}" width="${f(w)}" height="${f(h)}" fill="${fill}"><title>${esc(spanTitle(s))}${widened ? ' (drawn wider than to scale)' : ''}</title></rect>`;
}

/** A small downward triangle above a region drawn wider than its true size. */
const marker = (x: number, y: number) => `<path class="nna-widened" d="M${f(x - 3)} ${f(y - 5)}h6l-3 4z" fill="#111"/>`;

export function planToSVG(plan: Plan, options: SvgOptions = {}): string {
  requirePlan(plan);
  if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { width?, minRegionWidth? }');
  const width = options.width ?? 960;
  if (typeof width !== 'number' || !Number.isFinite(width) || width < 320) throw new OptionError('BAD_OPTION', 'width', width, 'must be a number >= 320 (px)');
  const minW = options.minRegionWidth ?? 3;
  if (typeof minW !== 'number' || !Number.isFinite(minW) || minW < 1 || minW > 20)
    throw new OptionError('BAD_OPTION', 'minRegionWidth', minW, 'must be a number in [1, 20] (px)');
  const s = plan.spec;
  const total = plan.totalBytes;
  const spans = arenaSpans(plan);
  const labelW = 110;
  const x0 = 10 + labelW,
    plotW = width - x0 - 10;
  const scale = (b: number) => (b / total) * plotW;
  const parts: string[] = [];
  let y = 24;
  parts.push(
    `<text x="10" y="16" class="nna-title">${esc(`${networkText(s.layers)}  batch ${s.batch}  ${s.dtype}  ${s.optimizer}  ${s.order}  align ${s.align}${s.samples ? `  samples ${s.samples}` : ''}: ${int(total)} bytes (${bytesText(total)}), ${plan.regions.length} regions${s.compact ? `, compact: ${int(plan.bytesByKind().shared)} bytes shared` : ''}`)}</text>`,
  );

  // 1. The whole arena to scale; hatching behind it is the padding between regions.
  y += 14;
  parts.push(`<text x="10" y="${y + 15}" class="nna-label">to scale</text>`);
  parts.push(`<rect x="${x0}" y="${y}" width="${f(plotW)}" height="22" fill="url(#nna-hatch)" stroke="#999" stroke-width="0.5"/>`);
  for (const sp of spans) {
    if (sp.kind === 'padding') continue;
    const w = scale(sp.bytes);
    parts.push(rect('scale', sp, x0 + scale(sp.offset), y, Math.max(w, 0.5), 22, false));
  }
  // A compact plan: a black band under the bytes that two regions share (never live together).
  const index = new Map(plan.regions.map((r, i) => [r, i]));
  for (const { region: r, with: others } of plan.shared) {
    for (const q of others) {
      if (index.get(q)! < index.get(r)!) continue; // each pair once
      const from = Math.max(r.offset, q.offset),
        to = Math.min(r.offset + r.bytes, q.offset + q.bytes);
      parts.push(
        `<rect class="nna-shared" data-offset="${from}" data-bytes="${to - from}" x="${f(x0 + scale(from))}" y="${y + 22}" width="${f(Math.max(scale(to - from), 0.5))}" height="3" fill="#111"><title>${esc(`${int(to - from)} bytes shared by layer ${r.layer} ${r.kind} and layer ${q.layer} ${q.kind} (never live at the same time)`)}</title></rect>`,
      );
    }
  }
  y += 22;
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    const x = x0 + t * plotW;
    parts.push(
      `<line x1="${f(x)}" y1="${y}" x2="${f(x)}" y2="${y + 4}" stroke="#555"/><text x="${f(x)}" y="${y + 14}" class="nna-tick" text-anchor="${t === 0 ? 'start' : t === 1 ? 'end' : 'middle'}">${int(Math.round(t * total))}</text>`,
    );
  }
  y += 24;

  // 2. One row per layer on the same axis: where each layer's regions sit.
  parts.push(`<text x="10" y="${y + 10}" class="nna-section">by layer (offset axis as above; ▼ marks regions drawn at ${minW} px, wider than to scale)</text>`);
  y += 20;
  const rowH = s.layers.length > 20 ? 9 : 16;
  const gap = s.layers.length > 20 ? 3 : 5;
  const rows: Array<{ label: string; spans: Span[] }> = [{ label: 'header', spans: spans.filter((p) => p.kind === 'header') }];
  s.layers.forEach((units, l) => rows.push({ label: `layer ${l} (${units})`, spans: spans.filter((p) => p.layer === l) }));
  const global = spans.filter((p) => p.extra !== undefined && p.layer < 0);
  if (global.length) rows.push({ label: 'global (user)', spans: global });
  for (const row of rows) {
    const bytes = row.spans.reduce((a, p) => a + p.bytes, 0);
    parts.push(
      `<g class="nna-row" data-row="${esc(row.label)}" data-bytes="${bytes}"><text x="10" y="${y + rowH - 2}" class="nna-label${rowH < 12 ? ' nna-small' : ''}">${esc(row.label)}</text>`,
    );
    parts.push(`<line x1="${x0}" y1="${y + rowH / 2}" x2="${x0 + plotW}" y2="${y + rowH / 2}" stroke="#eee"/>`);
    for (const sp of row.spans) {
      const w = scale(sp.bytes);
      const widened = w < minW;
      const x = x0 + scale(sp.offset);
      parts.push(rect('layer', sp, x, y, widened ? minW : w, rowH, widened));
      if (widened) parts.push(marker(x + minW / 2, y));
    }
    parts.push('</g>');
    y += rowH + gap;
  }
  y += 10;

  // 3. Every span in offset order, width by log2(bytes): all regions and every gap visible.
  parts.push(`<text x="10" y="${y + 10}" class="nna-section">every region and padding gap in offset order, width by log2(bytes) (not to scale)</text>`);
  y += 18;
  const lineW = width - 20;
  const weight = (b: number) => 1 + Math.log2(b + 1);
  const sum = spans.reduce((a, p) => a + weight(p.bytes), 0);
  const perLine = Math.max(1, Math.ceil((sum * 1.5) / lineW));
  const unit = (lineW * perLine) / sum;
  let x = 10;
  const logH = 18;
  for (const sp of spans) {
    let w = Math.max(1.5, weight(sp.bytes) * unit);
    if (x + w > 10 + lineW + 0.01) {
      x = 10;
      y += logH + 4;
    }
    w = Math.min(w, lineW);
    parts.push(rect('log', sp, x, y, w, logH, false));
    if (w >= 24 && sp.kind !== 'padding')
      parts.push(
        `<text x="${f(x + w / 2)}" y="${y + 12}" class="nna-in" text-anchor="middle">${esc(sp.layer >= 0 ? `${sp.kind}${sp.layer}` : sp.extra !== undefined ? sp.kind : 'hdr')}</text>`,
      );
    x += w;
  }
  y += logH + 16;

  // Legend: every kind present, with its bytes; then the user regions.
  const byKind = plan.bytesByKind();
  const legend = (['header', ...KINDS, 'padding'] as const)
    .filter((k) => byKind[k] > 0)
    .map((k) => ({ k, name: KIND_NAMES[k], fill: k === 'padding' ? 'url(#nna-hatch)' : KIND_COLORS[k], extra: '' }))
    .concat(
      s.extra.map((e, i) => ({ k: e.name as never, name: `user region ${e.name}`, fill: colorOf({ kind: e.name, extra: i }), extra: ` data-extra="${i}"` })),
    );
  const colW = 230;
  const perRow = Math.max(1, Math.floor((width - 20) / colW));
  legend.forEach(({ k, name, fill, extra }, i) => {
    const lx = 10 + (i % perRow) * colW,
      ly = y + Math.floor(i / perRow) * 18;
    const b = byKind[k]!;
    parts.push(
      `<g class="nna-legend" data-kind="${k}"${extra} data-bytes="${b}"><rect x="${lx}" y="${ly}" width="12" height="12" fill="${fill}" stroke="#999" stroke-width="0.5"/><text x="${lx + 17}" y="${ly + 10}" class="nna-label">${esc(`${name}: ${int(b)} B`)}</text></g>`,
    );
  });
  if (byKind.shared > 0) {
    const i = legend.length,
      lx = 10 + (i % perRow) * colW,
      ly = y + Math.floor(i / perRow) * 18;
    parts.push(
      `<g class="nna-legend" data-kind="shared" data-bytes="${byKind.shared}"><rect x="${lx}" y="${ly + 4}" width="12" height="3" fill="#111"/><text x="${lx + 17}" y="${ly + 10}" class="nna-label">${esc(`shared (never live together): ${int(byKind.shared)} B`)}</text></g>`,
    );
  }
  y += Math.ceil((legend.length + (byKind.shared > 0 ? 1 : 0)) / perRow) * 18 + 6;

  const defs =
    '<defs><pattern id="nna-hatch" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="4" height="4" fill="#f3f4f6"/><line x1="0" y1="0" x2="0" y2="4" stroke="#9ca3af" stroke-width="1.5"/></pattern></defs>';
  const style =
    '<style>.nna-title{font:600 13px sans-serif}.nna-section{font:600 11px sans-serif;fill:#333}.nna-label{font:11px sans-serif;fill:#222}.nna-small{font-size:8px}.nna-tick{font:10px sans-serif;fill:#555}.nna-in{font:9px sans-serif;fill:#fff;pointer-events:none}</style>';
  return `<svg xmlns="http://www.w3.org/2000/svg" class="nna-map" width="${width}" height="${y}" viewBox="0 0 ${width} ${y}" data-total-bytes="${total}" data-order="${s.order}">${defs}${style}${parts.join('')}</svg>`;
}
