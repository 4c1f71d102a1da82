// checkpoint-symlink.test.ts: issue 14 item 5. A symlink planted at the temporary name of a
// save is never written through: the name cannot be guessed, and even when it is (here the
// random source is pinned to make it so) the exclusive open refuses it.
import { existsSync, lstatSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';

const pinned = { on: false };
vi.mock('node:crypto', async (original) => {
  const m = await original<typeof import('node:crypto')>();
  return { ...m, randomBytes: (n: number) => (pinned.on ? Buffer.alloc(n, 0xab) : m.randomBytes(n)) };
});

const { Arena, ArenaError, planLayout } = await import('../src/index.js');

describe('item 5: a planted symlink', () => {
  it('at the (guessed) temporary name: the save fails, the target of the link is untouched', () => {
    const dir = mkdtempSync(join(tmpdir(), 'nn-arena-symlink-'));
    const victim = join(dir, 'victim.txt');
    writeFileSync(victim, 'precious');
    const path = join(dir, 'model.nna');
    symlinkSync(victim, `${path}.tmp-${'ab'.repeat(12)}`);
    using a = Arena.create(planLayout({ layers: [4, 3], batch: 2 }), { backend: 'cpu' });
    pinned.on = true;
    try {
      let err: unknown;
      try {
        a.save(path);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ArenaError);
      expect((err as InstanceType<typeof ArenaError>).code).toBe('SAVE_FAILED');
    } finally {
      pinned.on = false;
    }
    expect(readFileSync(victim, 'utf8')).toBe('precious');
    expect(existsSync(path)).toBe(false);
    // Unpinned, the names differ from save to save: the planted link is never hit.
    a.save(path);
    a.save(path);
    expect(readFileSync(victim, 'utf8')).toBe('precious');
    expect(lstatSync(path).isFile()).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['model.nna', `model.nna.tmp-${'ab'.repeat(12)}`, 'victim.txt']);
  });
});
