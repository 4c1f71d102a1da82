# The include path of nn-arena's public header comes from the installed package
# (require('nn-arena/include').dir), as node-addon-api's does. With nvcc (find-nvcc.cjs) the CUDA
# kernel is compiled too and the CUDA runtime links statically; without it the module is CPU-only.
{
  "variables": {
    "nvcc%": "<!(node find-nvcc.cjs nvcc)",
    "cuda_lib%": "<!(node find-nvcc.cjs cudalib)",
    "cuda_inc%": "<!(node find-nvcc.cjs cudainc)",
    "nna_include%": "<!(node -p \"require('nn-arena/include').dir\")"
  },
  "targets": [
    {
      "target_name": "custom_kernel",
      "sources": ["src/addon.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "<(nna_include)"],
      "defines": ["NAPI_CPP_EXCEPTIONS", "NAPI_VERSION=8"],
      "cflags_cc": ["-std=c++17", "-O2", "-fexceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17"],
      "conditions": [
        ["nvcc!='' and cuda_lib!=''", {
          "defines": ["WITH_CUDA=1"],
          "include_dirs": ["<(cuda_inc)"],
          "sources": ["src/decay.cu", "src/ema.cu"],
          "libraries": ["<(cuda_lib)/libcudart_static.a", "-ldl", "-lrt", "-lpthread"],
          "rules": [{
            "rule_name": "nvcc",
            "extension": "cu",
            "inputs": ["<(RULE_INPUT_PATH)", "src/decay.h", "src/ema.h"],
            "outputs": ["<(INTERMEDIATE_DIR)/<(RULE_INPUT_ROOT).o"],
            "action": ["sh", "-c", "<(nvcc) -O2 -std=c++17 -Xcompiler -fPIC -DWITH_CUDA=1 -I<(nna_include) -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90 -c <(RULE_INPUT_PATH) -o <(INTERMEDIATE_DIR)/<(RULE_INPUT_ROOT).o"],
            "message": "nvcc <(RULE_INPUT_PATH)",
            "process_outputs_as_sources": 1
          }]
        }]
      ]
    }
  ]
}
