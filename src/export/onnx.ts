// onnx.ts: the inference graph as an ONNX model (opset 20, for Gelu): per dense layer a Gemm (x
// W^T + b, the weight stored [out, in] with transB = 1) and its activation's nodes (sequential.ts:
// none for identity; Softmax over axis 1 on a softmax output; x * Sigmoid(x) for silu); another
// op's nodes from its module (src/layout/ops/, through an OnnxPort: a layernorm a
// LayerNormalization, a residual an Add, dropout none). Input `input` [batch, inputs] and output `output` [batch,
// outputs], the batch dimension symbolic; initializers carry the safetensors names (0.weight,
// 0.bias, ...). Written with src/export/protobuf.ts (field numbers from onnx/onnx.proto).
import type { Arena } from '../arena/arena.js';
import { packageVersion } from '../native/doctor.js';
import { checkArena, layerParams, modelOf, syncParamsToHost, type ModelOptions } from './params.js';
import { bytesOf, Message } from './protobuf.js';
import { saveFile, type OutputOptions } from '../formats/file.js';
import { exportActivation, sequentialSource, type OnnxAttribute } from './sequential.js';
import { onnxNodes, type OnnxPort } from '../layout/ops/index.js';

const OPSET = 20;
/** The IR version that goes with opset 20 (ONNX 1.15). */
const IR_VERSION = 9;
const TENSOR_TYPE = { float32: 1, float64: 11, int64: 7 } as const;
const ATTRIBUTE_TYPE = { float: 1, int: 2, string: 3 } as const;

// Field numbers (onnx.proto3).
const MODEL = { irVersion: 1, producerName: 2, producerVersion: 3, docString: 6, graph: 7, opsetImport: 8 };
const GRAPH = { node: 1, name: 2, initializer: 5, input: 11, output: 12 };
const NODE = { input: 1, output: 2, name: 3, opType: 4, attribute: 5 };
const ATTRIBUTE = { name: 1, f: 2, i: 3, s: 4, type: 20 };
const TENSOR = { dims: 1, dataType: 2, name: 8, rawData: 9 };
const VALUE_INFO = { name: 1, type: 2 };

function attribute(name: string, v: OnnxAttribute): Message {
  const m = new Message().string(ATTRIBUTE.name, name);
  if ('int' in v) return m.int(ATTRIBUTE.i, v.int).int(ATTRIBUTE.type, ATTRIBUTE_TYPE.int);
  if ('float' in v) return m.float(ATTRIBUTE.f, v.float).int(ATTRIBUTE.type, ATTRIBUTE_TYPE.float);
  return m.string(ATTRIBUTE.s, v.string).int(ATTRIBUTE.type, ATTRIBUTE_TYPE.string);
}

function node(op: string, inputs: string[], output: string, name: string, attributes: Record<string, OnnxAttribute> = {}): Message {
  const m = new Message();
  for (const i of inputs) m.string(NODE.input, i);
  m.string(NODE.output, output).string(NODE.name, name).string(NODE.opType, op);
  for (const [k, v] of Object.entries(attributes)) m.message(NODE.attribute, attribute(k, v));
  return m;
}

