// rendezvous.ts: how the ranks of a multi-process job get rank 0's NCCL unique id: plain TCP
// on MASTER_ADDR:MASTER_PORT. Rank 0 listens, every other rank connects (retrying while rank 0
// is not up yet) and says who it is; once all WORLD_SIZE - 1 peers have, rank 0 sends each the
// 128-byte id and closes. One JSON line each way:
//   peer -> rank 0: {"magic":"nn-arena-rendezvous","version":1,"rank":r,"world":w}
//   rank 0 -> peer: {"ok":true,"id":"<base64>"} or {"ok":false,"code":"WORLD_MISMATCH","message":"..."}
// Every failure is an ArenaError with a code: RENDEZVOUS_TIMEOUT (names the ranks missing),
// PORT_BUSY, WORLD_MISMATCH, BAD_RANK (out of range or twice), PEER_LOST (a connection closed
// before the id went out), RENDEZVOUS_FAILED (any other socket error). A peer refused by rank 0
// fails with rank 0's code, and rank 0 tells every waiting peer why it gave up.
import net from 'node:net';
import { ArenaError, OptionError, type ArenaCode } from '../errors.js';

export const ID_BYTES = 128;
const MAGIC = 'nn-arena-rendezvous';
const VERSION = 1;
const MAX_LINE = 4096;

export interface RendezvousOptions {
  rank: number;
  world: number;
  /** MASTER_ADDR and MASTER_PORT. */
  addr: string;
  port: number;
  /** Rank 0: the id to hand out (128 bytes). Ignored on other ranks. */
  id?: Uint8Array;
  /** The whole exchange, in milliseconds (default 60,000). */
  timeoutMs?: number;
}

/** The longest timeout setTimeout keeps (a larger one fires at once). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** The options, checked: OptionError BAD_OPTION naming the field (rank, world, addr, port,
 *  timeoutMs). */
function checkOptions(o: RendezvousOptions): Required<Omit<RendezvousOptions, 'id'>> & { id?: Uint8Array } {
  if (o === null || typeof o !== 'object') throw new OptionError('BAD_OPTION', 'options', o, 'must be an object { rank, world, addr, port, id?, timeoutMs? }');
  const { rank, world, addr, port, id, timeoutMs = 60_000 } = o;
  const int = (field: string, v: unknown, min: number, max: number) => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) throw new OptionError('BAD_OPTION', field, v, `must be an integer in [${min}, ${max}]`);
    return v;
  };
  int('world', world, 1, 65536);
  int('rank', rank, 0, world - 1);
  int('timeoutMs', timeoutMs, 1, MAX_TIMEOUT_MS);
  if (world > 1) {
    if (typeof addr !== 'string' || addr.trim() === '') throw new OptionError('BAD_OPTION', 'addr', addr, 'must name the host of rank 0 (a host name or an IP address)');
    int('port', port, 1, 65535);
  }
  if (id !== undefined && !(id instanceof Uint8Array)) throw new OptionError('BAD_OPTION', 'id', id, 'must be a Uint8Array');
  return { rank, world, addr, port, id, timeoutMs };
}

/** Resolves with rank 0's id on every rank (rank 0: its own, once every peer has it). */
export function rendezvous(options: RendezvousOptions): Promise<Uint8Array> {
  const o = checkOptions(options);
  const timeoutMs = o.timeoutMs;
  if (o.world === 1) {
    if (!o.id) throw new ArenaError('BAD_ARGUMENT', 'a world of one needs no rendezvous, but rank 0 must have an id');
    return Promise.resolve(o.id);
  }
  if (o.rank === 0) {
    if (!o.id || o.id.length !== ID_BYTES) throw new ArenaError('BAD_ARGUMENT', `rank 0 must hand out an id of ${ID_BYTES} bytes`);
    return serve(o.id, o, timeoutMs);
  }
  return join(o, timeoutMs);
}

/** Reads one newline-terminated line from `socket` (at most MAX_LINE bytes): `fn` gets it, or
 *  undefined when the connection ends first or the line is longer. Nothing is kept after that:
 *  a peer that streams on (an overlong line) costs no memory while its socket closes. */
