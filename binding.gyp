# Builds build/Release/nn_arena.node. With nvcc (scripts/find-nvcc.cjs: CUDA_PATH, CUDA_HOME,
# PATH, /usr/local/cuda) the csrc/cuda/*.cu sources compile with nvcc and the CUDA runtime links
# statically, so the addon needs only the driver at run time and still loads without one.
# Without nvcc (or with NN_ARENA_CUDA=0) csrc/cuda/absent.cc replaces them: a CPU-only build.
# Architectures (scripts/find-nvcc.cjs archPlan): NN_ARENA_CUDA_ARCH="80;90" or "all", else the
# GPUs nvidia-smi shows, else every one from sm_75 to sm_120; SASS for each plus PTX of the newest.
# nvcc --threads 0 compiles the architectures of one file in parallel. Usually run through
# scripts/install.cjs (npm install / npm run build:native), which says what it builds and why.
{
  "variables": {
    "nvcc%": "<!(node scripts/find-nvcc.cjs nvcc)",
    "cuda_lib%": "<!(node scripts/find-nvcc.cjs cudalib)",
    "cuda_inc%": "<!(node scripts/find-nvcc.cjs cudainc)",
    "cuda_gencode%": "<!(node scripts/find-nvcc.cjs gencode)",
    "nvcc_flags%": "-O3 -std=c++17 --threads 0 --expt-relaxed-constexpr -Xcompiler -fPIC -Xcompiler -fexceptions"
  },
  "targets": [
    {
      "target_name": "nn_arena",
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"],
      "defines": ["NAPI_EXPERIMENTAL", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
      "cflags_cc": ["-std=c++17", "-O3", "-fopenmp-simd", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17"],
      "sources": [
        "csrc/addon/addon.cc",
        "csrc/addon/arena_handle.cc",
        "csrc/addon/convert.cc",
        "csrc/addon/descriptors.cc",
        "csrc/addon/functions.cc",
        "csrc/addon/internal.cc",
        "csrc/addon/jit.cc",
        "csrc/addon/nccl.cc",
        "csrc/addon/js_error.cc",
        "csrc/addon/run_worker.cc",
        "csrc/core/block.cc",
        "csrc/core/crc32c.cc",
        "csrc/core/env.cc",
        "csrc/core/host_memory.cc",
        "csrc/core/validate.cc",
        "csrc/cpu/cpu_backend.cc",
        "csrc/cpu/cpu_train.cc",
        "csrc/cpu/gemm.cc",
        "csrc/cpu/gemm_avx2.cc",
        "csrc/cpu/gemm_avx512.cc",
        "csrc/cpu/thread_pool.cc",
        "csrc/train/aliasing.cc",
        "csrc/train/check.cc",
        "csrc/train/phases.cc",
        "csrc/budget/budgeted_block.cc",
        "csrc/budget/residency.cc",
        "csrc/budget/residency_check.cc",
        "csrc/bench/copy_bench.cc"
      ],
      "conditions": [
        ["nvcc!='' and cuda_lib!=''", {
          "defines": ["NNA_WITH_CUDA=1"],
          "include_dirs": ["<(cuda_inc)"],
          "sources": ["csrc/cuda/cuda_backend.cu", "csrc/cuda/cuda_train.cu", "csrc/cuda/fused_step.cu", "csrc/cuda/cublas_loader.cc", "csrc/cuda/nvrtc_loader.cc", "csrc/cuda/jit.cc",
                      "csrc/budget/budget_run.cu", "csrc/budget/um_scheduler.cu", "csrc/budget/staging.cu", "csrc/budget/device_meter.cu",
                      "csrc/bench/link_bench.cu", "csrc/nccl/communicator.cu", "csrc/nccl/nccl_loader.cc"],
          "libraries": ["<(cuda_lib)/libcudart_static.a", "-ldl", "-lrt", "-lpthread"],
          "rules": [{
            "rule_name": "nvcc",
            "extension": "cu",
            "inputs": ["<(RULE_INPUT_PATH)", "<!@(node scripts/find-nvcc.cjs headers)"],
            "outputs": ["<(INTERMEDIATE_DIR)/<(RULE_INPUT_ROOT).o"],
            "action": ["sh", "-c", "<(nvcc) <(nvcc_flags) <(cuda_gencode) -c <(RULE_INPUT_PATH) -o <(INTERMEDIATE_DIR)/<(RULE_INPUT_ROOT).o"],
            "message": "nvcc <(RULE_INPUT_PATH)",
            "process_outputs_as_sources": 1
          }]
        }, {
          "sources": ["csrc/cuda/absent.cc", "csrc/budget/absent.cc", "csrc/bench/absent.cc", "csrc/nccl/absent.cc"]
        }]
      ]
    }
  ]
}
