// The trainer primitives on compact arenas (issue 27): the old main crashed (SIGSEGV in the CPU
// update of a compact SGD arena, which has no dw) or gave weights and gradients that differ from
// the full plan (momentum, Adam). Now forward is exact and backward / update are refused.
import { describe, expect, it } from 'vitest';
import { COMPACT_PRIMITIVE_SPECS, compactPrimitives } from './support/compact-primitives-checks.js';

const cpu = { backend: 'cpu' } as const;

describe('primitives on a compact arena: exact or refused', () => {
  for (const spec of COMPACT_PRIMITIVE_SPECS) {
    for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
      for (const own of [false, true]) {
        it(`${spec.layers.join('-')} ${optimizer}, backward(${own ? 'dOutput' : 'labels'})`, async () => {
          const r = await compactPrimitives(cpu, spec, optimizer, own);
          expect(Buffer.from(r.compactOut.buffer).equals(Buffer.from(r.fullOut.buffer))).toBe(true);
          expect(r.backward).toBe('NOT_SUPPORTED');
          expect(r.update).toBe('NO_GRADIENTS');
          expect(r.step).toBe('resolved');
        });
      }
    }
  }
});
