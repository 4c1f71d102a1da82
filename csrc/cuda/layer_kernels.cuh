// layer_kernels.cuh: the kernels of the per-layer path (one launch per product or pass), one
// header per kind of work; kernel_base.cuh holds what they share.
#pragma once
#include "clip_kernels.cuh"
#include "epilogue_kernels.cuh"
#include "kernel_base.cuh"
#include "output_kernels.cuh"
#include "run_kernels.cuh"
#include "tiled_gemm.cuh"
#include "update_kernels.cuh"
