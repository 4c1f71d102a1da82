// data-parallel.ts: one plan on several GPUs, trained as one network. Each replica is an
// ordinary Arena (one per device) holding the same weights; a step splits the global batch
// across them (replica r takes rows [r * batch, (r + 1) * batch)), and after the backward pass
// NCCL all-reduces the gradients, which the contiguous arena keeps in as few ranges as the order
// allows (kind-major: one; layer-major: one per layer, overlapped with the backward of the
// layers below): every replica then takes the same optimizer step and stays bit-identical.
//
//   DataParallel.create(plan, { devices: [0, 1] })   every replica in this process
//   await DataParallel.join(plan)                    one replica per process: RANK, WORLD_SIZE,
//                                                    LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//
// A group of one (one device, or WORLD_SIZE=1) is a pass-through: no NCCL, any backend.
import { Arena, handleOf, runArena, type BackendName } from '../arena/arena.js';
import { registerRunTarget } from '../arena/run-target.js';
import { ArenaError, fromNative, OptionError } from '../core/errors.js';
import type { Dtype } from '../layout/header.js';
import { requirePlan, type Plan } from '../layout/plan.js';
import { call, cudaInfo, native, type GradientWire, type NcclInfo, type RunParams, type RunPath } from '../native/addon.js';
import { checkKnownKeys, keysOf } from '../core/known-keys.js';
import { readParallelEnv } from './env.js';
import { rendezvous } from './rendezvous.js';

export interface DataParallelOptions {
  /** The CUDA devices of the replicas in this process, one replica each (distinct indices). */
  devices: readonly number[];
  /** 'auto' (default) or 'cuda'; 'cpu' only for a group of one (a pass-through). */
  backend?: 'auto' | BackendName;
  /** Page-locked host memory for every replica (default true). */
  pinned?: boolean;
  /** What crosses the link: 'full' (default: the arena's dtype) or 'bf16' (float32 plans: each
   *  range rounded to bfloat16, summed by NCCL, widened back; half the bytes, gradients with
   *  bf16's 8 bits of mantissa, as PyTorch DDP's bf16 compression hook). */
  gradients?: GradientWire;
}

export interface JoinOptions {
  /** The environment to read RANK etc. from (default process.env). */
  env?: Record<string, string | undefined>;
  /** The rendezvous with the other ranks, in milliseconds (default 60,000). */
  timeoutMs?: number;
  /** The job's secret, the same on every rank (default: NN_ARENA_JOB_SECRET): only ranks that
   *  prove it get the NCCL id, and rank 0 must prove it to them. Required unless MASTER_ADDR is
   *  a loopback address or `allowUnauthenticated` is true. */
  secret?: string | Uint8Array;
  /** Run a rendezvous on a non-loopback MASTER_ADDR without a secret (warns once). */
  allowUnauthenticated?: boolean;
  backend?: 'auto' | BackendName;
  pinned?: boolean;
  /** As DataParallelOptions.gradients: the same on every rank. */
  gradients?: GradientWire;
}

const CREATE_KEYS = keysOf<DataParallelOptions>()(['devices', 'backend', 'pinned', 'gradients']);
const JOIN_KEYS = keysOf<JoinOptions>()(['env', 'timeoutMs', 'secret', 'allowUnauthenticated', 'backend', 'pinned', 'gradients']);

/** The group's wire, checked against the plan: 'bf16' rounds float32 gradients only. */
function wireOf(plan: Plan, gradients: unknown): GradientWire {
  if (gradients === undefined || gradients === 'full') return 'full';
  if (gradients !== 'bf16') throw new OptionError('BAD_OPTION', 'gradients', gradients, "must be 'full' or 'bf16'");
  const dtype = requirePlan(plan).spec.dtype;
  if (dtype !== 'float32') throw new OptionError('BAD_OPTION', 'gradients', gradients, `'bf16' on the wire needs a float32 plan (this one is ${dtype})`);
  return 'bf16';
}

/** Whether NCCL was found (libnccl.so.2), its version, and why not. */
export function ncclInfo(): NcclInfo {
  return call(() => native().ncclInfo());
}

function requireNccl(): void {
  const n = ncclInfo();
  if (!n.available) throw new ArenaError('NCCL_UNAVAILABLE', `data parallelism over several GPUs needs NCCL: ${n.why}`);
}

/** The plans a group trains, refused before any arena or communicator exists by the native rule
 *  of a reduce run (csrc/train/check.cc checkGroup: one model, not compact). */
function requireGroupPlan(plan: Plan): void {
  call(() => native().checkGroup(requirePlan(plan).header));
}

export class DataParallel<D extends Dtype = Dtype> implements Disposable, AsyncDisposable {
  readonly plan: Plan<D>;
  /** This process's replicas: one per device (in-process), or this rank's one. */
  readonly replicas: readonly Arena<D>[];
  /** The global rank of replicas[0] (0 in one process). */
  readonly rank: number;
  /** Replicas in the whole group. */
  readonly world: number;
  #disposed = false;

