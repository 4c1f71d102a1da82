// Version 4 of the header (nn_arena.h): 16-bit z and d regions over a float32 arena, named in the
// flags. The validator reads them (each region's bytes by its own element size), refuses them
// where they cannot be; nothing plans or runs them yet (issue 49): decodeSpec refuses them with its
// reason (and a run, csrc/train/check.cc), and headers without them are still written as
// versions 2 and 3.
import { describe, expect, it } from 'vitest';
import { planLayout } from '../src/index.js';
import { decodeSpec } from '../src/layout/decode.js';
import * as H from '../src/layout/header.js';
import { native } from '../src/native/addon.js';

const F = H.HEADER_FIELDS;
const { zDtypeShift, dDtypeShift } = H.FLAGS;
const flagsOf = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset).getBigUint64(F.flags, true);
/** The header with version and flags set (the regions where the fp32 plan put them). */
function withDtypes(header: Uint8Array, version: number, z: number, d: number, dtype?: number): Uint8Array {
  const b = header.slice();
  const v = new DataView(b.buffer);
  v.setUint32(F.version, version, true);
  v.setBigUint64(F.flags, flagsOf(b) | (BigInt(z) << BigInt(zDtypeShift)) | (BigInt(d) << BigInt(dDtypeShift)), true);
  if (dtype !== undefined) v.setUint32(F.dtype, dtype, true);
  return b;
}

describe('header version 4: 16-bit activation and error regions', () => {
  const plan = planLayout({ layers: [784, 128, 10], batch: 100, optimizer: 'adam' });
  const bf16 = 1,
    fp16 = 2;

  it('headers without them are written as before: version 2 (dense), 3 (ops)', () => {
    expect(new DataView(plan.header.buffer, plan.header.byteOffset).getUint32(F.version, true)).toBe(2);
    const ops = planLayout({ layers: [8, 16, { op: 'layernorm' }, 4], batch: 4 });
    expect(new DataView(ops.header.buffer, ops.header.byteOffset).getUint32(F.version, true)).toBe(3);
    expect(H.VERSION).toBe(4);
  });

  it('the validator takes z and d in bf16 or fp16 in a version-4 float32 header', () => {
    for (const [z, d] of [
      [bf16, bf16],
      [fp16, 0],
      [0, fp16],
    ] as const)
      expect(native().validateHeader(withDtypes(plan.header, 4, z, d), plan.totalBytes)).toBe('');
  });

  it('refuses them in an older version, over float64, and an unknown code', () => {
    expect(native().validateHeader(withDtypes(plan.header, 3, bf16, bf16), plan.totalBytes)).toMatch(/version-3 header with region dtypes/);
    const f64 = planLayout({ layers: [784, 128, 10], batch: 100, dtype: 'float64' });
    expect(native().validateHeader(withDtypes(f64.header, 4, bf16, 0), f64.totalBytes)).toMatch(/region dtypes need a float32 arena/);
    expect(native().validateHeader(withDtypes(plan.header, 4, 3, 0), plan.totalBytes)).toMatch(/unknown region dtype 3/);
    expect(native().validateHeader(withDtypes(plan.header, 4, 0, 15), plan.totalBytes)).toMatch(/unknown region dtype 15/);
  });

  it('sizes each region by its own element: 16-bit z regions may sit where their float32 bytes would overlap', () => {
    // The output layer's z moved into the float32 tail of layer 1's z: free bytes when z is bf16.
    const z1 = plan.region(1, 'z')!,
      z2 = plan.region(2, 'z')!;
    const at = Math.ceil((z1.offset + z1.length * 2) / plan.spec.align) * plan.spec.align;
    expect(at + z2.length * 2).toBeLessThanOrEqual(z1.offset + z1.bytes);
    const regionAt = H.HEADER_SIZE + 2 * H.LAYER_SIZE + H.LAYER_FIELDS.region + H.KINDS.indexOf('z') * H.REGION_SIZE + H.LAYER_FIELDS.region_offset;
    const moved = withDtypes(plan.header, 4, bf16, 0);
    new DataView(moved.buffer).setBigUint64(regionAt, BigInt(at), true);
    expect(native().validateHeader(moved, plan.totalBytes)).toBe('');
    const as32 = moved.slice();
    new DataView(as32.buffer).setBigUint64(F.flags, 0n, true);
    expect(native().validateHeader(as32, plan.totalBytes)).toMatch(/overlap/);
  });

  it('nothing decodes them yet: decodeSpec (a checkpoint, an arena from its header) says why', () => {
    expect(decodeSpec(withDtypes(plan.header, 4, bf16, bf16))).toMatch(/16-bit activation or error regions/);
    expect(decodeSpec(withDtypes(plan.header, 4, 0, 0))).toMatchObject({ layers: [784, 128, 10] }); // version 4 without them: any older header
  });
});
