// export-cli.test.ts: `nn-arena export --format onnx|safetensors CHECKPOINT OUT` (issue 31): the
// files it writes are the library's exports of the saved network, and bad arguments are one
// error line before any work.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer } from '../src/index.js';
import { toOnnx, toSafetensors } from '../src/io.js';

const root = join(__dirname, '..');
const CLI = join(root, 'dist', 'cli.js');
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-export-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const cli = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });

describe('nn-arena export', () => {
  const ckpt = join(dir, 'm.nnackpt');
  const arena = Arena.create(planLayout({ layers: [5, 7, 3], batch: 4, activations: ['tanh', 'softmax'], optimizer: 'adam' }), { backend: 'cpu' });
  afterAll(() => arena.dispose());

  it('writes the same bytes as toOnnx / toSafetensors of the saved arena', async () => {
    const t = new Trainer(arena, { lr: 0.01 });
    t.init(4);
    await t.step(
      Float32Array.from({ length: 20 }, (_, i) => Math.sin(i)),
      { labels: [0, 1, 2, 1] },
    );
    t.save(ckpt);
    for (const [format, bytes] of [
      ['onnx', toOnnx(arena)],
      ['safetensors', toSafetensors(arena)],
    ] as const) {
      const out = join(dir, `m.${format}`);
      const r = cli('export', '--format', format, ckpt, out);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toContain(
        `${out}: ${format}, ${bytes.length.toLocaleString('en-US')} bytes; Sequential(Linear(5, 7), Tanh(), Linear(7, 3), Softmax(dim=1))`,
      );
      expect(Buffer.compare(readFileSync(out), bytes)).toBe(0);
    }
  });

  it('checks every argument before reading the checkpoint: one error line, exit 1, nothing written', () => {
    const out = join(dir, 'never.onnx');
    const cases: Array<[string[], RegExp]> = [
      [['export', ckpt, out], /^nn-arena: BAD_ARGUMENT: required option '--format <format>'/],
      [['export', '--format', 'pt', ckpt, out], /^nn-arena: BAD_ARGUMENT: --format: must be one of onnx, safetensors, got 'pt'/],
      [['export', '--format', 'onnx', join(dir, 'missing'), out], /^nn-arena: BAD_ARGUMENT: CHECKPOINT: .*missing is not a file/],
      [['export', '--format', 'onnx', ckpt, join(dir, 'no', 'x.onnx')], /^nn-arena: BAD_ARGUMENT: OUT: the folder .* does not exist/],
      [['export', '--format', 'onnx', ckpt, dir], /^nn-arena: BAD_ARGUMENT: OUT: .* is a folder/],
      [['export', '--format', 'onnx', '--model', '-1', ckpt, out], /^nn-arena: BAD_ARGUMENT: --model: must be a whole number/],
      [['export', '--format', 'onnx', '--model', '1', ckpt, out], /^nn-arena: BAD_OPTION: model: must be an integer in \[0, 0\]/],
      [['export', '--format', 'onnx', CLI, out], /^nn-arena: BAD_CHECKPOINT: /],
    ];
    for (const [args, message] of cases) {
      const r = cli(...args);
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(r.stderr).toMatch(message);
    }
    expect(existsSync(out)).toBe(false);
  });
});
