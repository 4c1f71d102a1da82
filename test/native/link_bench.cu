// link_bench.cu: the host <-> device link as each memory method sees it, measured in the same
// run as the training rows of bench/um.ts (their lower bound is bytes / these rates). Host wall
// time around each call and its synchronisation: what a scheduler waits for.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../../csrc/core/backend.h"
#include "link_bench.h"
#include "../../csrc/core/failure.h"
#include "../../csrc/cuda/check.cuh"

namespace nna {
namespace {

double gbps(size_t bytes, double seconds) { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0; }

// Median of three timed repetitions of `once` (each ends synchronised).
template <class F> double seconds(F once) {
  std::vector<double> t;
  for (int i = 0; i < 3; ++i) {
    const auto a = std::chrono::steady_clock::now();
    once();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[1];
}

cudaMemLocation at(bool device, int id) {
  cudaMemLocation l{};
  l.type = device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  l.id = device ? id : 0;
  return l;
}

}  // namespace

LinkRates measureLink(size_t bytes) {
  LinkRates r;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  size_t freeB = 0, totalB = 0;
  CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
  if (bytes > freeB / 10 * 9)
    NNA_FAIL("MANAGED_LIMIT", "link measurement of " + std::to_string(bytes) + " bytes refused: above 90% of the " + std::to_string(freeB) + " bytes free");
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *host = nullptr, *dev0 = nullptr, *managed = nullptr;
  try {
    CUDA_CHECK(cudaMallocHost(&host, bytes));
    CUDA_CHECK(cudaMalloc(&dev0, bytes));
    std::memset(host, 1, bytes);
    auto copy = [&](bool toDevice) {
      CUDA_CHECK(cudaMemcpyAsync(toDevice ? dev0 : host, toDevice ? host : dev0, bytes, toDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
    };
    copy(true);  // warm-up
    r.copyToDevice = gbps(bytes, seconds([&] { copy(true); }));
    r.copyToHost = gbps(bytes, seconds([&] { copy(false); }));
    CUDA_CHECK(cudaFree(dev0));
    dev0 = nullptr;
    CUDA_CHECK(cudaFreeHost(host));
    host = nullptr;

    const uint64_t before = deviceBytesInUse();
    CUDA_CHECK(cudaMallocManaged(&managed, bytes, cudaMemAttachGlobal));
    std::memset(managed, 1, bytes);  // pages populated on the host
    auto prefetch = [&](bool toDevice) {
      CUDA_CHECK(cudaMemPrefetchAsync(managed, bytes, at(toDevice, dev), 0, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
    };
    prefetch(true);  // warm-up: first population of the device pages
    prefetch(false);
    std::vector<double> in, out;
    for (int i = 0; i < 3; ++i) {  // each way in turn: a prefetch only moves what is elsewhere
      const auto a = std::chrono::steady_clock::now();
      prefetch(true);
      const auto b = std::chrono::steady_clock::now();
      prefetch(false);
      const auto c = std::chrono::steady_clock::now();
      in.push_back(std::chrono::duration<double>(b - a).count());
      out.push_back(std::chrono::duration<double>(c - b).count());
    }
    std::sort(in.begin(), in.end());
    std::sort(out.begin(), out.end());
    r.prefetchToDevice = gbps(bytes, in[1]);
    r.prefetchToHost = gbps(bytes, out[1]);
    // Every page is on the host again: what the device still holds for the range is what the
    // driver keeps of its GPU pages after they migrated away.
    r.prefetchRetainedBytes = int64_t(deviceBytesInUse()) - int64_t(before);

    // The way back split over 4 threads, each with its own stream: is it the driver's CPU
    // work per call, or the link, that bounds it?
    prefetch(true);
    {
      const auto a = std::chrono::steady_clock::now();
      std::vector<std::thread> threads;
      std::vector<std::string> errors(4);
      for (int i = 0; i < 4; ++i)
        threads.emplace_back([&, i] {
          try {
            CUDA_CHECK(cudaSetDevice(dev));
            cudaStream_t st = nullptr;
            CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
            const size_t part = bytes / 4;
            CUDA_CHECK(cudaMemPrefetchAsync(static_cast<char*>(managed) + part * i, part, at(false, 0), 0, st));
            CUDA_CHECK(cudaStreamSynchronize(st));
            CUDA_CHECK(cudaStreamDestroy(st));
          } catch (const Failure& e) { errors[i] = e.what(); }
        });
      for (std::thread& t : threads) t.join();
      for (const std::string& e : errors)
        if (!e.empty()) NNA_FAIL("CUDA_ERROR", e);
      r.prefetchToHost4 = gbps(bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }

    // Discards: the bytes of a range are dead, so moving it needs no copy.
    void* ptr = managed;
    size_t size = bytes, first = 0;
    auto discardTo = [&](bool toDevice) -> cudaError_t {
      cudaMemLocation loc = at(toDevice, dev);
      const cudaError_t e = cudaMemDiscardAndPrefetchBatchAsync(&ptr, &size, 1, &loc, &first, 1, 0, s);
      if (e == cudaSuccess) CUDA_CHECK(cudaStreamSynchronize(s));
      return e;
    };
    prefetch(true);
    auto a = std::chrono::steady_clock::now();
    cudaError_t e = discardTo(false);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      r.discard = std::string("cudaMemDiscardAndPrefetchBatchAsync: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    } else {
      r.discardToHost = gbps(bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
      a = std::chrono::steady_clock::now();
      CUDA_CHECK(discardTo(true));
      r.discardToDevice = gbps(bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
      // Discard alone, of device-resident pages: does the device get its memory back?
      prefetch(true);
      const uint64_t before = deviceBytesInUse();
      a = std::chrono::steady_clock::now();
      CUDA_CHECK(cudaMemDiscardBatchAsync(&ptr, &size, 1, 0, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      r.discardOnly = gbps(bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
      r.discardFreedBytes = int64_t(before) - int64_t(deviceBytesInUse());
    }
    CUDA_CHECK(cudaFree(managed));
    managed = nullptr;
  } catch (...) {  // free what was taken; the first failure is the one reported
    if (managed) cudaFree(managed);
    if (dev0) cudaFree(dev0);
    if (host) cudaFreeHost(host);
    cudaStreamDestroy(s);
    throw;
  }
  CUDA_CHECK(cudaStreamDestroy(s));
  return r;
}

}  // namespace nna
