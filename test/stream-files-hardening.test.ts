// stream-files-hardening.test.ts: issue 51, nothing hangs and nothing is silently wrong. A
// streaming fit whose source stops answering ends on its signal (ABORTED) or the arena's
// dispose() (DISPOSED), and one that stops early for any reason closes the source (return(): the
// user's finally blocks run). Special files (a FIFO, a folder, a device) are refused with a typed
// error before any read or write by streamNpy, the savers and `nn-arena export`; the savers
// refuse a symbolic link at the path unless asked to follow it, and `train --save` checks its
// path before training. Code that would block on a FIFO is given the FIFO's other end here, so a
// regression fails on its assertion instead of wedging the test process.
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  constants,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { Arena, ArenaError, planLayout, Trainer, type Data } from '../src/index.js';
import { saveOnnx, saveSafetensors, streamNpy, toNpy, toOnnx, toSafetensors } from '../src/io.js';
import { runExport } from '../src/cli/export.js';
import { train as trainCli } from '../src/cli/train.js';

const cpu = { backend: 'cpu' } as const;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const fifo = (name: string) => {
  const path = join(dir, name);
  execFileSync('mkfifo', [path]);
  return path;
};

/** `p`, or a rejection once it has been pending for `ms` (a regression fails, not hangs). */
const within = <T>(p: Promise<T>, ms = 3000): Promise<T> =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms))]);

/** `rows` rows of 6 inputs and 4 classes; x[nanAt] NaN if given. */
const batch = (rows: number, nanAt = -1): Data => ({
  x: Float32Array.from({ length: rows * 6 }, (_, i) => (i === nanAt ? NaN : Math.sin(i))),
  labels: Uint8Array.from({ length: rows }, (_, i) => i % 4),
});

/** An async iterable that gives `batches`, then never answers again; its return() is a spy. */
function silentAfter(batches: Data[]) {
  const returned = vi.fn(async () => ({ done: true as const, value: undefined }));
  let i = 0;
  const iterator = {
    next: () => (i < batches.length ? Promise.resolve({ done: false as const, value: batches[i++]! }) : new Promise<never>(() => {})),
    return: returned,
  };
  return { source: { [Symbol.asyncIterator]: () => iterator } as AsyncIterable<Data>, returned };
}

/** A trainer on a fresh 6-10-4 CPU arena whose data regions hold one window of 8 rows. */
function trainer(): { arena: Arena; t: Trainer } {
  const arena = Arena.create(planLayout({ layers: [6, 10, 4], batch: 8, samples: 8 }), cpu);
  const t = new Trainer(arena, { lr: 0.01 });
  t.init(3);
  return { arena, t };
}

