// phases.ts: the TypeScript mirror of the native phase table (csrc/train/phases.cc,
// StepModel::step): what each phase of a training step reads and writes, in the per-layer
// order (CPU backend, per-layer CUDA path) and the fused one-kernel order. The compact planner
// (plan.ts) decides from it which regions may share bytes; test/phases-drift.test.ts compares
// it phase by phase with the native table, and the native replay (csrc/train/aliasing.cc)
// checks every compact header against the native table again before it is used.
import type { Kind } from './header.js';
import { optimizerNamed } from './optimizers.js';
import type { NormalizedSpec } from './spec.js';
import { FUSED_OUTPUT_MAX_UNITS } from './tables.generated.js';

/** As in phases.h: read; write before any read (the old bytes are dead); read then write. */
export const ACCESS = { read: 1, write: 2, update: 3 } as const;
export type Stage = 'gather' | 'forward' | 'output' | 'backward';
export type StepOp = 'train' | 'grad' | 'eval' | 'forward';
export type StepPath = 'layers' | 'fused';

export interface PhaseUse { readonly layer: number; readonly kind: Kind; access: number }
export interface Phase { readonly stage: Stage; readonly layer: number; readonly uses: PhaseUse[] }

/** phases.h kFusedOutputMaxUnits (generated from it): the fused path does a last layer this narrow with the output. */
export { FUSED_OUTPUT_MAX_UNITS };

/** The phases of one step; `present(layer, kind)`: whether the plan has that region. */
export function stepPhases(s: NormalizedSpec, present: (layer: number, kind: Kind) => boolean, op: StepOp, resident: boolean, path: StepPath): Phase[] {
  const last = s.layers.length - 1;
  const grad = op === 'train' || op === 'grad';
  const folded = op === 'train' && optimizerNamed(s.optimizer)!.folds;
  const fused = path === 'fused';
  const fuseOutput = fused && last >= 2 && s.layers[last]! <= FUSED_OUTPUT_MAX_UNITS;
  const out: Phase[] = [];
  const phase = (stage: Stage, layer: number): Phase => { const p: Phase = { stage, layer, uses: [] }; out.push(p); return p; };
  const use = (ph: Phase, layer: number, kind: Kind, access: number) => {
    if (!present(layer, kind)) return;
    const u = ph.uses.find((x) => x.layer === layer && x.kind === kind);
    if (u) { if (u.access !== ACCESS.write) u.access |= access; return; }
    ph.uses.push({ layer, kind, access });
  };
  const targets = (ph: Phase) => {
    if (resident) { use(ph, last, 'ydata', ACCESS.read); use(ph, last, 'y', ACCESS.write); } else use(ph, last, 'y', ACCESS.read);
  };
  const gradients = (ph: Phase, l: number) => {
    use(ph, l, 'd', ACCESS.read);
    use(ph, l - 1, 'z', ACCESS.read);
    if (!folded) use(ph, l, 'dw', ACCESS.write);
    use(ph, l, 'db', ACCESS.write);
  };
  const update = (ph: Phase, l: number) => {
    if (op === 'train') for (const k of ['w', 'b', 'mw', 'mb', 'vw', 'vb'] as const) use(ph, l, k, ACCESS.update);
  };
  const errorPrev = (ph: Phase, l: number) => {
    use(ph, l, 'd', ACCESS.read);
    use(ph, l, 'w', ACCESS.read);
    use(ph, l - 1, 'z', ACCESS.read);
    use(ph, l - 1, 'd', ACCESS.write);
  };
  if (resident && !fused) {
    const g = phase('gather', 0);
    use(g, 0, 'xdata', ACCESS.read);
    use(g, last, 'ydata', ACCESS.read);
    use(g, 0, 'z', ACCESS.write);
    use(g, last, 'y', ACCESS.write);
  }
  for (let l = 1; l <= last; l++) {
    const f = phase('forward', l);
    if (l === 1 && resident && fused) {
      use(f, 0, 'xdata', ACCESS.read);
      use(f, 0, 'z', ACCESS.write);
    } else {
      use(f, l - 1, 'z', ACCESS.read);
    }
    use(f, l, 'w', ACCESS.read);
    use(f, l, 'b', ACCESS.read);
    if (l === last && fuseOutput) {
      targets(f);
      use(f, l, 'z', ACCESS.write);
      if (grad) { use(f, l, 'd', ACCESS.write); use(f, l - 1, 'd', ACCESS.write); }
      use(f, last, 'stats', ACCESS.update);
    } else {
      use(f, l, 'z', ACCESS.write);
    }
  }
  if (!fuseOutput) {
    const o = phase('output', last);
    if (fused && resident) targets(o);
    use(o, last, 'z', ACCESS.update);
    use(o, last, 'y', ACCESS.read);
    if (grad) use(o, last, 'd', ACCESS.write);
    use(o, last, 'stats', ACCESS.update);
  }
  if (!grad) return out;
  if (!fused) {
    for (let l = last; l >= 1; l--) {
      const b = phase('backward', l);
      gradients(b, l);
      if (l > 1) { use(b, l, 'w', ACCESS.read); use(b, l - 1, 'd', ACCESS.write); }
      update(b, l);
    }
    return out;
  }
  for (let l = fuseOutput ? last - 1 : last; l >= 1; l--) {
    const b = phase('backward', l);
    if (l > 1) errorPrev(b, l);
    for (const k of [l + 1, l === 1 ? 1 : 0]) if (k >= 1 && k <= last) { gradients(b, k); update(b, k); }
  }
  return out;
}
