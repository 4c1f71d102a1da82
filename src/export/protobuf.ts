// protobuf.ts: the few protocol-buffer encodings an ONNX model needs (varints, length-delimited
// fields, packed-free repeated fields), so that writing ONNX takes no runtime dependency. A
// message is a list of byte chunks and their total length: nesting wraps chunks without
// copying them (a tensor's raw data is copied once, into the file's buffer, by `bytesOf`).

export class Message {
  readonly parts: Uint8Array[] = [];
  length = 0;

  #push(b: Uint8Array): this {
    this.parts.push(b);
    this.length += b.length;
    return this;
  }

  #tag(field: number, wire: number): this {
    return this.#push(varint(field * 8 + wire));
  }

  /** A varint field (int32, int64, enum, bool); `v` a non-negative safe integer. */
  int(field: number, v: number): this {
    return this.#tag(field, 0).#push(varint(v));
  }

  /** A 32-bit float field (fixed32). */
  float(field: number, v: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    return this.#tag(field, 5).#push(b);
  }

  string(field: number, s: string): this {
    return this.bytes(field, Buffer.from(s, 'utf8'));
  }

  /** A length-delimited field of raw bytes (kept by reference until bytesOf). */
  bytes(field: number, b: Uint8Array): this {
    return this.#tag(field, 2).#push(varint(b.length)).#push(b);
  }

  /** A nested message. */
  message(field: number, m: Message): this {
    this.#tag(field, 2).#push(varint(m.length));
    for (const p of m.parts) this.#push(p);
    return this;
  }
}

/** Base-128 varint of a non-negative safe integer. */
export function varint(v: number): Uint8Array {
  if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`varint: ${v} is not a non-negative safe integer`);
  const out: number[] = [];
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return Uint8Array.from(out);
}

/** The encoded message in one buffer. */
export function bytesOf(m: Message): Uint8Array {
  const out = new Uint8Array(m.length);
  let at = 0;
  for (const p of m.parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
