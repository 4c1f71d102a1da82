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
//
// With a job secret (issue 51) the id goes only to peers that prove they hold it, and rank 0
// proves it too, so that a process on MASTER_PORT without the secret cannot hand out an id:
//   peer -> rank 0: the hello above plus "nonce":"<32 random bytes, base64>"
//   rank 0 -> peer: {"challenge":"<32 random bytes>","proof":"<HMAC rank0>"}; the peer checks it
//   peer -> rank 0: {"proof":"<HMAC peer>"}; rank 0 checks it, then answers as above
// where HMAC role = HMAC-SHA256(secret, TAG, role, peer's nonce, rank 0's nonce, rank, world).
// Both nonces are fresh, so a recorded exchange cannot be replayed, and the role keeps rank 0's
// proof from serving as a peer's. A peer that fails the proof is told RENDEZVOUS_AUTH and
// dropped: the job goes on (it would be a denial of service otherwise), and the checks that end
// it (WORLD_MISMATCH, BAD_RANK) run only on proven peers. A joiner that rank 0 does not prove
// itself to fails with RENDEZVOUS_AUTH and never reads an id from it.
// Without a secret the exchange is the one above, unchanged: allowed on a loopback addr (one
// host), refused elsewhere unless allowUnauthenticated.
// Here: the options and rank 0's side (serve); the other ranks' side is rendezvous-join.ts,
// the lines and proofs both speak rendezvous-wire.ts.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { ArenaError, OptionError } from '../core/errors.js';
import { join } from './rendezvous-join.js';
import {
  ID_BYTES,
  MAGIC,
  NONCE_BYTES,
  VERSION,
  isUint32,
  nonceOf,
  onLine,
  proof,
  proofMatches,
  secretKey,
  type Checked,
  type Hello,
} from './rendezvous-wire.js';

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
  /** The job's secret, the same on every rank (at least 16 bytes; a string counts as UTF-8).
   *  Peers and rank 0 prove they hold it before the id is handed out. */
  secret?: string | Uint8Array;
  /** Without a secret, a job on a non-loopback addr is refused unless this is true. */
  allowUnauthenticated?: boolean;
}

/** Warned once per process: the warning is about the setup, not about each call. */
let warnedUnauthenticated = false;

/** Whether `addr` names this host only: then only local processes can reach the rendezvous. */
function isLoopback(addr: string): boolean {
  const a = addr
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1');
  if (a === 'localhost' || a === '::1') return true;
  const v4 = a.startsWith('::ffff:') ? a.slice(7) : a;
  return net.isIPv4(v4) && v4.startsWith('127.');
}

/** The longest timeout setTimeout keeps (a larger one fires at once). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** The options, checked: OptionError BAD_OPTION naming the field (rank, world, addr, port,
 *  timeoutMs, secret, allowUnauthenticated). */
function checkOptions(o: RendezvousOptions): Checked {
  if (o === null || typeof o !== 'object')
    throw new OptionError('BAD_OPTION', 'options', o, 'must be an object { rank, world, addr, port, id?, timeoutMs?, secret?, allowUnauthenticated? }');
  const { rank, world, addr, port, id, timeoutMs = 60_000, allowUnauthenticated = false } = o;
  const int = (field: string, v: unknown, min: number, max: number) => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max)
      throw new OptionError('BAD_OPTION', field, v, `must be an integer in [${min}, ${max}]`);
    return v;
  };
  int('world', world, 1, 65536);
  int('rank', rank, 0, world - 1);
  int('timeoutMs', timeoutMs, 1, MAX_TIMEOUT_MS);
  if (world > 1) {
    if (typeof addr !== 'string' || addr.trim() === '')
      throw new OptionError('BAD_OPTION', 'addr', addr, 'must name the host of rank 0 (a host name or an IP address)');
    int('port', port, 1, 65535);
  }
  if (id !== undefined && !(id instanceof Uint8Array)) throw new OptionError('BAD_OPTION', 'id', id, 'must be a Uint8Array');
  if (typeof allowUnauthenticated !== 'boolean') throw new OptionError('BAD_OPTION', 'allowUnauthenticated', allowUnauthenticated, 'must be a boolean');
  const key = secretKey(o.secret);
  if (world > 1 && key === undefined && !isLoopback(addr)) {
    // Anyone who reaches addr:port could take a rank's place or hand out an id of its own.
    if (!allowUnauthenticated)
      throw new OptionError(
        'BAD_OPTION',
        'secret',
        undefined,
        `must be set (or NN_ARENA_JOB_SECRET) for a rendezvous on ${addr}, which is not a loopback address: without it any process that reaches MASTER_PORT can join or impersonate rank 0 (allowUnauthenticated: true accepts that risk)`,
      );
    if (!warnedUnauthenticated) {
      warnedUnauthenticated = true;
      process.stderr.write(
        `nn-arena: warning: unauthenticated rendezvous on ${addr}:${port} (no job secret; allowUnauthenticated): any process that reaches it can join or impersonate rank 0\n`,
      );
    }
  }
  return { rank, world, addr, port, id, timeoutMs, key };
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

