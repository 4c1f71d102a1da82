// um_release.cu: does the driver give back the device memory of a managed range once it has been
// sent back to the host, and how fast can a range be sent back? The evidence behind the managed
// rows of bench/um.ts (issue 7): cudaMemGetInfo is the only public count of device memory in use.
// Built and run on the GPU machine: nvcc -O3 -arch=sm_90 bench/micro/um_release.cu -o /tmp/ur && /tmp/ur
// Safety (../shared/gpu/README.md): one managed allocation of 512 MiB, checked against 90% of free.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

static const size_t kMiB = size_t(1) << 20;

__global__ void fill(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = v;
}
static size_t base = 0;

static long usedMiB() {
  size_t f = 0, t = 0;
  CK(cudaMemGetInfo(&f, &t));
  return long((t - f) / kMiB) - long(base / kMiB);
}
static cudaMemLocation at(bool device) {
  cudaMemLocation l{};
  l.type = device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  l.id = 0;
  return l;
}
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main() {
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  size_t f = 0, t = 0;
  CK(cudaMemGetInfo(&f, &t));
  base = t - f;
  const size_t R = 64 * kMiB, N = 8, bytes = R * N;
  if (bytes > f / 10 * 9) {
    std::printf("refused: above 90%% of free\n");
    return 1;
  }
  char* m = nullptr;
  CK(cudaMallocManaged(&m, bytes));
  std::memset(m, 1, bytes);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto pf = [&](size_t i, bool dev) {
    CK(cudaMemPrefetchAsync(m + i * R, R, at(dev), 0, s));
    CK(cudaStreamSynchronize(s));
  };
  auto advise = [&](size_t i, cudaMemoryAdvise a, bool dev) { CK(cudaMemAdvise(m + i * R, R, a, at(dev))); };

  std::printf("[cycle] each 64 MiB range to the device and back, one after the other (MiB in use above the start)\n");
  for (size_t i = 0; i < 4; ++i) {
    pf(i, true);
    const long a = usedMiB();
    pf(i, false);
    std::printf("  range %zu: on device %ld, back on host %ld\n", i, a, usedMiB());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::printf("  300 ms later %ld\n", usedMiB());

  std::printf("[preferred host] advice SetPreferredLocation=host before sending back\n");
  for (size_t i = 4; i < 6; ++i) {
    pf(i, true);
    const long a = usedMiB();
    advise(i, cudaMemAdviseSetPreferredLocation, false);
    pf(i, false);
    std::printf("  range %zu: on device %ld, back %ld\n", i, a, usedMiB());
  }
  std::printf("[discard] range 6 on the device, discarded, then prefetched to host\n");
  {
    pf(6, true);
    const long a = usedMiB();
    void* p = m + 6 * R;
    size_t sz = R;
    CK(cudaMemDiscardBatchAsync(&p, &sz, 1, 0, s));
    CK(cudaStreamSynchronize(s));
    const long b = usedMiB();
    pf(6, false);
    std::printf("  on device %ld, discarded %ld, to host %ld\n", a, b, usedMiB());
  }
  std::printf("[reuse] ranges 0..7 cycled twice more: does in-use grow past the first cycle?\n");
  for (int rep = 0; rep < 2; ++rep) {
    long peak = 0;
    for (size_t i = 0; i < N; ++i) {
      pf(i, true);
      peak = std::max(peak, usedMiB());
      pf(i, false);
    }
    std::printf("  cycle %d: peak %ld, after %ld\n", rep, peak, usedMiB());
  }
  std::printf("[all on device] then all back\n");
  for (size_t i = 0; i < N; ++i) pf(i, true);
  std::printf("  all on device %ld\n", usedMiB());
  for (size_t i = 0; i < N; ++i) pf(i, false);
  std::printf("  all back %ld\n", usedMiB());

  // Speed of sending 256 MiB back: one call, split over threads, the batch call, after advice.
  std::printf("[speed] 256 MiB (ranges 0..3) device -> host, GB/s\n");
  auto toDevice = [&] {
    CK(cudaMemPrefetchAsync(m, 4 * R, at(true), 0, s));
    CK(cudaStreamSynchronize(s));
  };
  for (int threads : {1, 4, 8, 16}) {
    toDevice();
    const double a = now();
    std::vector<std::thread> th;
    for (int k = 0; k < threads; ++k)
      th.emplace_back([&, k] {
        cudaStream_t st;
        CK(cudaSetDevice(0));
        CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        const size_t part = 4 * R / threads;
        CK(cudaMemPrefetchAsync(m + k * part, part, at(false), 0, st));
        CK(cudaStreamSynchronize(st));
        CK(cudaStreamDestroy(st));
      });
    for (auto& x : th) x.join();
    std::printf("  %2d threads: %.1f\n", threads, 4 * R / (now() - a) / 1e9);
  }
  {
    toDevice();
    std::vector<void*> ps;
    std::vector<size_t> ss;
    for (size_t o = 0; o < 4 * R; o += 2 * kMiB) {
      ps.push_back(m + o);
      ss.push_back(2 * kMiB);
    }
    std::vector<cudaMemLocation> loc(1, at(false));
    size_t idx = 0;
    const double a = now();
    CK(cudaMemPrefetchBatchAsync(ps.data(), ss.data(), ps.size(), loc.data(), &idx, 1, 0, s));
    CK(cudaStreamSynchronize(s));
    std::printf("  batch of %zu 2 MiB pieces: %.1f\n", ps.size(), 4 * R / (now() - a) / 1e9);
  }
  {  // the destination host pages already exist (a host copy read-duplicated): is the copy faster?
    for (size_t i = 0; i < 4; ++i) advise(i, cudaMemAdviseUnsetPreferredLocation, false);
    for (size_t i = 0; i < 4; ++i) advise(i, cudaMemAdviseSetReadMostly, false);
    toDevice();  // read-only duplicate on the device, host copy kept
    const long a = usedMiB();
    double t0 = now();
    for (size_t i = 0; i < 4; ++i) advise(i, cudaMemAdviseSetPreferredLocation, false);
    for (size_t i = 0; i < 4; ++i) advise(i, cudaMemAdviseUnsetReadMostly, false);  // collapse to the host copy
    const double collapse = now() - t0;
    std::printf("  read-mostly duplicate collapsed to host: %.1f GB/s equivalent (%.2f ms), in use %ld -> %ld\n", 4 * R / collapse / 1e9, collapse * 1e3, a, usedMiB());
  }
  // Eviction of bytes the GPU wrote (a training step's evictions nearly all are): the plain
  // prefetch, advice first, and a detour through a read-mostly duplicate collapsed to the host.
  std::printf("[dirty] 256 MiB written by a kernel, then sent to the host, GB/s (value checked on the host)\n");
  auto dirty = [&](float v) {
    for (size_t i = 0; i < 4; ++i) {
      advise(i, cudaMemAdviseUnsetReadMostly, false);
      advise(i, cudaMemAdviseUnsetPreferredLocation, false);
    }
    toDevice();
    fill<<<1024, 256, 0, s>>>(reinterpret_cast<float*>(m), 4 * R / 4, v);
    CK(cudaStreamSynchronize(s));
  };
  auto check = [&](float v) {
    const float* f = reinterpret_cast<const float*>(m);
    for (size_t i = 0; i < 4 * R / 4; i += 4099)
      if (f[i] != v) return false;
    return true;
  };
  {
    dirty(2.f);
    const double a = now();
    CK(cudaMemPrefetchAsync(m, 4 * R, at(false), 0, s));
    CK(cudaStreamSynchronize(s));
    std::printf("  prefetch: %.1f (%s)\n", 4 * R / (now() - a) / 1e9, check(2.f) ? "ok" : "WRONG");
  }
  {
    dirty(3.f);
    const double a = now();
    for (size_t i = 0; i < 4; ++i) advise(i, cudaMemAdviseSetPreferredLocation, false);
    CK(cudaMemPrefetchAsync(m, 4 * R, at(false), 0, s));
    CK(cudaStreamSynchronize(s));
    std::printf("  preferred host, then prefetch: %.1f (%s)\n", 4 * R / (now() - a) / 1e9, check(3.f) ? "ok" : "WRONG");
  }
  {
    dirty(4.f);
    const double a = now();
    for (size_t i = 0; i < 4; ++i) advise(i, cudaMemAdviseSetReadMostly, false);
    CK(cudaMemPrefetchAsync(m, 4 * R, at(false), 0, s));  // a host duplicate
    CK(cudaStreamSynchronize(s));
    const double b = now();
    for (size_t i = 0; i < 4; ++i) advise(i, cudaMemAdviseSetPreferredLocation, false);
    for (size_t i = 0; i < 4; ++i) advise(i, cudaMemAdviseUnsetReadMostly, false);  // collapse to the host copy
    std::printf("  read-mostly duplicate on the host, collapsed there: %.1f (copy %.2f ms, collapse %.2f ms) (%s)\n", 4 * R / (now() - a) / 1e9, (b - a) * 1e3, (now() - b) * 1e3,
                check(4.f) ? "ok" : "WRONG");
  }
  {
    dirty(5.f);
    void* h = nullptr;
    CK(cudaMallocHost(&h, 4 * R));
    const double a = now();
    CK(cudaMemcpyAsync(h, m, 4 * R, cudaMemcpyDefault, s));
    CK(cudaStreamSynchronize(s));
    std::printf("  for reference, cudaMemcpy of the device-resident managed range into pinned memory: %.1f\n", 4 * R / (now() - a) / 1e9);
    CK(cudaFreeHost(h));
  }
  // Both directions at once, as a scheduler runs them (256 MiB each way, ranges 0..3 and 4..7):
  // does a fetch slow down while an eviction runs, and the other way round?
  {
    std::printf("[both ways] 256 MiB to the device and 256 MiB (written by a kernel) to the host\n");
    char* a = m;          // goes to the device
    char* b = m + 4 * R;  // comes back to the host
    for (size_t i = 0; i < N; ++i) {
      advise(i, cudaMemAdviseUnsetReadMostly, false);
      advise(i, cudaMemAdviseUnsetPreferredLocation, false);
    }
    auto setup = [&] {
      CK(cudaMemPrefetchAsync(a, 4 * R, at(false), 0, s));
      CK(cudaMemPrefetchAsync(b, 4 * R, at(true), 0, s));
      fill<<<1024, 256, 0, s>>>(reinterpret_cast<float*>(b), 4 * R / 4, 6.f);
      CK(cudaStreamSynchronize(s));
    };
    auto timed = [&](char* p, bool dev, double* out) {
      cudaStream_t st;
      CK(cudaSetDevice(0));
      CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      const double t0 = now();
      CK(cudaMemPrefetchAsync(p, 4 * R, at(dev), 0, st));
      CK(cudaStreamSynchronize(st));
      *out = now() - t0;
      CK(cudaStreamDestroy(st));
    };
    double tin = 0, tout = 0;
    setup();
    timed(a, true, &tin);
    setup();
    timed(b, false, &tout);
    std::printf("  alone: in %.1f GB/s (%.1f ms), out %.1f GB/s (%.1f ms)\n", 4 * R / tin / 1e9, tin * 1e3, 4 * R / tout / 1e9, tout * 1e3);
    setup();
    const double t0 = now();
    std::thread x([&] { timed(a, true, &tin); }), y([&] { timed(b, false, &tout); });
    x.join();
    y.join();
    std::printf("  together: in %.1f ms, out %.1f ms, both done after %.1f ms\n", tin * 1e3, tout * 1e3, (now() - t0) * 1e3);
  }
  {  // pinned copy for reference
    void *h = nullptr, *d = nullptr;
    CK(cudaMallocHost(&h, 4 * R));
    CK(cudaMalloc(&d, 4 * R));
    CK(cudaMemcpyAsync(h, d, 4 * R, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    const double a = now();
    CK(cudaMemcpyAsync(h, d, 4 * R, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    std::printf("  pinned copy: %.1f\n", 4 * R / (now() - a) / 1e9);
    CK(cudaFree(d));
    CK(cudaFreeHost(h));
  }
  CK(cudaFree(m));
  std::printf("[freed] after cudaFree of the managed block %ld\n", usedMiB());
  return 0;
}
