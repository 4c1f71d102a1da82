// cuda_train.cu: one training / evaluation run on the CUDA backend. Two paths, same results
// up to float rounding order (bit-identical run to run on each):
//   - fused (fused_step.cu): every step of the run in ONE cooperative kernel, for small
//     networks, where launch latency and not arithmetic bounds a step;
//   - per layer (here): one launch per product or pass, products through cuBLAS when it is
//     found at run time (cublas_loader.cc), else the tiled kernels of tiled_gemm.cuh. A
//     memory scheduler can act between the launches (layer_hooks.h).
// Every kernel receives only the arena's device base (plus scalars) and binds from the header.
#include "layer_run.cuh"
#include "layer_run_backward.cuh"
#include "layer_run_lt.cuh"
#include "layer_run_step.cuh"

namespace nna {

bool productsUseBlas(const nna_header& h, const std::vector<nna_layer>& layers) {
  // NN_ARENA_GEMM=tiled keeps the products on nn-arena's own kernels even where cuBLAS loaded.
  static const bool tiledOnly = knob(Knob::Gemm) == "tiled";
  if (!cublasAvailable() || tiledOnly || h.batch > INT_MAX) return false;
  for (const nna_layer& l : layers)
    if (l.units > INT_MAX || l.fan_in > INT_MAX) return false;
  return true;
}

// The precision's tensor cores: its descriptor's compute capability or newer (of the current
// device: the arena's, made current by Backend::activate on the run's thread).
static void requireTensorCores(Precision p) {
  const PrecisionInfo& info = *precisionInfo(p);
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major < info.minMajor)
    NNA_FAIL_FIELD("BAD_OPTION", "precision",
                   std::string("precision '") + info.name + "' needs " + info.cores + " (compute capability " + std::to_string(info.minMajor) + ".0 or newer); this GPU is " +
                       std::to_string(major) + "." + std::to_string(minor));
}

// One run on `lane` (runCuda's checks made): its copies in, the fused kernel or the per-layer
// path, its copies out, and (unless p.queued) the wait that ends it.
static const char* runOnLane(void* devBase, const nna_header& h, const std::vector<nna_layer>& layers, const OpTables& ops, const RunParams& p, const Lane& lane, LayerHooks* hooks,
                             GradSync* sync) {
  // The fused kernel knows nothing of groups (shards, a group's loss rows or a reduction) and
  // runs whole steps in FP32 only: those, the trainer primitives and the TF32 precisions take
  // the per-layer path, which queues the run's copies itself (LayerRun::run).
  const bool own = !sync && !p.globalBatch && !p.shardOffset && !p.lossRows && (p.resident || p.rows > 0);
  FusedNorms norms;
  if (!hooks && own && !isPrimitive(p.op) && p.precision == Precision::Fp32 && fusedRuns(h, layers, p)) {
    queueRunCopies(devBase, p, /*in=*/true, lane.stream);
    runFused(devBase, h, layers, p, lane, &norms);
    launchNonFinite(devBase, h, layers, p, lane.stream);
    queueRunCopies(devBase, p, /*in=*/false, lane.stream);
    if (p.queued) return "fused";
    CUDA_CHECK(cudaStreamSynchronize(lane.stream));  // the run's end (the fused launch does not wait itself)
    if (norms.count && p.gradNorms) {
      p.gradNorms->resize(norms.count);
      CUDA_CHECK(cudaMemcpy(p.gradNorms->data(), norms.at, norms.count * sizeof(double), cudaMemcpyDeviceToHost));
    }
    return "fused";
  }
  bool blas = false;
  try {
    if (h.dtype == NNA_FLOAT64)
      blas = LayerRun<double>(devBase, h, layers, ops, p, lane, hooks, sync).run();
    else
      blas = LayerRun<float>(devBase, h, layers, ops, p, lane, hooks, sync).run();
  } catch (...) {
    if (sync) sync->abort();
    if (hooks) {
      cudaStreamSynchronize(lane.stream);
      hooks->endRun(lane.stream);
    }
    throw;
  }
  // Budgeted arenas: the parameters need not be on the device after the run (a stager's pool).
  if (hooks) hooks->endRun(lane.stream);
  return blas ? "layers (cublas)" : "layers (tiled)";
}

const char* runCuda(void* devBase, const void* header, const RunParams& p, LayerHooks* hooks, GradSync* sync) {
  checkRun(header, p);
  checkTarget(header, p, RunTarget{/*cuda=*/true, /*budgeted=*/hooks != nullptr});  // budget_run.cu checks it too, before its schedulers
  if (p.reduce && !sync) NNA_FAIL("NOT_SUPPORTED", "reduce needs an arena in a data-parallel group (a communicator)");
  if (!p.reduce) sync = nullptr;
  nna_header h;
  std::memcpy(&h, header, sizeof h);
  std::vector<nna_layer> layers(h.num_layers);
  std::memcpy(layers.data(), static_cast<const char*>(header) + h.layers_offset, layers.size() * sizeof(nna_layer));
  if (p.precision != Precision::Fp32) requireTensorCores(p.precision);
  if (precisionInfo(p.precision)->needsBlas && !productsUseBlas(h, layers))
    NNA_FAIL_FIELD("NOT_SUPPORTED", "precision",
                   std::string("precision '") + precisionName(p.precision) +
                       "' computes its products through cuBLAS, which this run cannot use "
                       "(not found, NN_ARENA_GEMM=tiled, or a dimension beyond 2^31): use 'tf32' or 'fp32'");
  if (p.copies && (hooks || sync)) NNA_FAIL("NOT_SUPPORTED", "a run's own copies on a budgeted arena or in a data-parallel group");
  LaneGuard lane;
  std::vector<uint32_t> from(h.num_layers, 0);  // residual layers' sources, from the op parameter table
  for (uint32_t l = 0; l < h.num_layers; ++l)
    if (const nna_op_param* q = nna_op_param_of(header, l)) from[l] = q->from;
  OpTables tables;
  tables.adders.resize(h.num_layers);
  for (uint32_t k = 0; k < h.num_layers; ++k)
    tables.adders[k] = ops::residualAdders(
        h.num_layers, k, [&](uint32_t r) { return layers[r].op; }, [&](uint32_t r) { return from[r]; });
  if (const nna_embed_col* cols = nna_embed_cols_of(header)) {
    tables.embedColumns = nna_op_param_of(header, 1)->count;
    for (uint32_t j = 0; j < tables.embedColumns; ++j) tables.embedMaxDim = std::max(tables.embedMaxDim, cols[j].dim);
  }
  if (p.feed) return runFeed(devBase, p, *lane, [&](const RunParams& q) { return runOnLane(devBase, h, layers, tables, q, *lane, nullptr, nullptr); });
  const char* path = runOnLane(devBase, h, layers, tables, p, *lane, hooks, sync);
  if (!p.queued && !hooks && !sync) lane.settled();  // it ended with its stream's wait (runOnLane)
  return path;
}

}  // namespace nna
