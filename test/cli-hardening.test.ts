// The CLI under bad flags and hostile paths (issue 27): --svg / --report are checked before any
// work (an empty name, a missing folder, a folder, a symlink), never written through a symlink;
// a bad flag value reads in nn-arena's own form; an errno code is printed once.
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const CLI = 'dist/cli.js';
const run = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
const dir = mkdtempSync(join(tmpdir(), 'nna-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('--svg and --report paths', () => {
  it("--svg '' is refused", () => {
    const r = run('plan', '--svg', '');
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe("nn-arena: BAD_ARGUMENT: --svg: needs a file name, got ''");
  });

  it('a symlink at the path is refused, and its target is left alone (plan --svg, train --report)', () => {
    const target = join(dir, 'target.txt');
    writeFileSync(target, 'keep me');
    for (const [flag, name, args] of [
      ['--svg', 'map.svg', ['plan']],
      ['--report', 'r.html', ['train', '--epochs', '1']],
    ] as const) {
      const link = join(dir, name);
      symlinkSync(target, link);
      const t0 = Date.now();
      const r = run(...args, flag, link);
      expect(r.status, r.stderr).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^nn-arena: BAD_ARGUMENT: ${flag}: .* is a symbolic link`));
      expect(r.stdout).toBe(''); // refused before anything ran or printed
      expect(readFileSync(target, 'utf8')).toBe('keep me');
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      if (flag === '--report') expect(Date.now() - t0).toBeLessThan(30_000);
    }
  });

  it('a dangling symlink is refused too (no file created at its target)', () => {
    const link = join(dir, 'dangling.svg');
    symlinkSync(join(dir, 'nowhere.svg'), link);
    const r = run('plan', '--svg', link);
    expect(r.status).toBe(1);
    expect(existsSync(join(dir, 'nowhere.svg'))).toBe(false);
  });

  it('train --report into a folder, or a missing folder, fails before training', () => {
    mkdirSync(join(dir, 'sub'));
    for (const [file, why] of [
      [join(dir, 'sub'), /is not a regular file/],
      [join(dir, 'missing', 'r.html'), /does not exist/],
    ] as const) {
      const r = run('train', '--epochs', '1', '--report', file);
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(why);
      expect(r.stdout + r.stderr).not.toMatch(/epoch|accuracy/);
    }
  });

  it('plan --svg writes a regular file', () => {
    const file = join(dir, 'ok.svg');
    const r = run('plan', '--svg', file);
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(file, 'utf8')).toMatch(/^<svg/);
  });
});

describe('argument parser refusals in nn-arena form', () => {
  it.each([
    [
      ['plan', '--dtype', 'float16'],
      "nn-arena: BAD_ARGUMENT: --dtype: must be one of float32, float64, got 'float16'; did you mean 'float32'? (see nn-arena --help)",
    ],
    [
      ['plan', '--vs-pytorch', '--precision', 'bf61'],
      "nn-arena: BAD_ARGUMENT: --precision: must be one of fp32, bf16, fp16, got 'bf61'; did you mean 'bf16'? (see nn-arena --help)",
    ],
    [['plan', '--precision', 'xyzzy'], "nn-arena: BAD_ARGUMENT: --precision: must be one of fp32, bf16, fp16, got 'xyzzy' (see nn-arena --help)"],
    [
      ['plan', '--precision', 'fp16'],
      "nn-arena: BAD_ARGUMENT: --precision: applies to --vs-pytorch (a plan is the same for every precision), got 'fp16' without it",
    ],
    [['plan', '--batch'], 'nn-arena: BAD_ARGUMENT: --batch: needs a value (see nn-arena --help)'],
    [['plan', '--nope'], 'nn-arena: BAD_ARGUMENT: --nope: unknown option (see nn-arena --help)'],
  ])('%j', (args, want) => {
    const r = run(...args);
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe(want);
  });

  it('an errno code is printed once', () => {
    // /proc/version opens for writing (as root) but the write fails: an errno error (old main: "EIO: EIO: ...")
    for (const args of [
      ['plan', '--svg', '/proc/version'],
      ['inspect', join(dir, 'missing.nna')],
    ]) {
      const bad = run(...args);
      expect(bad.status).toBe(1);
      expect(bad.stderr).toMatch(/^nn-arena: [A-Z_]+: /);
      expect(bad.stderr).not.toMatch(/(E[A-Z]+): \1:/);
    }
  });
});
