// divergence-checks.ts: training that leaves weights non-finite while the loss stays finite (a
// ReLU maps NaN to 0, so the outputs and the loss are finite numbers): every training path must
// say DIVERGED (issue 27). Shared by the CPU suite and the CUDA suite.
import { Arena, planLayout, Trainer, type ArenaOptions, type LayoutSpec } from '../../src/index.js';
import { toyData } from './train-checks.js';

/** The configuration: 8-16-16-4, ReLU everywhere (MSE), a learning rate of 7.56e32. */
export const BLOWUP: LayoutSpec = { layers: [8, 16, 16, 4], batch: 16, samples: 64, activations: ['relu', 'relu', 'relu'] };
export const BLOWUP_LR = 7.56e32;

/** Whether any weight or bias of the model is non-finite (host side, after syncToHost). */
export function nonFinite(arena: Arena, model = 0): boolean {
  const L = arena.plan.spec.layers.length - 1;
  for (let l = 1; l <= L; l++) for (const k of ['w', 'b'] as const) if (arena.view(l, k, model).some((v) => !Number.isFinite(v))) return true;
  return false;
}

/** What fit, a loop of step() and forward/backward/update end with on the blow-up network: the
 *  error code (or 'resolved'), and whether the weights were then non-finite. */
export async function blowUp(options: ArenaOptions, seed: number, how: 'fit' | 'step' | 'primitives', spec: LayoutSpec = BLOWUP) {
  using arena = Arena.create(planLayout(spec), options);
  const t = new Trainer(arena, { lr: BLOWUP_LR });
  t.init(seed);
  const data = toyData(8, 4, 64, seed, true);
  let outcome = 'resolved',
    loss = NaN;
  try {
    if (how === 'fit') loss = (await t.fit({ x: data.x, y: data.y! }, { epochs: 5, seed })).loss;
    for (let s = 0; how !== 'fit' && s < 20; s++) {
      const x = data.x.subarray((s % 4) * 128, (s % 4) * 128 + 128),
        y = data.y!.subarray((s % 4) * 64, (s % 4) * 64 + 64);
      if (how === 'step') loss = (await t.step(x, { y })).loss;
      else {
        await t.forward(x);
        await t.backward({ y });
        loss = (await t.metrics()).loss;
        await t.update();
      }
    }
  } catch (e) {
    outcome = (e as { code?: string }).code ?? String(e);
  }
  t.syncToHost();
  return { outcome, loss, nonFinite: nonFinite(arena) };
}
