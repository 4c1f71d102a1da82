// residual.ts: the residual op: the layer before plus an earlier layer `from` of the same width
// (csrc/ops/residual.h): the Residual module of docs/ops.md, an ONNX Add.
import { LayoutError } from '../../core/errors.js';
import type { OpDef } from './types.js';

export interface ResidualOp {
  readonly op: 'residual';
  readonly from: number;
}

export const residual: OpDef<ResidualOp> = {
  keys: ['op', 'from'],
  read(o, { field, l, units }) {
    const from = o.from;
    const width = units[l - 1]!;
    if (typeof from !== 'number' || !Number.isInteger(from) || from < 0 || from > l - 2)
      throw new LayoutError('BAD_LAYERS', `${field}.from`, from, `must be a layer index in [0, ${l - 2}] (an earlier layer than the one before)`);
    if (units[from] !== width)
      throw new LayoutError('BAD_LAYERS', `${field}.from`, from, `layer ${from} has ${units[from]} units; a residual adds layers of one width (${width})`);
    return { op: { op: 'residual', from }, width };
  },
  params: (o) => ({ value: 0, from: o.from }),
  decode: (p) => ({ op: 'residual', from: p.from }),
  torch: (o) => `Residual(${o.from})`,
  onnx(o, p) {
    p.node('Add', [p.x, p.output(o.from)], p.out, `residual_${p.l}`);
    return true;
  },
};
