// primitives-custom.test.ts: what a user builds from Trainer.forward / backward / update (issue
// 17): a custom loss (Huber) through dOutput matches finite differences and trains; a custom
// optimizer over the views matches a TS reference. The primitives themselves: primitives.test.ts.
import { describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer, type Activation, type View } from '../src/index.js';
import { finiteDifferenceError, toyData } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;

// ---- Huber loss in TS ------------------------------------------------------------------------
const huber = (r: number, delta: number) => (Math.abs(r) <= delta ? 0.5 * r * r : delta * (Math.abs(r) - delta / 2));
const huberGrad = (r: number, delta: number) => Math.max(-delta, Math.min(delta, r));
/** Mean over rows of the summed Huber loss, and its gradient with respect to the outputs. */
function huberLoss(out: ArrayLike<number>, y: ArrayLike<number>, rows: number, delta: number) {
  let loss = 0;
  const dOutput = new Float64Array(out.length);
  for (let i = 0; i < out.length; i++) {
    loss += huber(out[i]! - y[i]!, delta) / rows;
    dOutput[i] = huberGrad(out[i]! - y[i]!, delta) / rows;
  }
  return { loss, dOutput };
}

describe('Huber loss through backward({ dOutput })', () => {
  for (const output of ['identity', 'sigmoid', 'tanh', 'softmax'] as const) {
    it(`gradients match finite differences (${output} output, float64)`, async () => {
      const arena = Arena.create(planLayout({ layers: [5, 6, 4, 3], batch: 4, dtype: 'float64', activations: ['tanh', 'sigmoid', output] }), cpu);
      try {
        const t = new Trainer(arena);
        t.init(7);
        for (let l = 1; l < 4; l++)
          arena.view(l, 'b').forEach((_, i, b) => {
            b[i] = 0.05 * Math.sin(3 * l + 7 * i + 1);
          });
        t.markHostChanged();
        const { x } = toyData(5, 3, 4, 11, true);
        const y = Float64Array.from({ length: 12 }, (_, i) => (output === 'softmax' ? (i % 3 === 1 ? 1 : 0) : Math.sin(i)));
        const out = Float64Array.from(await t.forward(x));
        // delta between two residuals, far from every one: no residual crosses the kink.
        const res = Array.from(out, (o, i) => Math.abs(o - y[i]!)).sort((a, b) => a - b);
        let k = 5;
        for (let i = 4; i < 8; i++) if (res[i + 1]! - res[i]! > res[k + 1]! - res[k]!) k = i;
        const delta = (res[k]! + res[k + 1]!) / 2;
        expect(res.some((r) => r < delta) && res.some((r) => r > delta)).toBe(true); // both branches
        await t.backward({ dOutput: huberLoss(out, y, 4, delta).dOutput });
        arena.toHost({ kinds: ['dw', 'db'] });
        const loss = async () => huberLoss(await t.forward(x), y, 4, delta).loss;
        const { maxRel, where } = await finiteDifferenceError(arena, t, loss);
        expect(maxRel, where).toBeLessThanOrEqual(1e-6);
      } finally {
        arena.dispose();
      }
    });
  }

  it('trains: forward, Huber in TS, backward({ dOutput }), update() lowers the loss', async () => {
    const arena = Arena.create(planLayout({ layers: [6, 16, 2], batch: 32, optimizer: 'momentum', activations: ['tanh', 'identity'] }), cpu);
    try {
      const t = new Trainer(arena, { lr: 0.05 });
      t.init(3);
      const { x } = toyData(6, 2, 32, 5, true);
      const y = Float32Array.from({ length: 64 }, (_, i) => 2 * x[(i >> 1) * 6]! - x[(i >> 1) * 6 + 1 + (i & 1)]!);
      const losses: number[] = [];
      for (let s = 0; s < 60; s++) {
        const { loss, dOutput } = huberLoss(await t.forward(x), y, 32, 0.5);
        losses.push(loss);
        await t.backward({ dOutput });
        await t.update();
      }
      expect(t.steps).toBe(60);
      expect(losses.every(Number.isFinite)).toBe(true);
      expect(losses[59]!).toBeLessThan(0.2 * losses[0]!);
    } finally {
      arena.dispose();
    }
  });
});

// ---- a custom optimizer over the views, against a TS reference MLP ---------------------------
const act = (a: Activation, v: number) => (a === 'tanh' ? Math.tanh(v) : a === 'relu' ? Math.max(v, 0) : a === 'sigmoid' ? 1 / (1 + Math.exp(-v)) : v);
const actGrad = (a: Activation, z: number) => (a === 'tanh' ? 1 - z * z : a === 'relu' ? (z > 0 ? 1 : 0) : a === 'sigmoid' ? z * (1 - z) : 1);

