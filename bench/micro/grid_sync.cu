// grid_sync.cu: what one grid-wide barrier (cooperative_groups grid.sync) costs on this GPU, the
// floor under each phase of the fused step kernel (csrc/cuda/fused_step.cu). Built and run on
// the GPU machine: nvcc -O3 -arch=sm_90 bench/micro/grid_sync.cu -o /tmp/gs && /tmp/gs
#include <cooperative_groups.h>
#include <cstdio>
namespace cg = cooperative_groups;

__global__ void syncs(int n, int* sink) {
  cg::grid_group g = cg::this_grid();
  for (int i = 0; i < n; ++i) g.sync();
  if (threadIdx.x == 0 && blockIdx.x == 0) *sink = n;
}

int main() {
  int sms = 0, *sink = nullptr;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  if (cudaMalloc(&sink, sizeof(int)) != cudaSuccess) return 1;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int perSm : {1, 2}) {
    for (int n : {1, 10000}) {
      void* args[] = {&n, &sink};
      cudaLaunchCooperativeKernel((void*)syncs, dim3(sms * perSm), dim3(256), args, 0, 0);  // warm-up
      cudaEventRecord(a);
      cudaLaunchCooperativeKernel((void*)syncs, dim3(sms * perSm), dim3(256), args, 0, 0);
      cudaEventRecord(b);
      if (cudaEventSynchronize(b) != cudaSuccess) {
        printf("error: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      printf("grid %d blocks x 256 threads: %d syncs in %.1f us (%.2f us per sync incl. launch)\n", sms * perSm, n, ms * 1000, ms * 1000 / n);
    }
  }
  return 0;
}