function serve(id: Uint8Array, o: Checked, timeoutMs: number): Promise<Uint8Array> {
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
    // Sockets that said hello in our protocol (with a secret: proven peers only): told why it failed.
    const talkers = new Set<net.Socket>();
    const missing = () => Array.from({ length: o.world - 1 }, (_, i) => i + 1).filter((r) => !peers.has(r));
    const timer = setTimeout(() => {
      const m = missing();
      stop(
        new ArenaError(
          'RENDEZVOUS_TIMEOUT',
          `rendezvous on ${o.addr}:${o.port}: ${m.length} of ${o.world - 1} peers did not join within ${timeoutMs} ms (missing rank${m.length > 1 ? 's' : ''} ${m.slice(0, 16).join(', ')}${m.length > 16 ? ', …' : ''})`,
        ),
      );
    }, timeoutMs);
    server.on('error', (e: NodeJS.ErrnoException) => {
      stop(
        e.code === 'EADDRINUSE'
          ? new ArenaError('PORT_BUSY', `rendezvous: MASTER_PORT ${o.port} on ${o.addr} is already in use (another job, or a rank 0 still running?)`)
          : new ArenaError('RENDEZVOUS_FAILED', `rendezvous: cannot listen on ${o.addr}:${o.port}: ${e.code ?? e.message}`),
      );
    });
    server.on('connection', (socket) => {
      if (settled) {
        socket.destroy();
        return;
      }
      sockets.add(socket);
      let rank: number | undefined;
      socket.on('close', () => {
        sockets.delete(socket);
        talkers.delete(socket);
        if (rank !== undefined && peers.get(rank) === socket && !settled) {
          stop(new ArenaError('PEER_LOST', `rendezvous: rank ${rank} disconnected before every rank had joined`));
        }
      });
      // A peer that fails the proof: told why, dropped; the rendezvous goes on without it.
      const refuse = (message: string) => {
        socket.end(JSON.stringify({ ok: false, code: 'RENDEZVOUS_AUTH', message }) + '\n', () => socket.destroy());
      };
      onLine(socket, (line) => {
        if (settled) return;
        // Not a hello (closed, overlong): dropped at once, the rendezvous goes on.
        if (line === undefined) {
          socket.destroy();
          return;
        }
        let hello: Hello;
        try {
          hello = JSON.parse(line);
        } catch {
          socket.destroy();
          return;
        }
        // Not ours (a port scanner, another program): dropped, the rendezvous goes on.
        if (hello === null || typeof hello !== 'object' || hello.magic !== MAGIC) {
          socket.destroy();
          return;
        }
        const key = o.key;
        if (key === undefined) {
          talkers.add(socket);
          // The ranks were given different settings: every rank must have the secret or none.
          if (hello.nonce !== undefined) {
            stop(
              new ArenaError(
                'RENDEZVOUS_AUTH',
                `rendezvous: rank ${String(hello.rank)} has a job secret, rank 0 has none (set the same secret or NN_ARENA_JOB_SECRET on every rank)`,
              ),
            );
            return;
          }
          admit(hello);
          return;
        }
        const peerNonce = nonceOf(hello.nonce);
        if (peerNonce === undefined || !isUint32(hello.rank) || !isUint32(hello.world)) {
          refuse('rank 0 requires the job secret (set the same secret or NN_ARENA_JOB_SECRET on every rank)');
          return;
        }
        const { rank: r, world: w } = hello;
        const rootNonce = randomBytes(NONCE_BYTES);
        socket.write(
          JSON.stringify({ challenge: rootNonce.toString('base64'), proof: proof(key, 'rank0', peerNonce, rootNonce, r, w).toString('base64') }) + '\n',
        );
        onLine(socket, (answer) => {
          if (settled) return;
          if (answer === undefined) {
            socket.destroy();
            return;
          }
          let reply: { proof?: unknown } | null;
          try {
            reply = JSON.parse(answer);
          } catch {
            reply = null;
          }
          if (reply === null || typeof reply !== 'object' || !proofMatches(proof(key, 'peer', peerNonce, rootNonce, r, w), reply.proof)) {
            refuse('the proof of the job secret is wrong (another secret, or not a rank of this job)');
            return;
          }
          talkers.add(socket);
          admit(hello);
        });
      });
      /** A peer that may take part (proven, or no secret): the checks that end the job, then its rank. */
      const admit = (hello: Hello) => {
        if (hello.version !== VERSION) {
          stop(
            new ArenaError(
              'WORLD_MISMATCH',
              `rendezvous: a peer speaks protocol version ${String(hello.version)}, rank 0 version ${VERSION} (mixed nn-arena versions)`,
            ),
          );
          return;
        }
        if (hello.world !== o.world) {
          stop(
            new ArenaError('WORLD_MISMATCH', `rendezvous: rank ${String(hello.rank)} has WORLD_SIZE=${String(hello.world)}, rank 0 has WORLD_SIZE=${o.world}`),
          );
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
          for (const s of sockets) if (!isPeer(s)) s.destroy(); // connections that are not peers
          // Resolved once every peer's socket closed (the reply sent, or the socket failed).
          for (const s of peers.values()) {
            s.once('close', () => {
              if (--left === 0) {
                server.close();
                resolve(id);
              }
            });
            s.end(reply, () => s.destroy());
          }
        }
      };
    });
    server.listen({ port: o.port, host: o.addr, exclusive: true });
  });
}
