import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, inspectCheckpoint, KINDS, planLayout, Trainer } from '../src/index.js';
import { native } from '../src/native/addon.js';
import { expectPattern, fillPattern, SPEC } from './support/arena-checks.js';
import { toyData } from './support/train-checks.js';
import { codeOf } from './support/errors.js';

const cpu = { backend: 'cpu' } as const;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-ckpt-'));
const file = (name: string) => join(dir, name);

/** Rewrites a field of the 64-byte file header and fixes that header's own checksum. */
function withHeaderField(bytes: Buffer, at: number, value: bigint): Buffer {
  const b = Buffer.from(bytes);
  b.writeBigUInt64LE(value, at);
  b.writeUInt32LE(native().crc32c(b.subarray(0, 60)) >>> 0, 60);
  return b;
}

describe('checkpoints', () => {
  const plan = planLayout({ ...SPEC, samples: 16 });
  const good = file('good.nna');
  {
    using a = Arena.create(plan, cpu);
    fillPattern(a, 2);
    a.save(good, { data: true });
  }
  const bytes = readFileSync(good);

  it('round trip: every region back, one host + one device allocation, one transfer', () => {
    using b = Arena.load(good, cpu);
    expectPattern(b, 2);
    const s = b.stats;
    expect([s.hostAllocs, s.deviceAllocs]).toEqual([1, 1]);
    // The header at create, then every region in one transfer (from the first region to the
    // end of the last: no trailing alignment padding).
    const end = Math.max(...plan.regions.map((r) => r.offset + r.bytes));
    expect([s.toDeviceTransfers, s.toDeviceBytes]).toEqual([2, plan.headerBytes + end - plan.headerBytes]);
    b.toHost();
    expectPattern(b, 2);
    expect(readdirSync(dir).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('a subset (weights and biases) restores just those regions', () => {
    const p = file('wb.nna');
    {
      using a = Arena.create(plan, cpu);
      fillPattern(a, 3);
      const n = a.save(p, { kinds: ['w', 'b'] });
      expect(n).toBe(64 + 8 + plan.headerBytes + plan.bytesByKind().w + plan.bytesByKind().b); // file header, an empty metadata block
    }
    expect(inspectCheckpoint(p).kinds).toEqual(['b', 'w']);
    using b = Arena.load(p, cpu);
    expect(b.view(1, 'w')[3]).toBe(3 + 1000 + KINDS.indexOf('w') * 100 + 0.75);
    expect(b.view(1, 'b')[3]).toBe(3 + 1000 + KINDS.indexOf('b') * 100 + 0.75);
    expect(b.view(1, 'mw').every((v) => v === 0)).toBe(true);
  });

  it('a truncated file is refused, wherever it is cut', () => {
    for (const cut of [0, 10, 63, 64, 100, plan.headerBytes + 64, bytes.length - 1]) {
      const p = file(`cut-${cut}.nna`);
      writeFileSync(p, bytes.subarray(0, cut));
      expect(
        codeOf(() => Arena.load(p, cpu)),
        `cut at ${cut}`,
      ).toBe('BAD_CHECKPOINT');
    }
  });

  it('a flipped bit anywhere is refused', () => {
    const p = file('flip.nna');
    const positions = [0, 9, 13, 17, 25, 33, 41, 45, 61, 64, 70, 64 + plan.headerBytes - 1];
    for (let i = 64 + plan.headerBytes; i < bytes.length; i += 4099) positions.push(i);
    positions.push(bytes.length - 1);
    for (const at of positions) {
      const b = Buffer.from(bytes);
      b[at]! ^= 1 << (at % 8);
      writeFileSync(p, b);
      let err: unknown;
      try {
        Arena.load(p, cpu);
      } catch (e) {
        err = e;
      }
      expect(err, `bit flipped at byte ${at}`).toBeInstanceOf(ArenaError);
      expect((err as ArenaError).code).toBe('BAD_CHECKPOINT');
    }
  });

  it('files of another format, sizes beyond the file or beyond memory are refused with the reason', () => {
    const cases: Array<[string, Buffer, RegExp]> = [
      ['empty', Buffer.alloc(0), /truncated/],
      ['json', Buffer.from(JSON.stringify({ hello: 'world', padding: 'x'.repeat(100) })), /not an nn-arena checkpoint/],
      ['random', Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) & 255)), /not an nn-arena checkpoint/],
      ['payload beyond the file', withHeaderField(bytes, 24, BigInt(bytes.length)), /says .* bytes, the file has/],
      ['arena beyond memory', withHeaderField(bytes, 16, 2n ** 52n), /more than this machine's/],
      ['arena size that does not match its header', withHeaderField(bytes, 16, BigInt(plan.totalBytes + 256)), /arena header gives/],
    ];
    for (const [name, b, why] of cases) {
      const p = file(`${name.replace(/ /g, '-')}.nna`);
      writeFileSync(p, b);
      let err: ArenaError | undefined;
      try {
        Arena.load(p, cpu);
      } catch (e) {
        err = e as ArenaError;
      }
      expect(err?.code, name).toBe('BAD_CHECKPOINT');
      expect(err?.message, name).toMatch(why);
    }
    expect(codeOf(() => Arena.load(file('missing.nna'), cpu))).toBe('BAD_CHECKPOINT');
  });

  it('a failed save reports SAVE_FAILED and leaves the old file intact', () => {
    const target = file('kept.nna');
    writeFileSync(target, bytes);
    mkdirSync(file('a-directory.nna'), { recursive: true });
    using a = Arena.create(plan, cpu);
    expect(codeOf(() => a.save(join(dir, 'no-such-dir', 'x.nna')))).toBe('SAVE_FAILED');
    expect(codeOf(() => a.save(file('a-directory.nna')))).toBe('SAVE_FAILED');
    expect(readFileSync(target).equals(bytes)).toBe(true);
    expect(readdirSync(dir).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('a trainer resumes exactly: same weights after the same further steps', async () => {
    const spec = { layers: [8, 16, 4], batch: 8, optimizer: 'adam' as const, dtype: 'float64' as const };
    const d = toyData(8, 4, 80, 3, false);
    const batchOf = (i: number) => [d.x.subarray(i * 64, i * 64 + 64), { labels: d.labels!.subarray(i * 8, i * 8 + 8) }] as const;
    using straight = Arena.create(planLayout(spec), cpu);
    const a = new Trainer(straight, { lr: 0.01 });
    a.init(5);
    for (let i = 0; i < 10; i++) await a.step(...batchOf(i));
    a.syncToHost();

    const p = file('resume.nna');
    {
      using first = Arena.create(planLayout(spec), cpu);
      const b = new Trainer(first, { lr: 0.01 });
      b.init(5);
      for (let i = 0; i < 5; i++) await b.step(...batchOf(i));
      b.save(p);
    }
    const c = Trainer.load(p, cpu, { lr: 0.01 });
    using _resumed = c.arena;
    expect(c.steps).toBe(5);
    for (let i = 5; i < 10; i++) await c.step(...batchOf(i));
    c.syncToHost();
    for (const kind of ['w', 'b', 'mw', 'vw'] as const) {
      for (const l of [1, 2]) expect(Array.from(c.arena.view(l, kind)), `${kind}${l}`).toEqual(Array.from(straight.view(l, kind)));
    }
  });
});
