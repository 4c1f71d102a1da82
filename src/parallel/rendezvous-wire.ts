// rendezvous-wire.ts: what both sides of the rendezvous (rendezvous.ts: rank 0; rendezvous-join.ts:
// the other ranks) speak: the JSON lines, the checked options, and the job secret's proofs.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type net from 'node:net';
import { OptionError } from '../core/errors.js';

export const ID_BYTES = 128;
export const MAGIC = 'nn-arena-rendezvous';
export const VERSION = 1;
export const MAX_LINE = 4096;
/** Domain separation of the proofs: another protocol's HMAC with the same secret never fits. */
export const TAG = 'nn-arena-rendezvous/1/hmac-sha256';
export const NONCE_BYTES = 32;
/** A shorter secret could be guessed offline from one recorded exchange (nonces and proofs). */
export const MIN_SECRET_BYTES = 16;

export interface Checked {
  rank: number;
  world: number;
  addr: string;
  port: number;
  id?: Uint8Array;
  timeoutMs: number;
  /** The secret as bytes; undefined: the unauthenticated exchange. */
  key?: Buffer;
}

/** The secret as bytes; OptionError BAD_OPTION naming `secret` (its value is never echoed). */
export function secretKey(secret: unknown): Buffer | undefined {
  if (secret === undefined) return undefined;
  if (typeof secret !== 'string' && !(secret instanceof Uint8Array))
    throw new OptionError('BAD_OPTION', 'secret', `(a ${secret === null ? 'null' : typeof secret})`, 'must be a string or a Uint8Array');
  const key = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : Buffer.from(secret);
  if (key.length < MIN_SECRET_BYTES)
    throw new OptionError(
      'BAD_OPTION',
      'secret',
      `(hidden, ${key.length} bytes)`,
      `must hold at least ${MIN_SECRET_BYTES} bytes (e.g. 32 random bytes from the launcher)`,
    );
  return key;
}

/** HMAC-SHA256 of the exchange: rank and world as 32-bit integers, every field fixed-size. */
export function proof(key: Buffer, role: 'rank0' | 'peer', peerNonce: Buffer, rootNonce: Buffer, rank: number, world: number): Buffer {
  const ints = Buffer.alloc(8);
  ints.writeUInt32BE(rank, 0);
  ints.writeUInt32BE(world, 4);
  return createHmac('sha256', key).update(`${TAG}\0${role}\0`).update(peerNonce).update(rootNonce).update(ints).digest();
}

/** Whether `got` (base64 from the wire) is `expected`, compared in constant time. */
export function proofMatches(expected: Buffer, got: unknown): boolean {
  if (typeof got !== 'string' || got.length > 64) return false;
  const bytes = Buffer.from(got, 'base64');
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

/** A nonce from the wire: exactly NONCE_BYTES, else undefined. */
export function nonceOf(v: unknown): Buffer | undefined {
  if (typeof v !== 'string' || v.length > 64) return undefined;
  const b = Buffer.from(v, 'base64');
  return b.length === NONCE_BYTES ? b : undefined;
}

export interface Hello {
  magic?: unknown;
  version?: unknown;
  rank?: unknown;
  world?: unknown;
  nonce?: unknown;
}

export const isUint32 = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= 0xffffffff;

/** Reads one newline-terminated line from `socket` (at most MAX_LINE bytes): `fn` gets it, or
 *  undefined when the connection ends first or the line is longer. Nothing is kept after that:
 *  a peer that streams on (an overlong line) costs no memory while its socket closes. */
export function onLine(socket: net.Socket, fn: (line: string | undefined) => void): void {
  let buf = '';
  let done = false;
  const onData = (chunk: string) => {
    buf += chunk;
    const nl = buf.indexOf('\n');
    if (nl >= 0 && nl <= MAX_LINE) finish(buf.slice(0, nl));
    else if (buf.length > MAX_LINE) finish(undefined);
  };
  const finish = (line: string | undefined) => {
    if (done) return;
    done = true;
    buf = '';
    socket.off('data', onData);
    socket.resume(); // what still arrives is read and dropped
    fn(line);
  };
  socket.setEncoding('utf8');
  socket.on('data', onData);
  socket.on('close', () => finish(undefined));
  socket.on('error', () => finish(undefined));
}
