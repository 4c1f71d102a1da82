// Issue 30: the install script keeps a build that matches (scripts/build-stamp.cjs), names a
// missing compiler instead of failing with a stack trace, builds offline against this Node's own
// headers (scripts/node-gyp.cjs) and finds the sources on disk (scripts/sources.cjs); the loader
// refuses a Node older than package.json's engines.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ArenaError } from '../src/core/errors.js';
import { checkNodeVersion } from '../src/native/loader.js';

const root = join(import.meta.dirname, '..');
const req = createRequire(import.meta.url);
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { engines: { node: string } };

/** A copy of what the install script reads (scripts, csrc, binding.gyp, package.json), with
 *  node_modules linked; `built` copies this checkout's addon in as build/Release. */
function copy(built: boolean): string {
  const dir = mkdtempSync(join(tmpdir(), 'nna-install-'));
  for (const f of ['scripts', 'csrc', 'binding.gyp', 'package.json']) cpSync(join(root, f), join(dir, f), { recursive: true });
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  if (built) {
    mkdirSync(join(dir, 'build', 'Release'), { recursive: true });
    cpSync(join(root, 'build', 'Release', 'nn_arena.node'), join(dir, 'build', 'Release', 'nn_arena.node'));
  }
  return dir;
}

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const install = (dir: string, env: Record<string, string>) =>
  spawnSync(process.execPath, [join(dir, 'scripts', 'install.cjs')], { cwd: dir, encoding: 'utf8', env: { ...process.env, NN_ARENA_CUDA: '0', ...env } });

describe('scripts/sources.cjs', () => {
  it('puts every .cc and .cu under csrc/ in exactly one of the rules (a new folder must be named there)', () => {
    const { sources } = req(join(root, 'scripts', 'sources.cjs')) as { sources(kind: string): string[] };
    const ruled = ['common', 'cuda', 'absent'].flatMap((k) => sources(k));
    const onDisk: string[] = [];
    const walk = (d: string) => {
      for (const e of readdirSync(join(root, d), { withFileTypes: true })) {
        if (e.isDirectory()) walk(`${d}/${e.name}`);
        else if (/\.(cc|cu)$/.test(e.name)) onDisk.push(`${d}/${e.name}`);
      }
    };
    walk('csrc');
    expect(ruled.slice().sort()).toEqual(onDisk.sort());
    expect(new Set(ruled).size).toBe(ruled.length);
    expect(sources('common')).toContain('csrc/cpu/gemm_neon.cc');
    expect(sources('cuda')).toContain('csrc/cuda/fused_step.cu');
  });
  it('builds test/native/ into the test addon alone, which the package does not hold', () => {
    const { sources } = req(join(root, 'scripts', 'sources.cjs')) as { sources(kind: string): string[] };
    const lib = ['common', 'cuda', 'absent'].flatMap((k) => sources(k));
    const test = ['test-common', 'test-cuda', 'test-absent'].flatMap((k) => sources(k));
    const own = readdirSync(join(root, 'test', 'native'))
      .filter((f) => /\.(cc|cu)$/.test(f))
      .map((f) => `test/native/${f}`);
    expect(test.filter((f) => f.startsWith('test/native/')).sort()).toEqual(own.sort());
    expect(lib.filter((f) => !f.startsWith('csrc/'))).toEqual([]);
    // What it reuses of the library is library code, compiled again for it.
    expect(test.filter((f) => !f.startsWith('test/native/')).every((f) => lib.includes(f))).toBe(true);
    // binding.gyp defines nn_arena_test only where test/native/ exists: never in the package.
    const files = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { files: string[] }).files;
    expect(files.filter((f) => /^(test|build)\b/.test(f))).toEqual([]);
    const dir = copy(false);
    dirs.push(dir);
    const hasTest = (d: string) => spawnSync(process.execPath, [join(d, 'scripts', 'sources.cjs'), 'has-test'], { encoding: 'utf8' }).stdout;
    expect(hasTest(dir)).toBe('0');
    expect(hasTest(root)).toBe('1');
  });
});

