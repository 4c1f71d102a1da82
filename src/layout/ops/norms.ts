// norms.ts: the layernorm and rmsnorm ops (nn.LayerNorm, nn.RMSNorm over each row's units;
// csrc/ops/norm.h). eps: layernorm's default 1e-5 (nn.LayerNorm's), rmsnorm's the dtype's machine
// epsilon (torch.finfo(dtype).eps, as nn.RMSNorm).
import { LayoutError } from '../../core/errors.js';
import type { Dtype } from '../header.js';
import type { OpDef } from './types.js';

export interface NormOp {
  readonly op: 'layernorm' | 'rmsnorm';
  readonly eps: number;
}
/** As a user writes it. */
export interface NormSpec {
  readonly op: 'layernorm' | 'rmsnorm';
  readonly eps?: number;
}

/** torch.finfo(dtype).eps. */
const MACHINE_EPS: Readonly<Record<Dtype, number>> = { float32: 2 ** -23, float64: 2 ** -52 };

function norm(op: NormOp['op'], defaultEps: (dtype: Dtype) => number, torch: string): OpDef<NormOp> {
  return {
    keys: ['op', 'eps'],
    weights: 'ones',
    read(o, c) {
      const eps = o.eps ?? defaultEps(c.dtype);
      if (typeof eps !== 'number' || !Number.isFinite(eps) || eps <= 0)
        throw new LayoutError('BAD_LAYERS', `${c.field}.eps`, eps, 'must be a finite number > 0');
      return { op: { op, eps }, width: c.units[c.l - 1]! };
    },
    params: (o) => ({ value: o.eps, from: 0 }),
    decode: (p) => ({ op, eps: p.value }),
    torch: (o, units) => `${torch}(${units}, eps=${o.eps})`,
    onnx(o, p) {
      if (op === 'layernorm') {
        p.node('LayerNormalization', [p.x, p.tensors[0]!, p.tensors[1]!], p.out, `layernorm_${p.l}`, { axis: { int: 1 }, epsilon: { float: o.eps } });
        return true;
      }
      // x / sqrt(mean(x^2) + eps) * gain (ONNX's RMSNormalization is opset 23: composed here)
      const at = `rmsnorm_${p.l}`;
      p.floatConstant(`${at}.eps`, o.eps);
      p.intConstant(`${at}.axes`, [1]); // rows are dim 0: each row's units
      p.node('Mul', [p.x, p.x], `${at}_sq`, `${at}_sq`);
      p.node('ReduceMean', [`${at}_sq`, `${at}.axes`], `${at}_mean`, `${at}_mean`, { keepdims: { int: 1 } });
      p.node('Add', [`${at}_mean`, `${at}.eps`], `${at}_var`, `${at}_var`);
      p.node('Sqrt', [`${at}_var`], `${at}_rms`, `${at}_rms`);
      p.node('Div', [p.x, `${at}_rms`], `${at}_hat`, `${at}_hat`);
      p.node('Mul', [`${at}_hat`, p.tensors[0]!], p.out, at);
      return true;
    },
  };
}

export const layernorm = norm('layernorm', () => 1e-5, 'LayerNorm');
export const rmsnorm = norm('rmsnorm', (dtype) => MACHINE_EPS[dtype], 'RMSNorm');
