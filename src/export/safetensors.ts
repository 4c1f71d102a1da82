// safetensors.ts: the weights and biases as a safetensors file (the format of Hugging Face's
// safetensors: an 8-byte little-endian header length, a JSON header naming every tensor's
// dtype, shape and byte range, then the tensors back to back), under PyTorch nn.Sequential's
// state_dict names (src/export/sequential.ts), and the way back into an arena.
import type { Arena } from '../arena/arena.js';
import { DataError, OptionError } from '../core/errors.js';
import { bytesOf, saveFile, type OutputOptions } from '../formats/file.js';
import { DTYPE_BYTES, type Dtype } from '../layout/header.js';
import { checkArena, layerParams, modelOf, paramsWritten, syncParamsToHost, type ModelOptions } from './params.js';
import { sequentialSource } from './sequential.js';

const DTYPE_NAME: Record<Dtype, string> = { float32: 'F32', float64: 'F64' };
const NAME_DTYPE: Record<string, Dtype> = { F32: 'float32', F64: 'float64' };
/** The reference implementation's limit on the JSON header. */
const MAX_HEADER = 100_000_000;

export interface SafetensorsTensor {
  dtype: 'F32' | 'F64';
  shape: number[];
  data: Float32Array | Float64Array;
}
export interface SafetensorsFile {
  tensors: Map<string, SafetensorsTensor>;
  metadata: Record<string, string>;
}

/** The safetensors bytes of model `options.model` of `arena`: `0.weight` [out, in], `0.bias`
 *  [out], `2.weight`, ... in the arena's dtype (F32 / F64), and metadata naming the network
 *  (`nn_arena.layers`, `nn_arena.activations`, `nn_arena.sequential`). */
export function toSafetensors(arena: Arena, options?: ModelOptions): Uint8Array {
  checkArena(arena);
  const model = modelOf(arena, options);
  syncParamsToHost(arena, 'toSafetensors');
  const spec = arena.plan.spec;
  const dtype = DTYPE_NAME[spec.dtype];
  const source = sequentialSource(spec); // a network with no export is refused before any byte is read
  const header: Record<string, unknown> = {
    __metadata__: {
      format: 'pt',
      nn_arena_layers: spec.layers.join(','),
      nn_arena_activations: spec.activations.join(','),
      nn_arena_sequential: source,
      ...(spec.ops ? { nn_arena_ops: JSON.stringify(spec.ops) } : {}),
    },
  };
  const parts: Uint8Array[] = [];
  let offset = 0;
  for (const p of layerParams(arena, model)) {
    for (const { name, view, shape } of p.tensors) {
      header[name] = { dtype, shape, data_offsets: [offset, offset + view.byteLength] };
      parts.push(new Uint8Array(view.buffer, view.byteOffset, view.byteLength));
      offset += view.byteLength;
    }
  }
  // The header is padded with spaces to 8 bytes, so every tensor starts aligned to its element.
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(Buffer.from(json, 'utf8'), 8);
  let at = 8 + json.length;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Writes toSafetensors(arena) to `path` (a new or regular file in an existing folder, not
 *  through a symbolic link unless `followLinks`: OptionError BAD_PATH, checked first); the bytes
 *  written. */
export function saveSafetensors(arena: Arena, path: string, options?: ModelOptions & OutputOptions): number {
  return saveFile(path, options, () => toSafetensors(arena, options));
}

const bad = (field: string, value: unknown, why: string) => new DataError('BAD_FILE', field, value, why);

/** Parses a safetensors file (F32 and F64 tensors), checking the header before any tensor is
 *  read: DataError BAD_FILE naming the part that is wrong. Tensors aligned in the buffer are
 *  views over it (no copy). */
export function readSafetensors(bytes: Uint8Array): SafetensorsFile {
  if (!(bytes instanceof Uint8Array)) throw new OptionError('BAD_OPTION', 'bytes', bytes, 'must be a Uint8Array');
  if (bytes.length < 8) throw bad('header size', bytes.length, 'the file is shorter than the 8-byte header size');
  const n = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getBigUint64(0, true);
  if (n > BigInt(Math.min(MAX_HEADER, bytes.length - 8)))
    throw bad('header size', n, `exceeds the ${bytes.length - 8} bytes after it (or the ${MAX_HEADER}-byte limit)`);
  const start = 8 + Number(n);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, start)));
  } catch (e) {
    throw bad('header', `${Number(n)} bytes`, `is not UTF-8 JSON (${(e as Error).message})`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) throw bad('header', header, 'must be a JSON object');
  const dataBytes = bytes.length - start;
  const tensors = new Map<string, SafetensorsTensor>();
  let metadata: Record<string, string> = {};
  const ranges: Array<[number, number, string]> = [];
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') {
      if (entry === null || typeof entry !== 'object' || Array.isArray(entry) || Object.values(entry).some((v) => typeof v !== 'string'))
        throw bad('__metadata__', entry, 'must map strings to strings');
      metadata = entry as Record<string, string>;
      continue;
    }
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) throw bad(name, entry, 'must be an object { dtype, shape, data_offsets }');
    const { dtype, shape, data_offsets: offsets } = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof dtype !== 'string' || !Object.hasOwn(NAME_DTYPE, dtype)) throw bad(`${name}.dtype`, dtype, "is not supported (nn-arena reads 'F32' and 'F64')");
    if (!Array.isArray(shape) || shape.some((d) => !Number.isSafeInteger(d) || d < 0))
      throw bad(`${name}.shape`, shape, 'must be an array of non-negative integers');
    if (
      !Array.isArray(offsets) ||
      offsets.length !== 2 ||
      offsets.some((o) => !Number.isSafeInteger(o) || o < 0) ||
      offsets[0] > offsets[1] ||
      offsets[1] > dataBytes
    ) {
      throw bad(`${name}.data_offsets`, offsets, `must be [begin, end] with 0 <= begin <= end <= ${dataBytes} (the data bytes)`);
    }
    const elem = DTYPE_BYTES[NAME_DTYPE[dtype]!];
    const count = (shape as number[]).reduce((a, d) => a * d, 1);
    const [b, e] = offsets as [number, number];
    if (count * elem !== e - b)
      throw bad(`${name}.data_offsets`, offsets, `span ${e - b} bytes; shape [${shape.join(', ')}] of ${dtype} takes ${count * elem}`);
    ranges.push([b, e, name]);
    const at = bytes.byteOffset + start + b;
    const Ctor = elem === 4 ? Float32Array : Float64Array;
    const data = at % elem === 0 ? new Ctor(bytes.buffer as ArrayBuffer, at, count) : new Ctor(new Uint8Array(bytes.subarray(start + b, start + e)).buffer);
    tensors.set(name, { dtype: dtype as 'F32' | 'F64', shape: shape as number[], data });
  }
  // As the reference implementation requires: the tensors tile the data bytes, no gap, no overlap.
  ranges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let end = 0;
  for (const [b, e, name] of ranges) {
    if (b !== end) throw bad(`${name}.data_offsets`, [b, e], b < end ? 'overlap another tensor' : `leave bytes ${end}..${b} unused`);
    end = e;
  }
  if (end !== dataBytes) throw bad('data', dataBytes, `holds ${dataBytes - end} bytes after the last tensor`);
  return { tensors, metadata };
}

