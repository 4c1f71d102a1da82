// compact-primitives-checks.ts: the trainer primitives on a compact arena (issue 27): forward is
// exact (equal to the full plan's), backward and update are refused (they keep gradients between
// runs, which a compact plan lets other regions overwrite). Shared by the CPU and CUDA suites.
import { Arena, planLayout, Trainer, type ArenaOptions, type LayoutSpec } from '../../src/index.js';
import { toyData } from './train-checks.js';

export const COMPACT_PRIMITIVE_SPECS: LayoutSpec[] = [
  { layers: [4, 8, 3], batch: 2 }, // the SIGSEGV (SGD: no dw at all)
  { layers: [6, 8, 8, 8, 8, 3], batch: 5 },
];

/** forward on the compact and the full plan (same weights), and what backward / update on the
 *  compact arena do: the code each threw, or 'resolved'. */
export async function compactPrimitives(options: ArenaOptions, spec: LayoutSpec, optimizer: 'sgd' | 'momentum' | 'adam', own: boolean) {
  const inputs = spec.layers[0]!,
    outputs = spec.layers[spec.layers.length - 1]!;
  const data = toyData(inputs, outputs, spec.batch, 5, false);
  const outcome = async (p: Promise<unknown>) =>
    p.then(
      () => 'resolved',
      (e: { code?: string }) => e.code ?? String(e),
    );
  const forward = async (compact: boolean) => {
    const arena = Arena.create(planLayout({ ...spec, optimizer, compact }), options);
    const t = new Trainer(arena, { lr: 0.05 });
    t.init(3);
    return { arena, t, out: (await t.forward(data.x)).slice() };
  };
  const full = await forward(false);
  const c = await forward(true);
  try {
    const dOutput = Float64Array.from({ length: spec.batch * outputs }, (_, i) => Math.sin(i) / spec.batch);
    const backward = await outcome(c.t.backward(own ? { dOutput } : { labels: data.labels! }));
    const update = await outcome(c.t.update());
    // the arena is still usable: a step trains it
    const step = await outcome(c.t.step(data.x, { labels: data.labels! }));
    return { fullOut: full.out, compactOut: c.out, backward, update, step };
  } finally {
    full.arena.dispose();
    c.arena.dispose();
  }
}