/** Float64 forward and cross-entropy backward of an MLP with a softmax output (mean over rows). */
function reference(W: Float64Array[], B: Float64Array[], layers: number[], acts: Activation[], x: Float64Array, y: Float64Array, rows: number) {
  const z: Float64Array[] = [x];
  for (let l = 1; l < layers.length; l++) {
    const n = layers[l]!,
      m = layers[l - 1]!;
    const out = new Float64Array(rows * n);
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < n; j++) {
        let s = B[l]![j]!;
        for (let i = 0; i < m; i++) s += z[l - 1]![r * m + i]! * W[l]![j * m + i]!;
        out[r * n + j] = acts[l - 1] === 'softmax' ? s : act(acts[l - 1]!, s);
      }
      if (acts[l - 1] === 'softmax') {
        const row = out.subarray(r * n, (r + 1) * n);
        const mx = Math.max(...row);
        const sum = row.reduce((a, v) => a + Math.exp(v - mx), 0);
        row.forEach((v, j) => {
          row[j] = Math.exp(v - mx) / sum;
        });
      }
    }
    z.push(out);
  }
  const L = layers.length - 1;
  let d = z[L]!.map((p, i) => (p - y[i]!) / rows);
  const dW: Float64Array[] = [],
    dB: Float64Array[] = [];
  for (let l = L; l >= 1; l--) {
    const n = layers[l]!,
      m = layers[l - 1]!;
    const gw = (dW[l] = new Float64Array(n * m));
    const gb = (dB[l] = new Float64Array(n));
    for (let r = 0; r < rows; r++)
      for (let j = 0; j < n; j++) {
        gb[j] = gb[j]! + d[r * n + j]!;
        for (let i = 0; i < m; i++) gw[j * m + i] = gw[j * m + i]! + d[r * n + j]! * z[l - 1]![r * m + i]!;
      }
    if (l > 1) {
      const prev = new Float64Array(rows * m);
      for (let r = 0; r < rows; r++)
        for (let i = 0; i < m; i++) {
          let s = 0;
          for (let j = 0; j < n; j++) s += d[r * n + j]! * W[l]![j * m + i]!;
          prev[r * m + i] = s * actGrad(acts[l - 2]!, z[l - 1]![r * m + i]!);
        }
      d = prev;
    }
  }
  return { out: z[L]!, dW, dB };
}

describe('a custom optimizer written over the views', () => {
  it("SGD with weight decay from backward()'s dw / db matches a TS reference (float64)", async () => {
    const layers = [7, 9, 5, 4],
      acts: Activation[] = ['tanh', 'relu', 'softmax'];
    const arena = Arena.create(planLayout({ layers, batch: 6, dtype: 'float64', activations: acts }), cpu);
    try {
      const t = new Trainer(arena);
      t.init(2);
      const W = layers.map((_, l) => (l ? Float64Array.from(arena.view(l, 'w')) : new Float64Array()));
      const B = layers.map((_, l) => (l ? Float64Array.from(arena.view(l, 'b')) : new Float64Array()));
      const data = toyData(7, 4, 6 * 4, 3, false);
      const lr = 0.2,
        wd = 0.01;
      const sgdWd = (w: View | Float64Array, g: ArrayLike<number>) => {
        for (let i = 0; i < w.length; i++) w[i] = w[i]! - lr * (g[i]! + wd * w[i]!);
      };
      for (let s = 0; s < 4; s++) {
        const x = data.x.subarray(s * 6 * 7, (s + 1) * 6 * 7);
        const labels = data.labels!.subarray(s * 6, (s + 1) * 6);
        const y = new Float64Array(6 * 4);
        labels.forEach((c, r) => {
          y[r * 4 + c] = 1;
        });
        const out = await t.forward(x);
        const ref = reference(W, B, layers, acts, Float64Array.from(x), y, 6);
        for (let i = 0; i < out.length; i++) expect(out[i]).toBeCloseTo(ref.out[i]!, 12);
        await t.backward({ labels });
        arena.toHost({ kinds: ['dw', 'db'] });
        for (let l = 1; l < layers.length; l++) {
          sgdWd(arena.view(l, 'w'), arena.view(l, 'dw'));
          sgdWd(arena.view(l, 'b'), arena.view(l, 'db'));
          sgdWd(W[l]!, ref.dW[l]!);
          sgdWd(B[l]!, ref.dB[l]!);
        }
        t.markHostChanged();
      }
      let worst = 0;
      for (let l = 1; l < layers.length; l++) {
        for (const [kind, mine] of [
          ['w', W[l]!],
          ['b', B[l]!],
        ] as const) {
          const v = arena.view(l, kind);
          for (let i = 0; i < v.length; i++) worst = Math.max(worst, Math.abs(v[i]! - mine[i]!) / Math.max(1, Math.abs(mine[i]!)));
        }
      }
      expect(worst).toBeLessThan(1e-12);
      expect(t.steps).toBe(0); // the built-in optimizer never ran
    } finally {
      arena.dispose();
    }
  });
});

// ---- forward + backward + update == step -----------------------------------------------------