function tensor(name: string, dims: number[], type: number, data: Float32Array | Float64Array | BigInt64Array): Message {
  const m = new Message();
  for (const d of dims) m.int(TENSOR.dims, d);
  return m
    .int(TENSOR.dataType, type)
    .string(TENSOR.name, name)
    .bytes(TENSOR.rawData, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
}

/** An int64 tensor (ReduceMean's axes). */
function intTensor(name: string, values: number[]): Message {
  return tensor(name, [values.length], TENSOR_TYPE.int64, BigInt64Array.from(values.map(BigInt)));
}

/** A float tensor [batch, width] value description. */
function valueInfo(name: string, type: number, width: number): Message {
  // TensorShapeProto: dim (1) = Dimension { dim_value (1) | dim_param (2) }.
  const shape = new Message().message(1, new Message().string(2, 'batch')).message(1, new Message().int(1, width));
  const tensorType = new Message().int(1, type).message(2, shape); // TypeProto.Tensor: elem_type, shape
  return new Message().string(VALUE_INFO.name, name).message(VALUE_INFO.type, new Message().message(1, tensorType));
}

/** The ONNX model of model `options.model` of `arena` (its inference graph). */
export function toOnnx(arena: Arena, options?: ModelOptions): Uint8Array {
  checkArena(arena);
  const model = modelOf(arena, options);
  // Activations are checked before anything moves: a network nn-arena cannot export is refused whole.
  const spec = arena.plan.spec;
  const source = sequentialSource(spec);
  syncParamsToHost(arena, 'toOnnx');
  const type = TENSOR_TYPE[spec.dtype];
  const graph = new Message().string(GRAPH.name, 'nn-arena');
  const params = layerParams(arena, model);
  const L = params.length;
  const outputs = ['input']; // each layer's output value, for a residual's addition
  const constants: Message[] = [];
  // An op's nodes (src/layout/ops/) go into this graph through the port.
  const portOf = (l: number, x: string, out: string, tensors: readonly { name: string }[]): OnnxPort => ({
    l,
    x,
    out,
    tensors: tensors.map((t) => t.name),
    output: (layer) => outputs[layer]!,
    node: (op, inputs, output, name, attributes) => graph.message(GRAPH.node, node(op, inputs, output, name, attributes)),
    floatConstant: (name, value) => constants.push(tensor(name, [], type, spec.dtype === 'float32' ? Float32Array.of(value) : Float64Array.of(value))),
    intConstant: (name, values) => constants.push(intTensor(name, values)),
    int64: TENSOR_TYPE.int64,
  });
  for (const p of params) {
    const l = p.layer,
      o = spec.ops?.[l - 1] ?? { op: 'dense' as const };
    const steps = exportActivation(spec.activations[l - 1]!, l, spec.leakyReluSlope).onnx;
    const x = outputs[l - 1]!;
    const [w, b] = [p.tensors[0]?.name ?? '', p.tensors[1]?.name ?? ''];
    const opOut = l === L && steps.length === 0 ? 'output' : `layer_${l}`;
    let h = opOut;
    if (o.op === 'dense') graph.message(GRAPH.node, node('Gemm', [x, w, b], opOut, `gemm_${l}`, { transB: { int: 1 } }));
    else if (!onnxNodes(o, portOf(l, x, opOut, p.tensors))) h = x; // the identity at inference (dropout)
    steps.forEach((st, i) => {
      const out = l === L && i === steps.length - 1 ? 'output' : `act_${l}${steps.length > 1 ? `_${i}` : ''}`;
      graph.message(
        GRAPH.node,
        node(st.op, st.alsoInput ? [opOut, h] : [h], out, `${st.op.toLowerCase()}_${l}${steps.length > 1 ? `_${i}` : ''}`, st.attributes),
      );
      h = out;
    });
    outputs.push(h);
  }
  for (const p of params) for (const t of p.tensors) graph.message(GRAPH.initializer, tensor(t.name, t.shape, type, t.view));
  for (const c of constants) graph.message(GRAPH.initializer, c);
  graph.message(GRAPH.input, valueInfo('input', type, spec.layers[0]!));
  graph.message(GRAPH.output, valueInfo('output', type, spec.layers[spec.layers.length - 1]!));
  const m = new Message()
    .int(MODEL.irVersion, IR_VERSION)
    .string(MODEL.producerName, 'nn-arena')
    .string(MODEL.producerVersion, packageVersion())
    .string(MODEL.docString, `PyTorch equivalent: ${source}`)
    .message(MODEL.graph, graph)
    .message(MODEL.opsetImport, new Message().string(1, '').int(2, OPSET));
  return bytesOf(m);
}

/** Writes toOnnx(arena) to `path` (saveSafetensors' rules for the path); the bytes written. */
export function saveOnnx(arena: Arena, path: string, options?: ModelOptions & OutputOptions): number {
  return saveFile(path, options, () => toOnnx(arena, options));
}
