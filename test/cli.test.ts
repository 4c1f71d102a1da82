import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, planLayout } from '../src/index.js';

const CLI = 'dist/cli.js';
const run = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });

describe('nn-arena plan', () => {
  it('is built (npm install runs tsup)', () => expect(existsSync(CLI)).toBe(true));

  it('prints the region table and totals by kind', () => {
    const r = run('plan', '--layers', '784,128,10', '--batch', '100');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^w\s+406,528/m);
    expect(r.stdout).toMatch(/^z\s+368,800/m);
    expect(r.stdout).toMatch(/^\s+1\s+w\s+366,336\s+401,408\s+100,352$/m);
  });

  it('--json matches planLayout', () => {
    const r = run('plan', '--layers', '784,128,10', '--batch', '100', '--optimizer', 'adam', '--order', 'kind-major', '--json');
    expect(r.status).toBe(0);
    const j = JSON.parse(r.stdout);
    const p = planLayout({ layers: [784, 128, 10], batch: 100, optimizer: 'adam', order: 'kind-major' });
    expect(j.totalBytes).toBe(p.totalBytes);
    expect(j.regions).toEqual(p.regions);
    expect(j.bytesByKind).toEqual(p.bytesByKind());
  });

  it('bad input: one line naming the code, field and value; exit 1', () => {
    const r = run('plan', '--layers', '784,0,10');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/BAD_LAYERS: layers\[1\].*got 0/);
    const r2 = run('plan', '--layers', '784,x,10');
    expect(r2.status).toBe(1);
    expect(r2.stderr).toContain("'x' is not a number");
  });
});

describe('nn-arena train (the npm start job) on the CPU backend', () => {
  it('reaches >= 95% on the 2,000 held-out digits, with one arena and few transfers', () => {
    const r = run('train', '--backend', 'cpu', '--json');
    expect(r.status, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.backend).toBe('cpu');
    expect(j.accuracy).toBeGreaterThanOrEqual(0.95);
    expect(j.epochs).toBe(10);
    expect(j.allocations).toEqual({ host: 1, device: 1 });
    // Up: header at create, what init wrote (not the empty data regions), the training set (x and y rows fill the
    // data regions: one range), the test set's x rows and y rows (resident: evaluated in one
    // run, issue 18 part 5; batch by batch it was z[0] and y per batch, 2 x 40).
    expect(j.transfers.toDevice.transfers).toBe(5);
    // Down: stats 4x per epoch, w+b once (2 layer ranges), stats after testing.
    expect(j.transfers.toHost.transfers).toBe(4 * 10 + 2 + 1);
    // The same, by purpose; the parts add up to the native counters.
    const up = (purpose: string) =>
      j.transfers.byPurpose.find((p: { purpose: string; direction: string }) => p.purpose === purpose && p.direction === 'to device');
    const down = (purpose: string) =>
      j.transfers.byPurpose.find((p: { purpose: string; direction: string }) => p.purpose === purpose && p.direction === 'to host');
    expect([up('header')?.transfers, up('network')?.transfers, up('data')?.transfers]).toEqual([1, 1, 3]);
    expect([down('stats')?.transfers, down('weights back')?.transfers]).toEqual([4 * 10 + 1, 2]);
    const sum = (dir: string) =>
      j.transfers.byPurpose.filter((p: { direction: string }) => p.direction === dir).reduce((a: number, p: { bytes: number }) => a + p.bytes, 0);
    expect([sum('to device'), sum('to host')]).toEqual([j.transfers.toDevice.bytes, j.transfers.toHost.bytes]);
    expect(r.stderr).toMatch(/epoch 10\/10/);
  });

  it('prints the layout, the backend, test accuracy, wall time and transfer counts', () => {
    const r = run('train', '--backend', 'cpu', '--epochs', '1');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/network 784-128-10/);
    expect(r.stdout).toMatch(/backend cpu/);
    expect(r.stdout).toMatch(/test accuracy \d+\.\d+%/);
    expect(r.stdout).toMatch(/wall time/);
    expect(r.stdout).toMatch(/transfers: to device \d+/);
  });

  it('bad flags fail with a clear message', () => {
    const r = run('train', '--backend', 'cpu', '--layers', '100,10');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/784 inputs/);
    const r2 = run('train', '--backend', 'tpu');
    expect(r2.status).not.toBe(0);
    expect(r2.stderr).toMatch(/--backend: must be one of auto, cpu, cuda, got 'tpu'/);
  });
});

