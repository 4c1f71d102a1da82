// mnist-cache.test.ts: loadMnist's binary cache of the `mnist` package (src/data/mnist.ts): the
// same digits as parsing the package, and a cache that does not match (a flipped byte, another
// key) is never used: the package is parsed again and the cache rewritten.
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const root = join(__dirname, '..');
const cache = join(dirname(createRequire(join(root, 'package.json')).resolve('mnist/package.json')), '..', '.cache', 'nn-arena', 'mnist.bin');

/** A fresh process's loadMnist (the built tools entry, as a user loads it): a digest of every pixel and label, and its load time. */
function load(): { digest: string; ms: number } {
  const out = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `
    import { createHash } from 'node:crypto';
    const { loadMnist } = await import(${JSON.stringify(join(root, 'dist/tools.js'))});
    const t0 = performance.now();
    const { train, test } = loadMnist({ seed: 3 });
    const ms = performance.now() - t0;
    const h = createHash('sha256');
    for (const d of [train, test]) h.update(new Uint8Array(d.x.buffer, d.x.byteOffset, d.x.byteLength)).update(d.labels);
    console.log(JSON.stringify({ digest: h.digest('hex') + ':' + (train.count + test.count), ms }));
  `,
    ],
    { cwd: root, encoding: 'utf8' },
  );
  return JSON.parse(out.trim().split('\n').pop()!);
}

describe('loadMnist binary cache', () => {
  it('gives the parsed digits, and is ignored and rewritten when it does not match', { timeout: 60_000 }, () => {
    rmSync(cache, { force: true });
    const parsed = load();
    expect(existsSync(cache)).toBe(true);
    expect(parsed.digest.endsWith(':10000')).toBe(true);
    expect(load().digest).toBe(parsed.digest);
    // A flipped pixel byte: the CRC no longer matches, the package is parsed again.
    const b = readFileSync(cache);
    b[b.length - 5]! ^= 0x40;
    writeFileSync(cache, b);
    expect(load().digest).toBe(parsed.digest);
    expect(readFileSync(cache).equals(b)).toBe(false); // rewritten
    // Another key (a package of another version): parsed, rewritten.
    const k = readFileSync(cache);
    k[14]! ^= 1;
    writeFileSync(cache, k);
    expect(load().digest).toBe(parsed.digest);
    expect(load().digest).toBe(parsed.digest);
  });
});
