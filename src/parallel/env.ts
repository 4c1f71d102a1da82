// env.ts: the process's place in a multi-process data-parallel job, from the environment
// variables launchers set (torchrun, mpirun wrappers, Slurm scripts): RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT, and NN_ARENA_JOB_SECRET (the rendezvous's per-job
// secret, which the launcher hands every rank). The only place nn-arena reads them.
import { OptionError } from '../core/errors.js';
import { MIN_SECRET_BYTES } from './rendezvous-wire.js';

export interface ParallelEnv {
  /** This process's rank in [0, world). */
  rank: number;
  world: number;
  /** The CUDA device of this process (LOCAL_RANK; RANK when unset). */
  localRank: number;
  /** Where rank 0 serves the NCCL unique id (only needed when world > 1). */
  masterAddr: string;
  masterPort: number;
  /** NN_ARENA_JOB_SECRET, when set (absent otherwise): the rendezvous's secret. */
  secret?: string;
}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, min: number, max: number, what: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const v = /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(v) || v < min || v > max) throw new OptionError('BAD_ENV', name, raw, `must be ${what}`);
  return v;
}

/** Reads and checks the variables; OptionError BAD_ENV names the first one missing or wrong. */
export function readParallelEnv(env: Env = process.env): ParallelEnv {
  if (env === null || typeof env !== 'object') throw new OptionError('BAD_OPTION', 'env', env, 'must be an object of environment variables');
  const world = integer(env, 'WORLD_SIZE', 1, 65536, 'an integer in [1, 65536]');
  if (world === undefined) throw new OptionError('BAD_ENV', 'WORLD_SIZE', env.WORLD_SIZE, 'must be set to the number of processes (ranks) of the job');
  const rank = integer(env, 'RANK', 0, world - 1, `an integer in [0, WORLD_SIZE - 1 = ${world - 1}]`);
  if (rank === undefined) throw new OptionError('BAD_ENV', 'RANK', env.RANK, "must be set to this process's rank");
  const localRank = integer(env, 'LOCAL_RANK', 0, 1023, 'a CUDA device index (an integer in [0, 1023])') ?? rank;
  const masterAddr = env.MASTER_ADDR ?? '';
  const masterPort = integer(env, 'MASTER_PORT', 1, 65535, 'a TCP port in [1, 65535]');
  if (world > 1) {
    if (masterAddr.trim() === '')
      throw new OptionError('BAD_ENV', 'MASTER_ADDR', env.MASTER_ADDR, 'must name the host of rank 0 (a host name or an IP address)');
    if (masterPort === undefined) throw new OptionError('BAD_ENV', 'MASTER_PORT', env.MASTER_PORT, 'must be set to a free TCP port on the host of rank 0');
  }
  // Empty counts as unset, as for the other variables; a short one is refused here, naming the
  // variable (its value is never echoed).
  const secret = env.NN_ARENA_JOB_SECRET;
  if (secret !== undefined && secret !== '' && Buffer.byteLength(secret, 'utf8') < MIN_SECRET_BYTES) {
    throw new OptionError(
      'BAD_ENV',
      'NN_ARENA_JOB_SECRET',
      `(hidden, ${Buffer.byteLength(secret, 'utf8')} bytes)`,
      `must hold at least ${MIN_SECRET_BYTES} bytes (e.g. 32 random bytes in hex from the launcher)`,
    );
  }
  return { rank, world, localRank, masterAddr: masterAddr.trim(), masterPort: masterPort ?? 0, ...(secret ? { secret } : {}) };
}
