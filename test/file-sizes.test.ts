// file-sizes.test.ts: the house rule on file length (CONTRIBUTING.md, "Files"): no C++ / CUDA
// source under csrc/ over 600 lines, no TypeScript source under src/ over 450. A file past its
// bound holds more than one thing; split it by what it holds, as the others are.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..');

function filesUnder(dir: string, ext: RegExp): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    return e.isDirectory() ? filesUnder(p, ext) : ext.test(e.name) ? [p] : [];
  });
}

function over(dir: string, ext: RegExp, bound: number): string[] {
  return filesUnder(join(ROOT, dir), ext)
    .map((f) => ({ f, n: readFileSync(f, 'utf8').split('\n').length - 1 }))
    .filter(({ n }) => n > bound)
    .map(({ f, n }) => `${relative(ROOT, f)}: ${n} lines`);
}

describe('file sizes', () => {
  it('finds the files it bounds', () => {
    expect(filesUnder(join(ROOT, 'csrc'), /\.(?:cc|cu|cuh|h)$/).length).toBeGreaterThan(50);
    expect(filesUnder(join(ROOT, 'src'), /\.ts$/).length).toBeGreaterThan(50);
  });
  it('no C++ / CUDA file over 600 lines', () => {
    expect(over('csrc', /\.(?:c|cc|cpp|cu|cuh|h|hpp)$/, 600)).toEqual([]);
  });
  it('no TypeScript file over 450 lines', () => {
    expect(over('src', /\.ts$/, 450)).toEqual([]);
  });
});