describe('nn-arena train --save and nn-arena inspect', () => {
  it('saves a checkpoint that inspect checks and describes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'nn-arena-cli-'));
    const file = join(dir, 'mnist.nna');
    const r = run('train', '--backend', 'cpu', '--epochs', '1', '--save', file);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/saved a checkpoint of \d+ bytes/);
    const i = run('inspect', file, '--json');
    expect(i.status, i.stderr).toBe(0);
    const j = JSON.parse(i.stdout);
    expect(j.steps).toBe(160);
    expect(j.kinds).toContain('w');
    expect(j.spec.layers).toEqual([784, 128, 10]);
    expect(j.totalBytes).toBe(j.arenaBytes);
    const t = run('inspect', file);
    expect(t.stdout).toMatch(/checksum ok/);
    expect(t.stdout).toMatch(/network 784-128-10/);
    writeFileSync(join(dir, 'bad.nna'), 'not a checkpoint at all, just some text that is long enough to have a header........');
    const b = run('inspect', join(dir, 'bad.nna'));
    expect(b.status).toBe(1);
    expect(b.stderr).toMatch(/BAD_CHECKPOINT: .*not an nn-arena checkpoint/);
  });
});

describe('nn-arena: options, errors, --version, doctor (issue 15)', () => {
  it('--version prints the package version', () => {
    const r = run('--version');
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe(JSON.parse(readFileSync('package.json', 'utf8')).version);
  });

  it('every option is checked before any work: nothing printed but one error line', () => {
    for (const args of [
      ['--epochs', '0'],
      ['--batch', '2.5'],
      ['--lr', '-1'],
      ['--seed', 'x'],
      ['--layers', '784,0,10'],
      ['--save', '/no/such/folder/x.nna'],
    ]) {
      const r = run('train', '--backend', 'cpu', ...args);
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stdout, args.join(' ')).toBe('');
      expect(r.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(r.stderr).toMatch(/^nn-arena: BAD_ARGUMENT: --/);
    }
  });

  it("one error style for the argument parser's errors and the library's", () => {
    expect(run('train', '--bogus').stderr).toMatch(/^nn-arena: BAD_ARGUMENT: --bogus: unknown option/);
    expect(run('nothing').stderr).toMatch(/^nn-arena: BAD_ARGUMENT: unknown command 'nothing'/);
    expect(run('plan', '--dtype', 'f16').stderr).toMatch(/^nn-arena: BAD_ARGUMENT: --dtype: must be one of float32, float64, got 'f16'/);
    expect(run('plan', '--layers', '784,0,10').stderr).toMatch(/^nn-arena: BAD_LAYERS: /);
  });

  it('no source paths in messages; --verbose prints them as detail', () => {
    const r = run('train', '--backend', 'cuda', '--epochs', '1');
    if (r.status === 0) return; // a usable GPU here
    expect(r.stderr).toMatch(/^nn-arena: (NO_DEVICE|NO_KERNEL_IMAGE): /);
    expect(r.stderr).not.toMatch(/csrc\/|\.cc:|\.cu:/);
    const v = run('--verbose', 'train', '--backend', 'cuda', '--epochs', '1');
    expect(v.stderr).toMatch(/^detail: csrc\/\S+:\d+$/m);
  });

  it('inspect lists only the kinds the file holds', () => {
    const dir = mkdtempSync(join(tmpdir(), 'nn-arena-cli-'));
    const file = join(dir, 'wb.nna');
    const arena = Arena.create(planLayout({ layers: [4, 3, 2], batch: 2, optimizer: 'adam' }), { backend: 'cpu' });
    try {
      arena.save(file, { kinds: ['w', 'b'] });
    } finally {
      arena.dispose();
    }
    const t = run('inspect', file);
    expect(t.status, t.stderr).toBe(0);
    expect(t.stdout).toMatch(/^w\s/m);
    expect(t.stdout).toMatch(/^b\s/m);
    for (const k of ['z', 'd', 'dw', 'mw', 'vw']) expect(t.stdout).not.toMatch(new RegExp(`^${k}\\s`, 'm'));
    const j = JSON.parse(run('inspect', file, '--json').stdout);
    expect(Object.keys(j.bytesByKind).sort()).toEqual(['b', 'w']);
  });

  it('doctor reports the binary, the CPU and what auto picks', () => {
    const r = run('doctor', '--json');
    expect(r.status, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.version).toBe(JSON.parse(readFileSync('package.json', 'utf8')).version);
    expect(j.binary.loaded).toBe(true);
    expect(['local', 'prebuilt']).toContain(j.binary.variant);
    expect(j.cpu.threads).toBeGreaterThan(0);
    expect(typeof j.cpu.avx2).toBe('boolean');
    expect(['cpu', 'cuda']).toContain(j.auto.backend);
    expect(j.auto.why.length).toBeGreaterThan(0);
    // cuBLAS and cuBLASLt are looked for only where a GPU is usable.
    if (j.auto.backend === 'cpu') expect([j.cublas, j.cublasLt]).toEqual([null, null]);
    else expect(typeof j.cublasLt).toBe('string');
    const t = run('doctor');
    expect(t.stdout).toMatch(/^binary\s+(local|prebuilt) /m);
    expect(t.stdout).toMatch(/^backend 'auto'\s+(cpu|cuda): /m);
    expect(t.stdout).toMatch(/^cuBLASLt\s+(not checked|found|not found)/m);
  });

  // The measured advice on data parallelism: where fewer than two GPUs are usable (this CPU
  // machine), one GPU, nothing timed; its options only with --data-parallel.
  it('doctor --data-parallel: where a group cannot run, advises one GPU and says why; its options need the flag', () => {
    const r = run('doctor', '--data-parallel', '--layers', '784,128,10', '--batch', '100', '--json');
    expect(r.status, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    if (j.devices.length < 2) {
      expect(j).toMatchObject({ advice: 'one-gpu', oneGpuUsPerStep: null, groupUsPerStep: null, throughput: null, perGpuBatch: 100, precision: 'fp32' });
      expect(j.why).toMatch(/needs 2 or more GPUs/);
      expect(run('doctor', '--data-parallel').stdout).toMatch(/^data parallelism: use one GPU: a group needs 2 or more GPUs/);
    }
    for (const [args, message] of [
      [['--layers', '3,4'], /--layers: applies to --data-parallel/],
      [['--data-parallel', '--steps', '5'], /--steps: must be a whole number of at least 20, got '5'/],
      [['--data-parallel', '--precision', 'fp8'], /--precision: must be one of/],
      [['--data-parallel', '--layers', '784,0,10'], /BAD_LAYOUT|layers/],
    ] as const) {
      const bad = run('doctor', ...args);
      expect(bad.status).toBe(1);
      expect(bad.stderr).toMatch(message);
    }
  });

  it("doctor's cuBLASLt line, where it is found, says the forward epilogues are on by default (NN_ARENA_CUBLASLT=0 turns them off)", async () => {
    const { doctorText } = await import('../src/cli/doctor.js');
    const { doctor } = await import('../src/native/doctor.js');
    const here = doctor();
    const line = doctorText({ ...here, cublas: 'cublas', cublasLt: 'found' })
      .split('\n')
      .find((l) => l.startsWith('cuBLASLt'))!;
    expect(line).toContain('the forward products take their bias and ReLU in its epilogues');
    expect(line).toContain('NN_ARENA_CUBLASLT=0 turns them off');
    expect(line).not.toMatch(/epilogues with NN_ARENA_CUBLASLT=1/);
  });
});

describe('nn-arena train: activations and losses', () => {
  it('trains MNIST with --activation gelu (and silu with bce-with-logits, leaky-relu with label smoothing)', () => {
    // bce-with-logits counts a digit correct when all 10 labels are (logit > 0 on the digit only).
    const cases: Array<[string[], number]> = [
      [['--activation', 'gelu'], 0.85],
      [['--activation', 'silu', '--loss', 'bce-with-logits'], 0.5],
      [['--activation', 'leaky-relu', '--leaky-relu-slope', '0.1', '--label-smoothing', '0.1'], 0.85],
    ];
    for (const [args, accuracy] of cases) {
      const r = run('train', '--backend', 'cpu', '--epochs', '1', '--json', ...args);
      expect(r.status, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      const j = JSON.parse(r.stdout);
      expect(j.accuracy, args.join(' ')).toBeGreaterThan(accuracy);
    }
  });

  it('bad activation and loss flags: one error line before any work', () => {
    for (const args of [
      ['--activation', 'swish'],
      ['--activation', 'softmax'],
      ['--loss', 'hinge'],
      ['--label-smoothing', '2'],
      ['--loss', 'mse', '--label-smoothing', '0.1'],
      ['--activation', 'leaky-relu', '--leaky-relu-slope', '-1'],
      ['--leaky-relu-slope', '0.1'],
    ]) {
      const r = run('train', '--backend', 'cpu', ...args);
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stdout, args.join(' ')).toBe('');
      expect(r.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(r.stderr).toMatch(/^nn-arena: BAD_ARGUMENT: /);
    }
  });
});