function onLine(socket: net.Socket, fn: (line: string | undefined) => void): void {
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
    socket.resume();  // what still arrives is read and dropped
    fn(line);
  };
  socket.setEncoding('utf8');
  socket.on('data', onData);
  socket.on('close', () => finish(undefined));
  socket.on('error', () => finish(undefined));
}

function serve(id: Uint8Array, o: RendezvousOptions, timeoutMs: number): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const peers = new Map<number, net.Socket>();
    const sockets = new Set<net.Socket>();
    let settled = false;
    const server = net.createServer();
    const stop = (error: ArenaError | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // Every socket closes, the peers' after the reply went out: nothing keeps the process alive.
      const reply = JSON.stringify({ ok: false, code: error?.code, message: error?.message }) + '\n';
      for (const s of sockets) {
        if (error && talkers.has(s)) s.end(reply, () => s.destroy());
        else s.destroy();
      }
      server.close();
      if (error) reject(error);
      else resolve(id);
    };
    const isPeer = (s: net.Socket) => [...peers.values()].includes(s);
    const talkers = new Set<net.Socket>();  // sockets that said hello in our protocol: told why it failed
    const missing = () => Array.from({ length: o.world - 1 }, (_, i) => i + 1).filter((r) => !peers.has(r));
    const timer = setTimeout(() => {
      const m = missing();
      stop(new ArenaError('RENDEZVOUS_TIMEOUT', `rendezvous on ${o.addr}:${o.port}: ${m.length} of ${o.world - 1} peers did not join within ${timeoutMs} ms (missing rank${m.length > 1 ? 's' : ''} ${m.slice(0, 16).join(', ')}${m.length > 16 ? ', …' : ''})`));
    }, timeoutMs);
    server.on('error', (e: NodeJS.ErrnoException) => {
      stop(e.code === 'EADDRINUSE'
        ? new ArenaError('PORT_BUSY', `rendezvous: MASTER_PORT ${o.port} on ${o.addr} is already in use (another job, or a rank 0 still running?)`)
        : new ArenaError('RENDEZVOUS_FAILED', `rendezvous: cannot listen on ${o.addr}:${o.port}: ${e.code ?? e.message}`));
    });
    server.on('connection', (socket) => {
      if (settled) { socket.destroy(); return; }
      sockets.add(socket);
      let rank: number | undefined;
      socket.on('close', () => {
        sockets.delete(socket);
        talkers.delete(socket);
        if (rank !== undefined && peers.get(rank) === socket && !settled) {
          stop(new ArenaError('PEER_LOST', `rendezvous: rank ${rank} disconnected before every rank had joined`));
        }
      });
      onLine(socket, (line) => {
        if (settled) return;
        // Not a hello (closed, overlong): dropped at once, the rendezvous goes on.
        if (line === undefined) { socket.destroy(); return; }
        let hello: { magic?: unknown; version?: unknown; rank?: unknown; world?: unknown };
        try { hello = JSON.parse(line); } catch { socket.destroy(); return; }
        // Not ours (a port scanner, another program): dropped, the rendezvous goes on.
        if (hello === null || typeof hello !== 'object' || hello.magic !== MAGIC) { socket.destroy(); return; }
        talkers.add(socket);
        if (hello.version !== VERSION) {
          stop(new ArenaError('WORLD_MISMATCH', `rendezvous: a peer speaks protocol version ${String(hello.version)}, rank 0 version ${VERSION} (mixed nn-arena versions)`));
          return;
        }
        if (hello.world !== o.world) {
          stop(new ArenaError('WORLD_MISMATCH', `rendezvous: rank ${String(hello.rank)} has WORLD_SIZE=${String(hello.world)}, rank 0 has WORLD_SIZE=${o.world}`));
          return;
        }
        const r = hello.rank;
        if (typeof r !== 'number' || !Number.isSafeInteger(r) || r < 1 || r >= o.world) {
          stop(new ArenaError('BAD_RANK', `rendezvous: a peer claims RANK=${String(r)}, outside [1, ${o.world - 1}]`));
          return;
        }
        if (peers.has(r)) {
          stop(new ArenaError('BAD_RANK', `rendezvous: two processes claim RANK=${r}`));
          return;
        }
        rank = r;
        peers.set(r, socket);
        if (peers.size === o.world - 1) {
          const reply = JSON.stringify({ ok: true, id: Buffer.from(id).toString('base64') }) + '\n';
          let left = peers.size;
          settled = true;
          clearTimeout(timer);
          for (const s of sockets) if (!isPeer(s)) s.destroy();  // connections that are not peers
          // Resolved once every peer's socket closed (the reply sent, or the socket failed).
          for (const s of peers.values()) {
            s.once('close', () => { if (--left === 0) { server.close(); resolve(id); } });
            s.end(reply, () => s.destroy());
          }
        }
      });
    });
    server.listen({ port: o.port, host: o.addr, exclusive: true });
  });
}

