// Hostile headers: 100,000 mutations of valid headers through the native validator. Nothing may
// crash; every accepted header must bind only inside its arena (checked by allocating it and
// running the binding code over it).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Arena, planLayout, type Plan } from '../src/index.js';
import { EXTRA_FIELDS, EXTRA_SIZE, HEADER_FIELDS, HEADER_SIZE, KINDS, LAYER_FIELDS, LAYER_SIZE, REGION_SIZE } from '../src/layout/header.js';
import { probeBind, testAddon } from '../src/internal.js';
import { native } from '../src/native/addon.js';

const BASES: Plan[] = [
  planLayout({ layers: [6, 5, 4], batch: 3 }),
  planLayout({ layers: [7, 9, 3, 2], batch: 5, optimizer: 'adam', order: 'kind-major', samples: 11 }),
  planLayout({ layers: [3, 2], batch: 1, dtype: 'float64', optimizer: 'momentum', align: 8, samples: 2 }),
  planLayout({
    layers: [5, 4, 3],
    batch: 2,
    optimizer: 'adam',
    extra: [
      { name: 'ema', like: 'w' },
      { name: 'mask', per: 'z', layers: [1] },
      { name: 'rng', bytes: 40 },
    ],
  }),
  planLayout({
    layers: [4, 3],
    batch: 2,
    order: 'kind-major',
    align: 8,
    extra: [
      { name: 'g', bytes: 9 },
      { name: 'bb', like: 'b' },
    ],
  }),
];

const interesting = [0n, 1n, 2n, 7n, 8n, 255n, 256n, 4096n, 2n ** 31n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 53n, 2n ** 63n, 2n ** 64n - 1n];

/** Byte offsets and widths of every field of the header, the layer table and the kind table. */
function fieldOffsets(plan: Plan): Array<[number, 4 | 8]> {
  const u32 = (at: number) => at < 32 || at === HEADER_FIELDS.num_extras || at === HEADER_FIELDS.extra_size;
  const out: Array<[number, 4 | 8]> = Object.entries(HEADER_FIELDS).map(([, at]) => [at, u32(at) ? 4 : 8]);
  const table = HEADER_SIZE + plan.spec.layers.length * LAYER_SIZE;
  plan.spec.extra.forEach((_, i) => {
    for (const at of Object.values(EXTRA_FIELDS)) out.push([table + i * EXTRA_SIZE + at, 4]);
  });
  const entries = plan.spec.extra.reduce((a, e) => a + (e.bytes === undefined ? plan.spec.layers.length : 1), 0);
  for (let j = 0; j < entries; j++) {
    const at = table + plan.spec.extra.length * EXTRA_SIZE + j * REGION_SIZE;
    out.push([at, 8], [at + 8, 8]);
  }
  for (let l = 0; l < plan.spec.layers.length; l++) {
    const at = HEADER_SIZE + l * LAYER_SIZE;
    out.push([at + LAYER_FIELDS.units, 8], [at + LAYER_FIELDS.fan_in, 8], [at + LAYER_FIELDS.activation, 4]);
    for (let k = 0; k < KINDS.length; k++) out.push([at + LAYER_FIELDS.region + k * REGION_SIZE, 8], [at + LAYER_FIELDS.region + k * REGION_SIZE + 8, 8]);
  }
  return out;
}

const mutation = fc.record({
  base: fc.nat({ max: BASES.length - 1 }),
  edits: fc.array(
    fc.oneof(
      fc.record({
        kind: fc.constant('field' as const),
        pick: fc.nat(),
        value: fc.oneof(fc.constantFrom(...interesting), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })),
        delta: fc.constantFrom(0n, 1n, -1n, 8n, -8n, 256n),
      }),
      fc.record({ kind: fc.constant('byte' as const), pick: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }),
      fc.record({ kind: fc.constant('shift' as const), pick: fc.nat(), value: fc.constant(0n), delta: fc.constantFrom(8n, 256n, -256n, 4096n) }),
    ),
    { minLength: 1, maxLength: 3 },
  ),
  truncate: fc.option(fc.nat(), { freq: 10 }),
});

describe('hostile headers', () => {
  it('100,000 mutated headers: no crash, and every accepted one binds inside its arena', () => {
    let accepted = 0,
      bound = 0;
    fc.assert(
      fc.property(mutation, ({ base, edits, truncate }) => {
        const plan = BASES[base]!;
        let bytes = plan.header.slice();
        const v = new DataView(bytes.buffer);
        const fields = fieldOffsets(plan);
        for (const e of edits) {
          if (e.kind === 'byte') {
            bytes[e.pick % bytes.length] = e.value;
            continue;
          }
          const [at, width] = fields[e.pick % fields.length]!;
          const old = width === 4 ? BigInt(v.getUint32(at, true)) : v.getBigUint64(at, true);
          const x = e.kind === 'shift' ? old + e.delta! : e.value + e.delta!;
          if (width === 4) v.setUint32(at, Number(BigInt.asUintN(32, x)), true);
          else v.setBigUint64(at, BigInt.asUintN(64, x), true);
        }
        if (truncate !== null) bytes = bytes.slice(0, truncate % (bytes.length + 1));
        const why = native().validateHeader(bytes, plan.totalBytes);
        expect(typeof why).toBe('string');
        if (why !== '') return;
        accepted++;
        // Accepted: allocate it (the arena must be the size it claims) and bind every region.
        const total = Number(new DataView(bytes.buffer).getBigUint64(HEADER_FIELDS.total_bytes, true));
        using a = Arena.create({ ...plan, header: bytes }, { backend: 'cpu' });
        const offsets = probeBind(a);
        for (const o of offsets) if (o !== 0xffffffffffffffffn) expect(o < BigInt(total)).toBe(true);
        // User regions, found through the public header's nna_extra_* functions: inside the arena.
        for (const e of testAddon().decodeHeader(bytes).extras) {
          for (const [offset, count] of e.regions) if (count > 0n) expect(offset + count * BigInt(e.elemBytes) <= BigInt(total)).toBe(true);
        }
        bound++;
      }),
      { numRuns: 100_000, seed: 42 },
    );
    // The mutations must not all be rejected for one trivial reason: some keep a valid header.
    expect(accepted).toBeGreaterThan(100);
    expect(bound).toBe(accepted);
  });
});
