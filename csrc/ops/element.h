// element.h: the ops that act element by element (no parameters, the width kept: dropout,
// residual), each a struct in its own header (forward and backward of element i = (row, col),
// built from an ElementLayer), dispatched here by op code for both backends: the CPU's loops
// (csrc/cpu/cpu_ops.h) and the CUDA kernel (csrc/cuda/op_kernels.cuh opElementKernel) call
// withElementOp and never name an element op. Adding one: its row in nn_arena.h NNA_OPS, its
// header, its case below.
#pragma once
#include <stdint.h>

#include "../descriptors/host_device.h"
#include "../include/nn_arena.h"
#include "alpha_dropout.h"
#include "dropout.h"
#include "element_layer.h"
#include "residual.h"

namespace nna::ops {

// f(op) with layer e's op built; false (f not called) where `op` is not an element op.
template <typename T, typename F> NNA_FN bool withElementOp(uint32_t op, const ElementLayer<T>& e, F&& f) {
  switch (op) {
    case NNA_OP_DROPOUT: f(Dropout<T>(e)); return true;
    case NNA_OP_RESIDUAL: f(Residual<T>(e)); return true;
    case NNA_OP_ALPHA_DROPOUT: f(AlphaDropout<T>(e)); return true;
    default: return false;
  }
}

// Whether `op` is an element op (withElementOp's list, asked with a layer of nothing).
NNA_FN bool isElementOp(uint32_t op) {
  return withElementOp(op, ElementLayer<float>{}, [](const auto&) {});
}

}  // namespace nna::ops
