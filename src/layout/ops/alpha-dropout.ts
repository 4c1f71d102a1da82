// alpha-dropout.ts: the alpha-dropout op (nn.AlphaDropout; csrc/ops/alpha_dropout.h): p in
// [0, 1), dropout's mask; the identity at inference.
import { droppingOp } from './dropout.js';

export interface AlphaDropoutOp {
  readonly op: 'alpha-dropout';
  readonly p: number;
}

export const alphaDropout = droppingOp('alpha-dropout', 'AlphaDropout');
