import { describe, expect, it } from 'vitest';
import { OptionError } from '../src/index.js';
import { loadMnist, loadMnistAll, splitIndices } from '../src/data/mnist.js';

describe('MNIST digits from the mnist package', () => {
  const all = loadMnistAll();

  it('holds 10,000 labelled 28x28 digits in [0, 1]', () => {
    expect(all.count).toBe(10_000);
    expect(all.x.length).toBe(10_000 * 784);
    const perClass = new Array(10).fill(0);
    for (const l of all.labels) perClass[l]++;
    expect(perClass.reduce((a, b) => a + b, 0)).toBe(10_000);
    for (const c of perClass) expect(c).toBeGreaterThan(800);
    let sum = 0,
      outside = 0;
    for (const v of all.x) {
      if (!(v >= 0 && v <= 1)) outside++;
      sum += v;
    }
    expect(outside).toBe(0);
    expect(sum / all.x.length).toBeGreaterThan(0.05);
  });

  it('splits 8,000 / 2,000 by default, disjoint, reproducible from the seed', () => {
    const a = loadMnist({ seed: 3 }),
      b = loadMnist({ seed: 3 }),
      c = loadMnist({ seed: 4 });
    expect([a.train.count, a.test.count]).toEqual([8000, 2000]);
    const same = (p: ArrayBufferView, q: ArrayBufferView) =>
      Buffer.from(p.buffer, p.byteOffset, p.byteLength).equals(Buffer.from(q.buffer, q.byteOffset, q.byteLength));
    expect(same(b.train.x, a.train.x)).toBe(true);
    expect(same(b.test.labels, a.test.labels)).toBe(true);
    expect(same(c.train.labels, a.train.labels)).toBe(false);
    const { train, test } = splitIndices(3, 8000, 2000, 10_000);
    const used = new Set([...train, ...test]);
    expect(used.size).toBe(10_000);
    // The split's rows are the source rows at those indices.
    expect(a.test.x.subarray(0, 784)).toEqual(all.x.subarray(test[0]! * 784, (test[0]! + 1) * 784));
    expect(a.test.labels[5]).toBe(all.labels[test[5]!]);
  });

  it('bad options give OptionError naming the field', () => {
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(OptionError);
        return [(e as OptionError).code, (e as OptionError).field];
      }
      return undefined;
    };
    expect(code(() => loadMnist({ seed: 1.5 }))).toEqual(['BAD_SEED', 'seed']);
    expect(code(() => loadMnist({ trainCount: -1 }))).toEqual(['BAD_COUNT', 'trainCount']);
    expect(code(() => loadMnist({ trainCount: 9000, testCount: 2000 }))).toEqual(['BAD_COUNT', 'trainCount']);
  });
});
