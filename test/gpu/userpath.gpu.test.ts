// Issue 47 on CUDA: step(), predict(), evaluate() and forward() of a caller's batch upload its
// rows, run and read their results back in one native call (the copies queued on the run's
// stream); each call's transfers counted as before, its results those of a twin CPU arena.
// GPU machine: bash .gpu/run.sh vitest run test/gpu/userpath.gpu.test.ts
import { describe, it } from 'vitest';
import { cudaInfo } from '../../src/index.js';
import { checkUserCalls } from '../support/user-calls.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;

describe.skipIf(!hasGpu)('CUDA: the user calls of a caller batch', () => {
  it(`move their rows and results with the run, and compute what the CPU does (${process.env.NN_ARENA_STEP_PATH ?? 'default'} path)`, async () => {
    await checkUserCalls('cuda', 1e-4);
  });
});
