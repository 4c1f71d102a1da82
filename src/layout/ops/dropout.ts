// dropout.ts: the dropout op (inverted dropout, nn.Dropout; csrc/ops/dropout.h): p in [0, 1);
// the identity at inference, so its ONNX graph has no node.
import { LayoutError } from '../../core/errors.js';
import type { OpDef } from './types.js';

export interface DropoutOp {
  readonly op: 'dropout';
  readonly p: number;
}

export const dropout: OpDef<DropoutOp> = {
  keys: ['op', 'p'],
  read(o, c) {
    const p = o.p;
    if (typeof p !== 'number' || !(p >= 0 && p < 1)) throw new LayoutError('BAD_LAYERS', `${c.field}.p`, p, 'must be a number in [0, 1)');
    return { op: { op: 'dropout', p }, width: c.units[c.l - 1]! };
  },
  params: (o) => ({ value: o.p, from: 0 }),
  decode: (p) => ({ op: 'dropout', p: p.value }),
  torch: (o) => `Dropout(p=${o.p})`,
  onnx: () => false,
};