  private constructor(plan: Plan<D>, replicas: Arena<D>[], rank: number, world: number) {
    this.plan = plan;
    this.replicas = Object.freeze(replicas);
    this.rank = rank;
    this.world = world;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the getter below has the registry entry as its this
    const self = this;
    registerRunTarget(this, {
      kind: 'group',
      arenas: this.replicas,
      rank,
      world,
      get disposed() {
        return self.#disposed;
      },
      run: (params) => runGroup(this, params),
    });
    Object.freeze(this);
  }

  /** Rows of one step of the whole group: the plan's batch on every replica. */
  get globalBatch(): number {
    return this.plan.spec.batch * this.world;
  }

  /** Whether steps all-reduce over NCCL (false for a group of one). */
  get reduces(): boolean {
    return this.world > 1;
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** Every replica in this process, one per device of `devices`. */
  static create<D extends Dtype>(plan: Plan<D>, options: DataParallelOptions): DataParallel<D> {
    if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { devices }');
    checkKnownKeys(options, CREATE_KEYS, 'DataParallel.create');
    const devices = options.devices;
    if (!Array.isArray(devices) || devices.length === 0)
      throw new OptionError('BAD_OPTION', 'devices', devices, 'must be a non-empty array of CUDA device indices');
    for (const d of devices) {
      if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0)
        throw new OptionError('BAD_OPTION', 'devices', devices, 'must hold CUDA device indices (integers >= 0)');
    }
    if (new Set(devices).size !== devices.length) throw new OptionError('BAD_OPTION', 'devices', devices, 'lists a device twice (one replica per device)');
    requireGroupPlan(plan);
    const gradients = wireOf(plan, options.gradients);
    const base = { backend: options.backend, pinned: options.pinned };
    if (devices.length === 1) return new DataParallel(plan, [Arena.create(plan, { ...base, device: devices[0] })], 0, 1);
    if (options.backend === 'cpu' || cudaInfo().devices === 0) {
      throw new ArenaError('NOT_SUPPORTED', `data parallelism over ${devices.length} devices needs the CUDA backend (${cudaInfo().why || 'backend: cpu'})`);
    }
    const have = cudaInfo().devices;
    const absent = devices.filter((d) => d >= have);
    if (absent.length) throw new OptionError('BAD_OPTION', 'devices', devices, `device ${absent[0]} does not exist: this machine has ${have} CUDA device(s)`);
    requireNccl();
    const replicas: Arena<D>[] = [];
    try {
      for (const d of devices) replicas.push(Arena.create(plan, { ...base, backend: 'cuda', device: d }));
      call(() =>
        native().ncclInitAll(
          replicas.map((a) => handleOf(a)),
          gradients,
        ),
      );
    } catch (e) {
      for (const a of replicas) a.dispose();
      throw e;
    }
    return new DataParallel(plan, replicas, 0, devices.length);
  }

  /** This process's rank of a multi-process group: the environment says which (RANK,
   *  WORLD_SIZE, LOCAL_RANK: its device; MASTER_ADDR, MASTER_PORT: rank 0's rendezvous). */
  static async join<D extends Dtype>(plan: Plan<D>, options: JoinOptions = {}): Promise<DataParallel<D>> {
    if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object');
    checkKnownKeys(options, JOIN_KEYS, 'DataParallel.join');
    const env = readParallelEnv(options.env ?? process.env);
    requireGroupPlan(plan);
    const gradients = wireOf(plan, options.gradients);
    const base = { backend: options.backend, pinned: options.pinned };
    if (env.world === 1) return new DataParallel(plan, [Arena.create(plan, { ...base, device: env.localRank })], 0, 1);
    if (options.backend === 'cpu' || cudaInfo().devices === 0) {
      throw new ArenaError('NOT_SUPPORTED', `a data-parallel rank (WORLD_SIZE=${env.world}) needs the CUDA backend (${cudaInfo().why || 'backend: cpu'})`);
    }
    requireNccl();
    const arena = Arena.create(plan, { ...base, backend: 'cuda', device: env.localRank });
    try {
      const id = await rendezvous({
        rank: env.rank,
        world: env.world,
        addr: env.masterAddr,
        port: env.masterPort,
        timeoutMs: options.timeoutMs,
        secret: options.secret ?? env.secret,
        allowUnauthenticated: options.allowUnauthenticated,
        ...(env.rank === 0 ? { id: call(() => native().ncclUniqueId()) } : {}),
      });
      try {
        await native().ncclInitRank(handleOf(arena), id, env.rank, env.world, gradients);
      } catch (e) {
        throw fromNative(e);
      }
    } catch (e) {
      arena.dispose();
      throw e;
    }
    return new DataParallel(plan, [arena], env.rank, env.world);
  }

  /** Frees every replica (and its communicator). */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const a of this.replicas) a.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Waits for what is queued or in flight on every replica, then disposes the group. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#disposed) await Promise.all(this.replicas.map((a) => a.synchronize()));
    this.dispose();
  }
}

/** Internal: one run of every replica of `group` (params per replica), each on its own thread
 *  (csrc/addon/nccl.cc); resolves once all have ended. */
export async function runGroup(group: DataParallel, params: readonly RunParams[]): Promise<RunPath> {
  if (group.replicas.length === 1) return runArena(group.replicas[0]!, params[0]!);
  try {
    return await native().runReplicas(
      group.replicas.map((a) => handleOf(a)),
      [...params],
    );
  } catch (e) {
    throw fromNative(e);
  }
}