describe('fit() from a source that stops answering', () => {
  it('the signal ends the wait: ArenaError ABORTED (an AbortError), the source closed, the arena usable', async () => {
    const { arena, t } = trainer();
    try {
      const { source, returned } = silentAfter([batch(16)]);
      const ac = new AbortController();
      const p = t.fit(source, { epochs: 1, shuffle: false, signal: ac.signal });
      setTimeout(() => ac.abort(), 100);
      const e = await within(p).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(ArenaError);
      expect(e).toMatchObject({ code: 'ABORTED', name: 'AbortError' });
      expect(returned).toHaveBeenCalledTimes(1);
      await expect(within(t.fit([batch(8)], { epochs: 1 }))).resolves.toMatchObject({ steps: 1 });
    } finally {
      arena.dispose();
    }
  }, 15_000);

  it('dispose() settles it: ArenaError DISPOSED, the source closed', async () => {
    const { arena, t } = trainer();
    const { source, returned } = silentAfter([batch(16)]);
    const p = t.fit(source, { epochs: 1, shuffle: false });
    setTimeout(() => arena.dispose(), 100);
    await expect(within(p)).rejects.toMatchObject({ code: 'DISPOSED' });
    expect(returned).toHaveBeenCalledTimes(1);
  }, 15_000);

  it('an error of onProgress while a fill waits on the silent source: that error, the source closed', async () => {
    const { arena, t } = trainer();
    try {
      const { source, returned } = silentAfter([batch(16)]);
      // In order, windows 0 and 1 are the batch's 16 rows: window 0 reports once window 1 is queued,
      // with window 2's fill waiting on the source.
      const p = t.fit(source, {
        epochs: 1,
        shuffle: false,
        onProgress: () => {
          throw new Error('stop here');
        },
      });
      await expect(within(p)).rejects.toThrow('stop here');
      expect(returned).toHaveBeenCalledTimes(1);
    } finally {
      arena.dispose();
    }
  }, 15_000);

  it('a non-finite value is reported while the source is silent: BAD_DATA naming it, the source closed', async () => {
    const { arena, t } = trainer();
    try {
      const { source, returned } = silentAfter([batch(8, 3)]);
      await expect(within(t.fit(source, { epochs: 1, shuffle: false }))).rejects.toMatchObject({ code: 'BAD_DATA', field: 'batch 0.x[3]' });
      expect(returned).toHaveBeenCalledTimes(1);
    } finally {
      arena.dispose();
    }
  }, 15_000);

  it.each([
    ['an async generator, in order', false, false],
    ['an async generator, shuffled', true, false],
    ['a generator, in order', false, true],
  ])(
    "a bad batch from %s: BAD_DATA, and the generator's finally block has run",
    async (_, shuffle, sync) => {
      const { arena, t } = trainer();
      try {
        let cleaned = 0;
        const bad = { x: new Float32Array(6) } as Data; // neither labels nor y
        async function* asyncBatches() {
          try {
            yield batch(8);
            yield bad;
            yield batch(8);
          } finally {
            cleaned++;
          }
        }
        function* syncBatches() {
          try {
            yield batch(8);
            yield bad;
            yield batch(8);
          } finally {
            cleaned++;
          }
        }
        const source = sync ? syncBatches() : asyncBatches();
        await expect(within(t.fit(source, { epochs: 1, shuffle }))).rejects.toMatchObject({ code: 'BAD_DATA', field: 'batch 1' });
        expect(cleaned).toBe(1);
      } finally {
        arena.dispose();
      }
    },
    15_000,
  );
});

describe('streamNpy refuses special files before reading them', () => {
  const labels = join(dir, 'labels.npy');
  writeFileSync(labels, toNpy(Uint8Array.from({ length: 16 }, (_, i) => i % 4)));
  const fitOn = async (files: { x: string; labels: string }) => {
    const { arena, t } = trainer();
    try {
      return await t.fit(streamNpy(files), { epochs: 1 });
    } finally {
      arena.dispose();
    }
  };

  it('x a FIFO: OptionError BAD_PATH naming x (no wait for a writer)', async () => {
    const x = fifo('x.fifo');
    // Both ends held open, with bytes in it: code that opens it as a file reads those instead of
    // waiting for a writer forever.
    const held = openSync(x, constants.O_RDWR | constants.O_NONBLOCK);
    try {
      writeSync(held, Buffer.alloc(64, 0x41));
      const e = await within(fitOn({ x, labels })).catch((err: unknown) => err);
      expect(e).toMatchObject({ name: 'OptionError', code: 'BAD_PATH', field: 'x' });
      expect((e as Error).message).toMatch(/is a FIFO, which is not a regular file/);
    } finally {
      closeSync(held);
    }
  }, 15_000);

  it('x a folder, labels a device: OptionError BAD_PATH naming them', async () => {
    await expect(within(fitOn({ x: dir, labels }))).rejects.toMatchObject({
      name: 'OptionError',
      code: 'BAD_PATH',
      field: 'x',
      message: expect.stringMatching(/is a folder/),
    });
    writeFileSync(join(dir, 'x.npy'), toNpy(new Float32Array(16 * 6), [16, 6]));
    await expect(within(fitOn({ x: join(dir, 'x.npy'), labels: '/dev/null' }))).rejects.toMatchObject({
      name: 'OptionError',
      code: 'BAD_PATH',
      field: 'labels',
      message: expect.stringMatching(/is a device/),
    });
  }, 15_000);
});

