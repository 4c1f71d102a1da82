// onnx.ts: the inference graph as an ONNX model (opset 20, for Gelu): per layer a Gemm (x W^T +
// b, the weight stored [out, in] with transB = 1) and its activation's nodes (sequential.ts: none
// for identity; Softmax over axis 1 on a softmax output; x * Sigmoid(x) for silu). Input `input` [batch, inputs] and output `output` [batch,
// outputs], the batch dimension symbolic; initializers carry the safetensors names (0.weight,
// 0.bias, ...). Written with src/export/protobuf.ts (field numbers from onnx/onnx.proto).
import type { Arena } from '../arena/arena.js';
import { packageVersion } from '../native/doctor.js';
import { checkArena, layerParams, modelOf, syncParamsToHost, type ModelOptions } from './params.js';
import { bytesOf, Message } from './protobuf.js';
import { saveFile, type OutputOptions } from '../formats/file.js';
import { exportActivation, sequentialSource, type OnnxAttribute } from './sequential.js';

const OPSET = 20;
/** The IR version that goes with opset 20 (ONNX 1.15). */
const IR_VERSION = 9;
const TENSOR_TYPE = { float32: 1, float64: 11 } as const;
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

function tensor(name: string, dims: number[], type: number, data: Float32Array | Float64Array): Message {
  const m = new Message();
  for (const d of dims) m.int(TENSOR.dims, d);
  return m
    .int(TENSOR.dataType, type)
    .string(TENSOR.name, name)
    .bytes(TENSOR.rawData, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
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
  let h = 'input';
  for (const p of params) {
    const last = p.layer === params.length;
    const steps = exportActivation(spec.activations[p.layer - 1]!, p.layer, spec.leakyReluSlope).onnx;
    const gemmOut = last && steps.length === 0 ? 'output' : `linear_${p.layer}`;
    graph.message(GRAPH.node, node('Gemm', [h, p.names.weight, p.names.bias], gemmOut, `gemm_${p.layer}`, { transB: { int: 1 } }));
    h = gemmOut;
    steps.forEach((st, i) => {
      const out = last && i === steps.length - 1 ? 'output' : `act_${p.layer}${steps.length > 1 ? `_${i}` : ''}`;
      graph.message(
        GRAPH.node,
        node(st.op, st.alsoInput ? [gemmOut, h] : [h], out, `${st.op.toLowerCase()}_${p.layer}${steps.length > 1 ? `_${i}` : ''}`, st.attributes),
      );
      h = out;
    });
  }
  for (const p of params) {
    graph.message(GRAPH.initializer, tensor(p.names.weight, [spec.layers[p.layer]!, spec.layers[p.layer - 1]!], type, p.weight));
    graph.message(GRAPH.initializer, tensor(p.names.bias, [spec.layers[p.layer]!], type, p.bias));
  }
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
