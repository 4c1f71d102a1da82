// alpha-dropout.ts: the alpha-dropout op (nn.AlphaDropout; csrc/ops/alpha_dropout.h): p in
// [0, 1), dropout's mask; the identity at inference, so its ONNX graph has no node.
import { LayoutError } from '../../core/errors.js';
import type { OpDef } from './types.js';

export interface AlphaDropoutOp {
  readonly op: 'alpha-dropout';
  readonly p: number;
}

export const alphaDropout: OpDef<AlphaDropoutOp> = {
  keys: ['op', 'p'],
  read(o, c) {
    const p = o.p;
    if (typeof p !== 'number' || !(p >= 0 && p < 1)) throw new LayoutError('BAD_LAYERS', `${c.field}.p`, p, 'must be a number in [0, 1)');
    return { op: { op: 'alpha-dropout', p }, width: c.units[c.l - 1]! };
  },
  params: (o) => ({ value: o.p, from: 0 }),
  decode: (p) => ({ op: 'alpha-dropout', p: p.value }),
  torch: (o) => `AlphaDropout(p=${o.p})`,
  onnx: () => false,
};
