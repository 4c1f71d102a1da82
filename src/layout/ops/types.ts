// types.ts: what every op of the layer table (nn_arena.h NNA_OPS) gives the TypeScript side, in
// one module per op (this folder; index.ts lists them): its spec as a user writes it, read and
// checked; its entry of the header's op parameter table, both ways; its PyTorch module; its ONNX
// nodes, written through a port that src/export/onnx.ts implements (so layout never imports
// export). The native side's rules (csrc/ops/, csrc/core/validate.cc) stay the reference.
import type { Dtype, EmbedColumn } from '../header.js';

/** An ONNX attribute value, typed as ONNX stores it. */
export type OnnxAttribute = { int: number } | { float: number } | { string: string };

/** Where a layer's op is read: its field in the spec (for errors), its index, the units of the
 *  layers before it, the dtype. */
export interface OpContext {
  readonly field: string;
  readonly l: number;
  readonly units: readonly number[];
  readonly dtype: Dtype;
}

/** A layer's entry of the op parameter table (nna_op_param): value (eps, p) and from (a
 *  residual's layer, an embedding's numeric columns); an embedding's column table too. */
export interface OpParams {
  readonly value: number;
  readonly from: number;
  readonly columns?: readonly EmbedColumn[];
}

/** What an op's ONNX nodes are written with (src/export/onnx.ts). */
export interface OnnxPort {
  /** The layer, its input value and the value its op writes. */
  readonly l: number;
  readonly x: string;
  readonly out: string;
  /** The names of the layer's parameter tensors (export/params.ts order: w then b; an
   *  embedding's tables). */
  readonly tensors: readonly string[];
  /** The output value of an earlier layer (0: the input). */
  output(layer: number): string;
  node(op: string, inputs: string[], output: string, name: string, attributes?: Record<string, OnnxAttribute>): void;
  /** A scalar initializer in the model's float type. */
  floatConstant(name: string, value: number): void;
  /** A 1-D int64 initializer. */
  intConstant(name: string, values: number[]): void;
  /** ONNX's int64 element type (a Cast's `to`). */
  readonly int64: number;
}

/** One op: S its planned form (what plan.spec.ops holds). */
export interface OpDef<S extends { readonly op: string }> {
  /** The spec keys a layer object of this op may have. */
  readonly keys: readonly string[];
  /** Layer l's op from its object `o`: the op as planned and the layer's width. Throws a
   *  LayoutError naming the field and value. */
  read(o: Record<string, unknown>, c: OpContext): { op: S; width: number };
  /** Its entry of the op parameter table. */
  params(o: S): OpParams;
  /** The op back from a validated header's entry. */
  decode(p: OpParams): S;
  /** How init() fills its w region where it has one, as its torch module starts: 'ones' (a
   *  norm's gain, no draw), 'normal' (N(0, 1), drawn in layer order: nn.Embedding's). */
  readonly weights?: 'ones' | 'normal';
  /** Its module as PyTorch source (docs/ops.md), for a layer of `units`. */
  torch(o: S, units: number): string;
  /** Its inference nodes; false where it is the identity at inference (nothing written). */
  onnx(o: S, port: OnnxPort): boolean;
}
