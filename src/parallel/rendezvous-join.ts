// rendezvous-join.ts: a rank other than 0 joins the rendezvous (rendezvous.ts): it connects,
// retrying while rank 0 is not up yet, says who it is, proves the job secret where there is one,
// and reads the id.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { ArenaError, type ArenaCode } from '../core/errors.js';
import { ID_BYTES, MAGIC, NONCE_BYTES, VERSION, nonceOf, onLine, proof, proofMatches, type Checked } from './rendezvous-wire.js';

const RETRY: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOENT', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

export function join(o: Checked, timeoutMs: number): Promise<Uint8Array> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    let lastError = 'no answer';
    const attempt = () => {
      if (Date.now() >= deadline) {
        reject(
          new ArenaError('RENDEZVOUS_TIMEOUT', `rendezvous: rank ${o.rank} got no id from rank 0 at ${o.addr}:${o.port} within ${timeoutMs} ms (${lastError})`),
        );
        return;
      }
      const socket = net.connect({ host: o.addr, port: o.port });
      let connected = false;
      let answered = false;
      const expired = new Error('rendezvous deadline');
      const timer = setTimeout(() => socket.destroy(expired), Math.max(1, deadline - Date.now()));
      // Fresh for each connection: rank 0's proof over it cannot be one recorded earlier.
      const peerNonce = o.key === undefined ? undefined : randomBytes(NONCE_BYTES);
      socket.on('connect', () => {
        connected = true;
        socket.write(
          JSON.stringify({ magic: MAGIC, version: VERSION, rank: o.rank, world: o.world, ...(peerNonce ? { nonce: peerNonce.toString('base64') } : {}) }) +
            '\n',
        );
      });
      socket.on('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        if (answered) return;
        answered = true;
        if (e === expired) {
          reject(
            new ArenaError(
              'RENDEZVOUS_TIMEOUT',
              `rendezvous: rank ${o.rank} got no id from rank 0 at ${o.addr}:${o.port} within ${timeoutMs} ms (${connected ? 'connected; rank 0 is waiting for other ranks' : lastError})`,
            ),
          );
          return;
        }
        lastError = e.code ?? e.message;
        if (!connected && RETRY.has(e.code ?? '')) {
          setTimeout(attempt, 100);
          return;
        }
        reject(
          connected
            ? new ArenaError('PEER_LOST', `rendezvous: the connection to rank 0 at ${o.addr}:${o.port} failed: ${lastError}`)
            : new ArenaError('RENDEZVOUS_FAILED', `rendezvous: cannot reach rank 0 at ${o.addr}:${o.port}: ${lastError}`),
        );
      });
      const fail = (error: ArenaError) => {
        clearTimeout(timer);
        answered = true;
        socket.destroy();
        reject(error);
      };
      /** Rank 0's last line: the id, or why it refused this rank. */
      const settle = (line: string | undefined) => {
        if (!connected || answered) return;
        clearTimeout(timer);
        answered = true;
        socket.destroy();
        if (line === undefined) {
          reject(new ArenaError('PEER_LOST', `rendezvous: rank 0 at ${o.addr}:${o.port} closed the connection before sending the id`));
          return;
        }
        let reply: { ok?: unknown; id?: unknown; code?: unknown; message?: unknown };
        try {
          reply = JSON.parse(line);
        } catch {
          reply = {};
        }
        if (reply.ok === true && typeof reply.id === 'string') {
          const id = new Uint8Array(Buffer.from(reply.id, 'base64'));
          if (id.length === ID_BYTES) {
            resolve(id);
            return;
          }
        }
        const known = new Set<string>(['RENDEZVOUS_TIMEOUT', 'WORLD_MISMATCH', 'BAD_RANK', 'PEER_LOST', 'PORT_BUSY', 'RENDEZVOUS_FAILED', 'RENDEZVOUS_AUTH']);
        const code = (typeof reply.code === 'string' && known.has(reply.code) ? reply.code : 'RENDEZVOUS_FAILED') as ArenaCode;
        reject(
          new ArenaError(
            code,
            typeof reply.message === 'string' ? `rank 0 refused rank ${o.rank}: ${reply.message}` : `rendezvous: rank 0 sent an answer that is not an id`,
          ),
        );
      };
      onLine(socket, (line) => {
        const key = o.key;
        if (key === undefined || peerNonce === undefined) {
          settle(line);
          return;
        }
        if (!connected || answered) return;
        if (line === undefined) {
          settle(undefined);
          return;
        }
        // Rank 0 proves the secret before this rank does or reads an id: whoever answers on
        // MASTER_PORT without it (a squatter, a rank 0 with another secret) is refused.
        let challenge: { challenge?: unknown; proof?: unknown } | null;
        try {
          challenge = JSON.parse(line);
        } catch {
          challenge = null;
        }
        const rootNonce = challenge !== null && typeof challenge === 'object' ? nonceOf(challenge.challenge) : undefined;
        if (challenge === null || rootNonce === undefined) {
          fail(
            new ArenaError(
              'RENDEZVOUS_AUTH',
              `rendezvous: rank ${o.rank}: the process on ${o.addr}:${o.port} did not prove the job secret (rank 0 has no secret, or another process holds MASTER_PORT); its answer was refused`,
            ),
          );
          return;
        }
        if (!proofMatches(proof(key, 'rank0', peerNonce, rootNonce, o.rank, o.world), challenge.proof)) {
          fail(
            new ArenaError(
              'RENDEZVOUS_AUTH',
              `rendezvous: rank ${o.rank}: the process on ${o.addr}:${o.port} proved another secret (the ranks were given different secrets, or another process holds MASTER_PORT); its answer was refused`,
            ),
          );
          return;
        }
        socket.write(JSON.stringify({ proof: proof(key, 'peer', peerNonce, rootNonce, o.rank, o.world).toString('base64') }) + '\n');
        onLine(socket, settle);
      });
    };
    attempt();
  });
}
