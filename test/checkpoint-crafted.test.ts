// checkpoint-crafted.test.ts: issue 27 (checkpoint side). Special files are refused without
// blocking; crafted version-2 files whose user-region table is inconsistent (checksums
// recomputed, so only the decoder stands between them and the planner) are all BAD_CHECKPOINT.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, inspectCheckpoint, NnArenaError, planLayout, type LayoutSpec } from '../src/index.js';
import { EXTRA_FIELDS, EXTRA_SIZE, HEADER_FIELDS, HEADER_SIZE, headerTableBytes, LAYER_SIZE, REGION_SIZE } from '../src/layout/header.js';
import { native } from '../src/native/addon.js';

const cpu = { backend: 'cpu' } as const;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-crafted-'));
const file = (name: string) => join(dir, name);

describe('special files', () => {
  it('a FIFO, /dev/zero and a directory are BAD_CHECKPOINT at once (inspect, Arena.load, Trainer.load, the CLI)', () => {
    const fifo = file('pipe.nna');
    execFileSync('mkfifo', [fifo]);
    // In a child process: on the old code the open blocks forever (no writer ever comes), and a
    // child can be killed by the timeout where a blocked test worker could not.
    const script = `
      const lib = require(${JSON.stringify(resolve('dist/index.cjs'))});
      const out = [];
      for (const p of process.argv.slice(1)) for (const [name, f] of [['inspect', () => lib.inspectCheckpoint(p)], ['Arena.load', () => lib.Arena.load(p, { backend: 'cpu' })], ['Trainer.load', () => lib.Trainer.load(p, { backend: 'cpu' })]]) {
        try { f(); out.push(name + ' loaded'); } catch (e) { out.push(name + ' ' + (e instanceof lib.NnArenaError) + ' ' + e.code + ' ' + e.message); }
      }
      console.log(JSON.stringify(out));`;
    const r = spawnSync(process.execPath, ['-e', script, fifo, '/dev/zero', dir], { encoding: 'utf8', timeout: 20_000 });
    expect(r.signal, 'blocked on a special file').toBeNull();
    const lines = JSON.parse(r.stdout) as string[];
    expect(lines).toHaveLength(9);
    for (const l of lines) expect(l).toMatch(/^\S+ true BAD_CHECKPOINT .*not a regular file/);
    const cli = spawnSync(process.execPath, [resolve('dist/cli.js'), 'inspect', fifo], { encoding: 'utf8', timeout: 20_000 });
    expect(cli.signal).toBeNull();
    expect(cli.status).toBe(1);
    expect(cli.stderr).toMatch(/^nn-arena: BAD_CHECKPOINT: .*not a regular file/);
  });
});

/** A 32-bit xorshift: the same crafted files on every run. */
function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

describe('crafted kind tables with valid checksums', () => {
  const SPECS: LayoutSpec[] = [
    {
      layers: [5, 4, 3],
      batch: 2,
      optimizer: 'momentum',
      samples: 6,
      extra: [
        { name: 'ema', like: 'w' },
        { name: 'mask', per: 'z', layers: [2, 1] },
        { name: 'rng', bytes: 1000 },
      ],
    },
    { layers: [3, 2, 2, 2], batch: 1, extra: [{ name: 'g', bytes: 16 }] },
    {
      layers: [4, 3],
      batch: 2,
      order: 'kind-major',
      extra: [
        { name: 'p', like: 'b' },
        { name: 'q', like: 'z' },
      ],
    },
  ] as LayoutSpec[];

  it('every mutation of the table fields is BAD_CHECKPOINT or a faithful load, never another error', () => {
    const next = rng(27);
    const outcomes = new Map<string, number>();
    let n = 0;
    for (const [s, spec] of SPECS.entries()) {
      const plan = planLayout(spec);
      const p = file(`spec${s}.nna`);
      {
        using a = Arena.create(plan, cpu);
        a.save(p);
      }
      const orig = readFileSync(p);
      const P = orig.length - Number(orig.readBigUInt64LE(24)); // where the payload (the arena header) starts
      const layers = spec.layers.length,
        extras = spec.extra!.length;
      const tableAt = P + HEADER_SIZE + layers * LAYER_SIZE;
      const entriesAt = tableAt + extras * EXTRA_SIZE;
      const entries = (headerTableBytes(layers, spec.extra!) - (entriesAt - P)) / REGION_SIZE;
      // Where a u32 / u64 of the table lives in the file, and values near every boundary.
      const fields: Array<[at: number, width: 4 | 8]> = [
        [P + HEADER_FIELDS.num_extras, 4],
        [P + HEADER_FIELDS.extra_size, 4],
        [P + HEADER_FIELDS.extras_offset, 8],
      ];
      for (let i = 0; i < extras; i++)
        for (const f of ['rule', 'like', 'elem_bytes', 'entries', 'first'] as const) fields.push([tableAt + i * EXTRA_SIZE + EXTRA_FIELDS[f], 4]);
      for (let e = 0; e < Math.min(entries, 2 * layers * extras); e++) fields.push([entriesAt + e * REGION_SIZE, 8], [entriesAt + e * REGION_SIZE + 8, 8]);
      const values = [0, 1, 2, 3, layers - 1, layers, layers + 1, extras, extras + 1, 13, 14, 63, 64, 65, entries, entries + 1, 0x7fffffff, 0xffffffff];
      for (let iter = 0; iter < 1000; iter++) {
        const b = Buffer.from(orig);
        for (let m = 1 + (next() % 3); m > 0; m--) {
          const [at, width] = fields[next() % fields.length]!;
          const v = next() % 4 === 0 ? next() : values[next() % values.length]!;
          if (width === 4) b.writeUInt32LE(v >>> 0, at);
          else b.writeBigUInt64LE(next() % 8 === 0 ? 2n ** 63n + BigInt(v) : BigInt(v), at);
        }
        // A name byte now and then: non-ASCII, or no NUL.
        if (next() % 5 === 0) b[tableAt + (next() % extras) * EXTRA_SIZE + (next() % 32)] = next() & 0xff;
        b.writeUInt32LE(native().crc32c(b.subarray(P)) >>> 0, 44);
        b.writeUInt32LE(native().crc32c(b.subarray(0, 60)) >>> 0, 60);
        const q = file('mutant.nna');
        writeFileSync(q, b);
        let outcome: string;
        try {
          const info = inspectCheckpoint(q);
          // Accepted: the file must then describe exactly the arena it loads as.
          using a = Arena.load(q, cpu);
          expect(Buffer.from(a.bytes(0, a.plan.headerBytes)).equals(b.subarray(P, P + a.plan.headerBytes))).toBe(true);
          expect(info.plan.totalBytes).toBe(a.plan.totalBytes);
          outcome = 'loaded';
        } catch (e) {
          if (!(e instanceof NnArenaError)) throw new Error(`iteration ${iter} of spec ${s}: untyped ${String(e)}`, { cause: e });
          outcome = e.code;
        }
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        n++;
      }
    }
    expect([...outcomes.keys()].filter((k) => k !== 'BAD_CHECKPOINT' && k !== 'loaded')).toEqual([]);
    expect(outcomes.get('BAD_CHECKPOINT')).toBeGreaterThan(n / 2);
  });
});
