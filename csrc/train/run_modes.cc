// run_modes.cc: the per-layer CUDA path's modes (run_modes.h), each rule with its reason.
#include "run_modes.h"

namespace nna {

RunModes resolveRunModes(const RunModeInputs& in) {
  RunModes m;
  const bool primitive = isPrimitive(in.op);
  // bf16 / fp16 products read 16-bit copies of their operands (K models: bf16 only, check.cc).
  // An update run has no products.
  m.half = in.blas && (in.precision == Precision::Bf16 || in.precision == Precision::Fp16) && in.op != Op::Update;
  // Launches may do work of a later phase of the step (a layer's bias gradient with the
  // activation gradient before it; the loss fold with the next gather): no scheduler acts between
  // launches and no compact plan shares those regions' bytes with the phases between.
  // Ops other than dense (op_kernels.cuh) run between the dense layers' products, without the
  // backward's cuBLASLt epilogues, the output head or the other cross-phase passes, whose
  // launches assume a chain of dense layers; a dense layer's bias gradient still goes with its
  // f' (crossBias: their backward leaves a dense layer's d as a product does), and its forward
  // product takes bias and activation in its epilogue (ltForward: it reads z[l-1], whatever
  // wrote it, and writes z[l] as the pass after it would).
  m.crossBias = !in.hooks && !in.compact;
  m.crossPhase = m.crossBias && !in.ops;
  // cuBLASLt's epilogues (bias, activation, their gradients inside the products): one float
  // model in fp32 or tf32 (tf32x3 is three products; bf16 / fp16 write 16-bit copies in their
  // passes: only layer L-1's forward, headRounds below), no memory scheduler (it may move regions
  // between launches). By default only the forward products take theirs (ltForward: bias, and
  // ReLU, whose derivative comes from z: no mask; a pass less after each forward product), every
  // other launch, the side stream and the output launch as without cuBLASLt. NN_ARENA_CUBLASLT
  // (read per run): 0 none, 1 (or a path picking the library) every epilogue (lt: not faster,
  // and it gives up the side stream and the output launch: docs/cuda.md, "Fused epilogues"),
  // forward the default. K models take the forward epilogues too (batched, each model's bias),
  // not the others.
  const bool ltCan = in.floatRun && in.blas && !in.hooks && (in.precision == Precision::Fp32 || in.precision == Precision::Tf32) && in.op != Op::Update;
  const bool ltAll = in.cublasLtOn && in.cublasLt != "forward";
  m.lt = ltCan && in.models == 1 && ltAll && !in.ops && in.ltAvailable;
  m.ltForward = ltCan && !ltAll && in.cublasLt != "0" && in.ltAvailable;
  // Work beside the run's stream (fork, onSide): a layer's weight-gradient product (and its
  // update) overlaps the error products below it, the weights' 16-bit casts overlap the gather.
  // Not with a scheduler or a group (host work between launches), a compact plan (regions of
  // different phases share bytes), cuBLASLt (one handle) or tf32x3 (one split workspace for
  // both products), nor for K models (their batched products fill the GPU: a second stream only
  // made them slower). NN_ARENA_SIDE_STREAM=0 keeps every launch on the run's stream. With ops
  // too: a dense layer's weight-gradient product reads d[l] and z[l-1], which no op's backward
  // below writes (an op writes its own gradients and d of the layer under it, its row sums
  // stay on the run's stream); the steps in one launch wait for the side's work.
  m.besides = m.crossBias && !in.sync && !m.lt && in.precision != Precision::Tf32x3 && in.models == 1 && !primitive && in.sideStream && in.sideStreamKnob;
  // With ops (no cross-layer passes) the steps may wait for the last backward and go in one
  // launch: the same values (nothing after a layer's backward reads its w). With the side stream
  // too: a step a layer there (as in a dense network) made the side the longer of the two
  // streams in fp32. Not in a compact plan, whose phases (phases.cc) give a layer's dw bytes to
  // the layers below once its backward phase, which updates it, is over; nor with a scheduler,
  // which plans each step.
  m.stepsTogether = in.ops && m.crossBias;
  // A narrow output layer's product by output_head.cuh, in every run but cuBLASLt's (its
  // forward epilogues), so that compact, budgeted and full runs keep the same bits; in the
  // output launch itself (headFused) but with a scheduler (its stages keep the product and the
  // output apart), in a compact plan, or in the primitives (a Backward run's z holds a Forward
  // run's outputs). One model through cuBLAS: a K-model arena keeps its batched products (with
  // as many blocks as rows x models the kernel was slower than they are), and the tiled products
  // keep K models bit-identical to one.
  m.head = !m.lt && in.blas && in.models == 1 && !in.ops && in.outputUnits <= kHeadMaxUnits;
  m.headFused = m.head && m.crossPhase && !primitive;
  // Loss scaling (fp16, Train runs of one model: check.cc) defers the updates as clipping does:
  // they wait for the step's gradients to be known finite.
  m.scaling = in.lossScale && in.op == Op::Train;
  // bf16 / fp16: the head's launch and its backward read z[L-1], w[L] and d[L] from the arena,
  // rounded as they load (output_head.cuh HeadRead::Rounds; the same values as the copies), so
  // layer L-1's forward product needs no pass to write z[L-1]'s copy: it takes bias and
  // activation in its cuBLASLt epilogue where it has one (a pass less a step). Not with loss
  // scaling (the products read d[L]'s scaled copy).
  m.headRounds = m.head && m.half && !m.scaling;
  if (m.headRounds && in.layers > 2 && !in.hooks && in.cublasLt != "0" && in.ltAvailable) m.ltForward = true;
  // K models, an output layer of up to 32 units, blas: the output launch (outputWarpKernel) adds
  // the bias and applies f before the row's loss, as outputHeadKernel does for one model: a pass
  // less a step. Not in the primitives (a Forward run's output launch is its own) nor with a
  // scheduler (crossPhase: its stages keep them apart).
  m.biasInOutput = in.models > 1 && in.blas && !m.lt && m.crossPhase && !primitive && in.outputUnits <= 32;
  // Graphs: not with a memory scheduler (its work between launches is host-side) or a group
  // whose sync cannot take part (GradSync::graphs), nor for runs too short to repay the capture.
  // NN_ARENA_CUDA_GRAPH=0 launches every step directly. One-step training runs (step() in a loop)
  // and forward runs (predict()'s batch; a fed predict's batches, run_feed.cuh) take part where
  // the arena keeps a cache: the first captures its only step, the next replay it, as a long
  // run's later steps do; each kind in a graph of its own. A group's first step launches
  // directly (GradSync::capturable).
  m.graphs = !in.hooks && (!in.sync || in.syncGraphs) && !primitive && (in.numBatches >= 3 || (in.cache && (in.op == Op::Train || in.op == Op::Forward))) && in.cudaGraphKnob;
  return m;
}

}  // namespace nna
