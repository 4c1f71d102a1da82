// alpha-dropout.ts: the alpha-dropout op (nn.AlphaDropout; csrc/ops/alpha_dropout.h): p in
// [0, 1), dropout's mask; the identity at inference.
import { droppingOp, type DroppingOp } from './dropout.js';

export type AlphaDropoutOp = DroppingOp<'alpha-dropout'>;

export const alphaDropout = droppingOp('alpha-dropout', 'AlphaDropout');