const RETRY: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOENT', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

function join(o: RendezvousOptions, timeoutMs: number): Promise<Uint8Array> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    let lastError = 'no answer';
    const attempt = () => {
      if (Date.now() >= deadline) {
        reject(new ArenaError('RENDEZVOUS_TIMEOUT', `rendezvous: rank ${o.rank} got no id from rank 0 at ${o.addr}:${o.port} within ${timeoutMs} ms (${lastError})`));
        return;
      }
      const socket = net.connect({ host: o.addr, port: o.port });
      let connected = false;
      let answered = false;
      const expired = new Error('rendezvous deadline');
      const timer = setTimeout(() => socket.destroy(expired), Math.max(1, deadline - Date.now()));
      socket.on('connect', () => {
        connected = true;
        socket.write(JSON.stringify({ magic: MAGIC, version: VERSION, rank: o.rank, world: o.world }) + '\n');
      });
      socket.on('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        if (answered) return;
        answered = true;
        if (e === expired) {
          reject(new ArenaError('RENDEZVOUS_TIMEOUT', `rendezvous: rank ${o.rank} got no id from rank 0 at ${o.addr}:${o.port} within ${timeoutMs} ms (${connected ? 'connected; rank 0 is waiting for other ranks' : lastError})`));
          return;
        }
        lastError = e.code ?? e.message;
        if (!connected && RETRY.has(e.code ?? '')) { setTimeout(attempt, 100); return; }
        reject(connected
          ? new ArenaError('PEER_LOST', `rendezvous: the connection to rank 0 at ${o.addr}:${o.port} failed: ${lastError}`)
          : new ArenaError('RENDEZVOUS_FAILED', `rendezvous: cannot reach rank 0 at ${o.addr}:${o.port}: ${lastError}`));
      });
      onLine(socket, (line) => {
        if (!connected || answered) return;
        clearTimeout(timer);
        answered = true;
        socket.destroy();
        if (line === undefined) {
          reject(new ArenaError('PEER_LOST', `rendezvous: rank 0 at ${o.addr}:${o.port} closed the connection before sending the id`));
          return;
        }
        let reply: { ok?: unknown; id?: unknown; code?: unknown; message?: unknown };
        try { reply = JSON.parse(line); } catch { reply = {}; }
        if (reply.ok === true && typeof reply.id === 'string') {
          const id = new Uint8Array(Buffer.from(reply.id, 'base64'));
          if (id.length === ID_BYTES) { resolve(id); return; }
        }
        const known = new Set<string>(['RENDEZVOUS_TIMEOUT', 'WORLD_MISMATCH', 'BAD_RANK', 'PEER_LOST', 'PORT_BUSY', 'RENDEZVOUS_FAILED']);
        const code = (typeof reply.code === 'string' && known.has(reply.code) ? reply.code : 'RENDEZVOUS_FAILED') as ArenaCode;
        reject(new ArenaError(code, typeof reply.message === 'string' ? `rank 0 refused rank ${o.rank}: ${reply.message}` : `rendezvous: rank 0 sent an answer that is not an id`));
      });
    };
    attempt();
  });
}
