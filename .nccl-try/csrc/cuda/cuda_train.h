// cuda_train.h: one training / evaluation run on the CUDA backend (cuda_train.cu; absent.cc in
// a CPU-only build), and the one decision of whether its products go through cuBLAS.
#pragma once
#include <vector>

#include "../include/nn_arena.h"
#include "../train/train.h"

namespace nna {

struct LayerHooks;  // layer_hooks.h
struct GradSync;    // grad_sync.h

// `header` is the validated host copy (launch geometry); kernels bind from devBase. `hooks`
// let a memory scheduler act between the per-layer launches; a run with hooks always takes the
// per-layer path. `sync` (a data-parallel replica's group, p.reduce) reduces the gradients
// between backward and update. Returns which path ran: "fused", "layers (cublas)" or
// "layers (tiled)".
const char* runCuda(void* devBase, const void* header, const RunParams& p, LayerHooks* hooks = nullptr, GradSync* sync = nullptr);

// Whether the per-layer path runs its products through cuBLAS: the library loaded at run time,
// NN_ARENA_GEMM not 'tiled', and every size within cuBLAS's int. SGD training then folds its
// update into the weight-gradient product, so the plan of a budgeted run (phases.h) asks too.
bool productsUseBlas(const nna_header& h, const std::vector<nna_layer>& layers);

}  // namespace nna