/** Reads weights and biases from a safetensors file (a path or its bytes) written under
 *  nn.Sequential's names (src/export/sequential.ts) into model `options.model` of `arena`: every
 *  tensor's name and shape is checked before anything is written (DataError BAD_TENSOR naming it),
 *  F32 and F64 are both read (converted to the arena's dtype). The device gets w and b (BUSY while
 *  a run is queued or in flight); optimizer state is left as it is. */
export function loadSafetensors(arena: Arena, source: string | Uint8Array, options?: ModelOptions): void {
  checkArena(arena);
  const model = modelOf(arena, options);
  const bytes = bytesOf(source);
  const file = readSafetensors(bytes);
  const spec = arena.plan.spec;
  const params = layerParams(arena, model);
  const expected = new Map<string, number[]>();
  for (const p of params) for (const t of p.tensors) expected.set(t.name, t.shape);
  for (const [name, shape] of expected) {
    const t = file.tensors.get(name);
    if (!t) throw new DataError('BAD_TENSOR', name, undefined, `is missing: this ${spec.layers.join('-')} network needs ${[...expected.keys()].join(', ')}`);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i]))
      throw new DataError('BAD_TENSOR', `${name}.shape`, t.shape, `must be [${shape.join(', ')}] for the ${spec.layers.join('-')} network`);
  }
  for (const name of file.tensors.keys()) {
    if (!expected.has(name))
      throw new DataError(
        'BAD_TENSOR',
        name,
        file.tensors.get(name)!.shape,
        `is not a tensor of the ${spec.layers.join('-')} network (${[...expected.keys()].join(', ')})`,
      );
  }
  for (const [name, t] of file.tensors) {
    const f32 = spec.dtype === 'float32';
    for (let i = 0; i < t.data.length; i++) {
      const v = t.data[i]!;
      if (!Number.isFinite(f32 ? Math.fround(v) : v)) throw new DataError('BAD_TENSOR', `${name}[${i}]`, v, `is not a finite ${spec.dtype} number`);
    }
  }
  syncParamsToHost(arena, 'loadSafetensors');
  for (const p of params) for (const t of p.tensors) t.view.set(file.tensors.get(t.name)!.data);
  paramsWritten(arena);
}
