# Builds build/Release/nn_arena.node (in a clone also the test addon: nn_arena_test below). With
# nvcc (scripts/find-nvcc.cjs: CUDA_PATH, CUDA_HOME, PATH, /usr/local/cuda) the csrc/cuda/*.cu sources compile with nvcc and the CUDA runtime links
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
    "nvcc_flags%": "-O3 -std=c++17 --threads 0 --expt-relaxed-constexpr -Xcompiler -fPIC -Xcompiler -fexceptions",
    "with_test%": "<!(node scripts/sources.cjs has-test)"
  },
  "target_defaults": {
    "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"],
    "defines": ["NAPI_EXPERIMENTAL", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
    "cflags_cc": ["-std=c++17", "-O3", "-fopenmp-simd", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter"],
    "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17"],
    "conditions": [
      ["nvcc!='' and cuda_lib!=''", {
        "defines": ["NNA_WITH_CUDA=1"],
        "include_dirs": ["<(cuda_inc)"],
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
      }]
    ]
  },
  "targets": [
    {
      "target_name": "nn_arena",
      "sources": ["<!@(node scripts/sources.cjs common)"],
      "conditions": [
        ["nvcc!='' and cuda_lib!=''", {
          "sources": ["<!@(node scripts/sources.cjs cuda)"]
        }, {
          "sources": ["<!@(node scripts/sources.cjs absent)"]
        }]
      ]
    }
  ],
  # nn_arena_test: the test- and bench-only functions (test/native/), as build/Release/nn_arena_test.so
  # (not .node: node-gyp-build loads the first .node it finds there; src/internal.ts dlopens it).
  # Not in the package (test/ is not shipped, so has-test is 0 there); scripts/install.cjs builds
  # only nn_arena, the tests build this one (test/support/test-addon-setup.ts).
  "conditions": [
    ["with_test==1", {
      "targets": [
        {
          "target_name": "nn_arena_test",
          "target_conditions": [["1==1", {"product_extension": "so"}]],
          "sources": ["<!@(node scripts/sources.cjs test-common)"],
          "conditions": [
            ["nvcc!='' and cuda_lib!=''", {
              "sources": ["<!@(node scripts/sources.cjs test-cuda)"]
            }, {
              "sources": ["<!@(node scripts/sources.cjs test-absent)"]
            }]
          ]
        }
      ]
    }]
  ]
}