describe('saveSafetensors and saveOnnx write regular files only', () => {
  const savers = [
    ['saveSafetensors', saveSafetensors, toSafetensors],
    ['saveOnnx', saveOnnx, toOnnx],
  ] as const;

  it.each(savers)('%s: a FIFO, a missing folder, a folder, /proc/version: OptionError BAD_PATH, nothing written', (_, save) => {
    using arena = Arena.create(planLayout({ layers: [4, 3], batch: 2 }), cpu);
    const path = fifo(`out-${_}.fifo`);
    // A reader held open (without blocking): code that opens the FIFO for writing gets through
    // instead of blocking the event loop forever, and what it wrote is seen.
    const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      expect(() => save(arena, path)).toThrow(
        expect.objectContaining({ name: 'OptionError', code: 'BAD_PATH', field: 'path', message: expect.stringMatching(/is a FIFO/) }),
      );
      expect(readSync(reader, Buffer.alloc(16))).toBe(0); // nothing was written (and no writer is left)
    } finally {
      closeSync(reader);
    }
    for (const [bad, why] of [
      [join(dir, 'missing', 'm.out'), /the folder .* does not exist/],
      [dir, /is a folder/],
      ['/proc/version', /cannot write/],
    ] as const) {
      expect(() => save(arena, bad), bad).toThrow(
        expect.objectContaining({ name: 'OptionError', code: 'BAD_PATH', field: 'path', message: expect.stringMatching(why) }),
      );
    }
    expect(existsSync(join(dir, 'missing'))).toBe(false);
  });

  it.each(savers)('%s: a symbolic link at the path is refused (its target untouched) unless followLinks: true', (_, save, bytes) => {
    using arena = Arena.create(planLayout({ layers: [4, 3], batch: 2 }), cpu);
    const target = join(dir, `target-${_}`);
    writeFileSync(target, 'keep me');
    const link = join(dir, `link-${_}`);
    symlinkSync(target, link);
    expect(() => save(arena, link)).toThrow(expect.objectContaining({ code: 'BAD_PATH', message: expect.stringMatching(/is a symbolic link/) }));
    expect(readFileSync(target, 'utf8')).toBe('keep me');
    const dangling = join(dir, `dangling-${_}`);
    symlinkSync(join(dir, `nowhere-${_}`), dangling);
    expect(() => save(arena, dangling)).toThrow(expect.objectContaining({ code: 'BAD_PATH' }));
    expect(existsSync(join(dir, `nowhere-${_}`))).toBe(false);
    expect(() => save(arena, link, { followLinks: 'yes' as never })).toThrow(
      expect.objectContaining({ name: 'OptionError', code: 'BAD_OPTION', field: 'followLinks' }),
    );
    expect(save(arena, link, { followLinks: true })).toBe(bytes(arena).length);
    expect(Buffer.compare(readFileSync(target), bytes(arena))).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
  });
});

describe('the CLI checks output paths before any work', () => {
  it('export OUT a FIFO or a symbolic link: BAD_ARGUMENT, nothing written', () => {
    using arena = Arena.create(planLayout({ layers: [4, 3], batch: 2 }), cpu);
    const ckpt = join(dir, 'm.nnackpt');
    arena.save(ckpt);
    const out = fifo('export.fifo');
    const reader = openSync(out, constants.O_RDONLY | constants.O_NONBLOCK);
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      expect(() => runExport(ckpt, out, { format: 'onnx' })).toThrow(
        expect.objectContaining({ code: 'BAD_ARGUMENT', message: expect.stringMatching(/^OUT: .* is a FIFO/) }),
      );
      expect(readSync(reader, Buffer.alloc(16))).toBe(0);
      const target = join(dir, 'export-target');
      writeFileSync(target, 'keep me');
      symlinkSync(target, join(dir, 'export-link'));
      expect(() => runExport(ckpt, join(dir, 'export-link'), { format: 'safetensors' })).toThrow(
        expect.objectContaining({ code: 'BAD_ARGUMENT', message: expect.stringMatching(/^OUT: .* is a symbolic link/) }),
      );
      expect(readFileSync(target, 'utf8')).toBe('keep me');
      expect(log).not.toHaveBeenCalled();
    } finally {
      log.mockRestore();
      closeSync(reader);
    }
  });

  it('train --save a folder: BAD_ARGUMENT before the data is read or anything trains', async () => {
    const folder = join(dir, 'save-here');
    mkdirSync(folder);
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const p = trainCli({
        backend: 'cpu',
        layers: [784, 8, 10],
        epochs: 1,
        batch: 100,
        optimizer: 'sgd',
        dtype: 'float32',
        seed: 1,
        save: folder,
        json: true,
      });
      await expect(within(p, 10_000)).rejects.toMatchObject({ code: 'BAD_ARGUMENT', message: expect.stringMatching(/^--save: .* is a folder/) });
      expect(err).not.toHaveBeenCalled();
    } finally {
      err.mockRestore();
    }
  }, 30_000);
});