describe('scripts/build-stamp.cjs', () => {
  it('tells a change of sources, of options and of the Node ABI apart', () => {
    const dir = copy(false);
    dirs.push(dir);
    const stamp = req(join(dir, 'scripts', 'build-stamp.cjs')) as {
      current(p: { cuda: boolean; archs: string[] }): { node: { abi: string }; sources: string };
      differences(a: unknown, b: unknown): string[];
    };
    const cpu = stamp.current({ cuda: false, archs: [] });
    expect(stamp.differences(cpu, stamp.current({ cuda: false, archs: [] }))).toEqual([]);
    expect(stamp.differences(null, cpu)).toEqual(['no stamp']);
    expect(stamp.differences(cpu, stamp.current({ cuda: true, archs: ['90'] }))).toEqual(['options']);
    expect(stamp.differences({ ...cpu, node: { ...cpu.node, abi: '1' } }, cpu)).toEqual(['node']);
    writeFileSync(join(dir, 'csrc', 'core', 'env.cc'), `${readFileSync(join(dir, 'csrc', 'core', 'env.cc'), 'utf8')}\n`);
    expect(stamp.differences(cpu, stamp.current({ cuda: false, archs: [] }))).toEqual(['sources']);
  });
});

describe('scripts/install.cjs', () => {
  it('keeps a build that matches its stamp and loads, compiling nothing', () => {
    const dir = copy(true);
    dirs.push(dir);
    const stamp = req(join(dir, 'scripts', 'build-stamp.cjs')) as { current(p: object): object; write(s: object): void };
    process.env.NN_ARENA_CUDA = '0';
    try {
      stamp.write(stamp.current({ cuda: false, archs: [] }));
    } finally {
      delete process.env.NN_ARENA_CUDA;
    }
    const binary = join(dir, 'build', 'Release', 'nn_arena.node');
    const before = statSync(binary).mtimeMs;
    const r = install(dir, {});
    expect(r.stderr).toMatch(/nn-arena: keeping build\/Release\/nn_arena\.node: built from these sources with the same options \(CPU-only\)/);
    expect(r.status).toBe(0);
    expect(statSync(binary).mtimeMs).toBe(before);
  });

  it('names the missing compiler, make and Python in one nn-arena line (no stack trace) and fails', () => {
    const dir = copy(false);
    dirs.push(dir);
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    symlinkSync(process.execPath, join(bin, 'node'));
    const r = install(dir, { PATH: bin, NN_ARENA_BUILD_FROM_SOURCE: '1', CXX: '' });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      /^nn-arena: cannot build from source: no Python 3 .*no C\+\+17 compiler on PATH \(looked for c\+\+, g\+\+, clang\+\+\); no make on PATH/m,
    );
    expect(r.stderr).not.toMatch(/\n\s+at .*:\d+:\d+/);
  });
});

describe('scripts/node-gyp.cjs', () => {
  it("points node-gyp at this Node's own headers, so that it never downloads them", () => {
    const { nodedirArgs } = req(join(root, 'scripts', 'node-gyp.cjs')) as { nodedirArgs(a?: string[]): string[] };
    const saved = process.env.npm_config_nodedir;
    delete process.env.npm_config_nodedir;
    try {
      const args = nodedirArgs();
      expect(args).toHaveLength(1);
      const dir = args[0]!.replace('--nodedir=', '');
      expect(statSync(join(dir, 'include', 'node', 'node_api.h')).isFile()).toBe(true);
      expect(dirname(dirname(process.execPath))).toBe(dir);
      expect(nodedirArgs(['--nodedir=/x'])).toEqual([]);
    } finally {
      if (saved !== undefined) process.env.npm_config_nodedir = saved;
    }
  });
});

describe('the loader and package.json engines', () => {
  it('refuses a Node older than engines with ArenaError NODE_TOO_OLD naming both versions', () => {
    expect(pkg.engines.node).toMatch(/^>=\d+\.\d+/);
    for (const old of ['18.20.4', '20.9.0', 'v16.0.0']) {
      let e: unknown;
      try {
        checkNodeVersion(old);
      } catch (x) {
        e = x;
      }
      expect(e).toBeInstanceOf(ArenaError);
      expect((e as ArenaError).code).toBe('NODE_TOO_OLD');
      expect((e as Error).message).toContain(`Node ${pkg.engines.node}`);
      expect((e as Error).message).toContain(old);
    }
    for (const ok of ['20.10.0', '20.20.2', '22.0.0', '26.10.0', process.versions.node]) expect(() => checkNodeVersion(ok)).not.toThrow();
  });
});
