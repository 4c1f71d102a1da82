// The per-layer CUDA path's modes (csrc/train/run_modes.cc), decided on the host: each rule read
// through the test addon, on machines without a GPU. The GPU suite checks what the modes do
// (compact == full, K models == one, graphs == direct, ...); this checks which runs take which.
import { describe, expect, it } from 'vitest';
import { testAddon, type RunMode } from '../src/internal.js';

/** One model of a dense network through cuBLAS, a training run of many steps, a lane with a side
 *  stream and cuBLASLt, the knobs at their defaults. */
const BASE = {
  floatRun: true,
  precision: 'fp32',
  op: 0,
  models: 1,
  layers: 3,
  outputUnits: 10,
  numBatches: 100,
  blas: true,
  sideStream: true,
  ltAvailable: true,
};
const modes = (over: Record<string, boolean | number | string> = {}) => testAddon().runModes({ ...BASE, ...over });
const on = (m: Record<RunMode, boolean>) => (Object.keys(m) as RunMode[]).filter((k) => m[k]).sort();

describe('run modes of the per-layer CUDA path', () => {
  it('a dense network: cross-phase launches, the side stream, the output head in the output launch, forward epilogues, graphs', () => {
    expect(on(modes())).toEqual(['besides', 'crossBias', 'crossPhase', 'graphs', 'head', 'headFused', 'ltForward']);
  });

  it("ops: a bias gradient still with its f, gradients beside the chain, the steps in one launch, the forward products' epilogues; no cross-phase passes or head", () => {
    expect(on(modes({ ops: true }))).toEqual(['besides', 'crossBias', 'graphs', 'ltForward', 'stepsTogether']);
    expect(on(modes({ ops: true, sideStreamKnob: false }))).toEqual(['crossBias', 'graphs', 'ltForward', 'stepsTogether']);
    expect(on(modes({ ops: true, cublasLt: '0' }))).toEqual(['besides', 'crossBias', 'graphs', 'stepsTogether']);
    // every epilogue (NN_ARENA_CUBLASLT=1) assumes a chain of dense layers
    expect(on(modes({ ops: true, cublasLtOn: true, cublasLt: '1' }))).toEqual(['besides', 'crossBias', 'graphs', 'stepsTogether']);
    // a compact plan steps each layer in its backward phase, and takes nothing early
    expect(on(modes({ ops: true, compact: true }))).toEqual(['graphs', 'ltForward']);
  });

  it('a compact plan: nothing of a later phase early, no side stream; the head in its own launch', () => {
    expect(on(modes({ compact: true }))).toEqual(['graphs', 'head', 'ltForward']);
  });

  it("a device budget's scheduler: no graphs, no cuBLASLt, nothing early", () => {
    expect(on(modes({ hooks: true }))).toEqual(['head']);
  });

  it('a group: no side stream; graphs only where its sync takes part', () => {
    expect(modes({ sync: true }).besides).toBe(false);
    expect(modes({ sync: true }).graphs).toBe(false);
    expect(modes({ sync: true, syncGraphs: true }).graphs).toBe(true);
  });

  it('graphs: runs of three steps or more, or one step where the arena keeps a cache (train and forward runs); never a primitive; NN_ARENA_CUDA_GRAPH=0', () => {
    expect(modes({ numBatches: 2 }).graphs).toBe(false);
    expect(modes({ numBatches: 1, cache: true }).graphs).toBe(true);
    expect(modes({ numBatches: 1, cache: true, op: 3 }).graphs).toBe(true);
    expect(modes({ numBatches: 1, cache: true, op: 2 }).graphs).toBe(false);
    for (const op of [4, 5, 6]) expect(modes({ op, cache: true }).graphs, `op ${op}`).toBe(false);
    expect(modes({ cudaGraphKnob: false }).graphs).toBe(false);
  });

  it('cuBLASLt: the forward epilogues by default, every epilogue with NN_ARENA_CUBLASLT=1 (one model), none with 0, none without the library or in float64', () => {
    expect([modes().lt, modes().ltForward]).toEqual([false, true]);
    const all = modes({ cublasLt: '1', cublasLtOn: true });
    expect([all.lt, all.ltForward, all.besides, all.head]).toEqual([true, false, false, false]);
    expect(modes({ cublasLt: '1', cublasLtOn: true, models: 2 }).lt).toBe(false);
    expect(modes({ cublasLt: 'forward', cublasLtOn: true }).ltForward).toBe(true);
    expect(on(modes({ cublasLt: '0' })).filter((k) => k.startsWith('lt'))).toEqual([]);
    expect(modes({ ltAvailable: false }).ltForward).toBe(false);
    expect(modes({ floatRun: false }).ltForward).toBe(false);
    expect(modes({ precision: 'tf32x3' }).ltForward).toBe(false);
  });

  it('bf16 / fp16: 16-bit copies (not in an update run); the head reads rounded fp32 and the layer before it takes its epilogue; loss scaling defers that', () => {
    const bf16 = modes({ precision: 'bf16', ltAvailable: true });
    expect([bf16.half, bf16.headRounds, bf16.ltForward]).toEqual([true, true, true]);
    expect(modes({ precision: 'bf16', op: 6 }).half).toBe(false);
    const fp16 = modes({ precision: 'fp16', lossScale: true });
    expect([fp16.half, fp16.scaling, fp16.headRounds, fp16.ltForward]).toEqual([true, true, false, false]);
    // a two-layer network has no layer before the head to take it
    expect(modes({ precision: 'bf16', layers: 2 }).ltForward).toBe(false);
  });

  it('K models: no head, no side stream; the output launch adds the bias up to 32 output units', () => {
    const k = modes({ models: 3 });
    expect([k.head, k.besides, k.biasInOutput]).toEqual([false, false, true]);
    expect(modes({ models: 3, outputUnits: 33 }).biasInOutput).toBe(false);
    expect(modes({ models: 3, op: 4 }).biasInOutput).toBe(false);
  });

  it('the output head: up to 32 output units, one model, through cuBLAS', () => {
    expect(modes({ outputUnits: 32 }).head).toBe(true);
    expect(modes({ outputUnits: 33 }).head).toBe(false);
    expect(modes({ blas: false }).head).toBe(false);
  });
});
