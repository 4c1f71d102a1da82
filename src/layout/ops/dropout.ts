// dropout.ts: the dropout op (inverted dropout, nn.Dropout; csrc/ops/dropout.h), and what every op
// that drops units by dropout's mask shares (droppingOp: alpha-dropout.ts too): p in [0, 1); the
// identity at inference, so its ONNX graph has no node.
import { LayoutError } from '../../core/errors.js';
import type { OpDef } from './types.js';

/** An op `op` whose parameter is a p in [0, 1) (its row's param column: NNA_OP_PARAM_P), as planned. */
export interface DroppingOp<N extends string> {
  readonly op: N;
  readonly p: number;
}

export function droppingOp<N extends string>(op: N, torch: string): OpDef<DroppingOp<N>> {
  return {
    keys: ['op', 'p'],
    read(o, c) {
      const p = o.p;
      if (typeof p !== 'number' || !(p >= 0 && p < 1)) throw new LayoutError('BAD_LAYERS', `${c.field}.p`, p, 'must be a number in [0, 1)');
      return { op: { op, p }, width: c.units[c.l - 1]! };
    },
    params: (o) => ({ value: o.p, from: 0 }),
    decode: (p) => ({ op, p: p.value }),
    torch: (o) => `${torch}(p=${o.p})`,
    onnx: () => false,
  };
}

export type DropoutOp = DroppingOp<'dropout'>;

export const dropout = droppingOp('dropout', 'Dropout');
