// run_modes.h: how a run on the CUDA backend's per-layer path (LayerRun, csrc/cuda/layer_run*.cuh)
// goes, decided once from what it runs: which launches it may merge, which library takes its
// products, whether it uses the side stream, the output head and graphs. Each mode's rule, and
// why, is here and nowhere else; LayerRun's constructor reads them and allocates what they need.
// Host code only: the test addon reads the rules on machines without a GPU
// (test/run-modes.test.ts).
#pragma once
#include <cstdint>
#include <string>

#include "train.h"

namespace nna {

// The widest output layer whose product output_head.cuh takes (its kernels' tile of units).
constexpr uint64_t kHeadMaxUnits = 32;

// What the modes are decided from.
struct RunModeInputs {
  bool floatRun = true;                   // a float32 arena (cuBLASLt's epilogues are float only)
  Precision precision = Precision::Fp32;  // the products' (fp32 for a float64 arena)
  Op op = Op::Train;
  uint32_t models = 1;       // K
  uint32_t layers = 0;       // the header's num_layers (layer 0 included)
  uint64_t outputUnits = 0;  // the output layer's units
  uint64_t numBatches = 1;
  bool blas = false;         // the products go through cuBLAS (the lane has it, the network fits it)
  bool ops = false;          // a layer is not dense (nn_arena.h NNA_OPS)
  bool compact = false;      // NNA_FLAG_COMPACT: regions of different phases share bytes
  bool hooks = false;        // a device budget's scheduler acts between launches
  bool sync = false;         // a replica of a data-parallel group
  bool syncGraphs = false;   // ... whose sync takes part in graphs (GradSync::graphs)
  bool cache = false;        // the arena keeps a cache on this lane (its graphs, its shelf)
  bool lossScale = false;    // fp16's loss scaling is on (RunParams::lossScale)
  bool sideStream = false;   // the lane has a side stream
  bool ltAvailable = false;  // cuBLASLt was found (cublaslt_loader.h)
  // The knobs (core/env.h), read per run: NN_ARENA_CUBLASLT's value and whether it is on,
  // NN_ARENA_SIDE_STREAM and NN_ARENA_CUDA_GRAPH not "0".
  std::string cublasLt;
  bool cublasLtOn = false;
  bool sideStreamKnob = true;
  bool cudaGraphKnob = true;
};

struct RunModes {
  bool half = false;           // bf16 / fp16: 16-bit copies of the products' operands (HalfCopies)
  bool crossBias = false;      // layer l-1's bias gradient in the launch that applies its f'
  bool crossPhase = false;     // launches may do other work of a later phase of the step
  bool stepsTogether = false;  // the layers' optimizer steps in one launch after the backward
  bool lt = false;             // every product through cuBLASLt with its epilogues
  bool ltForward = false;      // only the forward products through cuBLASLt, with bias (+ ReLU)
  bool besides = false;        // work on the lane's side stream
  bool head = false;           // the output layer's product is output_head.cuh's
  bool headFused = false;      // ... in the output launch itself
  bool scaling = false;        // the loss scaled and each step checked (fp16 training)
  bool headRounds = false;     // the head reads fp32 operands rounded to 16 bits as they load
  bool biasInOutput = false;   // the output launch adds the output layer's bias (K models)
  bool graphs = false;         // steps may run as graph launches (step_graph.cuh)
};

RunModes resolveRunModes(const RunModeInputs& in);

}  // namespace nna
