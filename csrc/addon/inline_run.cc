#include "inline_run.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "../include/nn_arena.h"
#include "run_worker.h"

namespace nna::addon {

std::string runWithCopies(Block& b, RunParams p, const std::vector<Range>& into, const std::vector<Range>& back) {
  const RunCopies copies = b.runCopies(into, back);
  const bool queued = b.options().cuda && b.options().memory == Memory::Device;
  if (!queued) b.transfer(into, Dir::ToDevice);
  std::string path;
  {
    std::lock_guard<std::mutex> lock(b.mutex());
    b.backend().activate();
    if (queued) p.copies = &copies;
    path = runReplica(b, nullptr, p);
  }
  if (queued)
    b.countRunCopies(copies);
  else
    b.transfer(back, Dir::ToHost);
  return path;
}

namespace {

// Rows [first, first + rows) of x, converted and checked, into dst (core/checked_copy.h); at a
// non-finite element, false with r.bad (its index in x) and r.value set.
bool checkRows(uint8_t* dst, bool f64, const TypedSource& x, uint64_t first, uint64_t rows, uint64_t inputs, PredictRows& r) {
  const CheckedCopy c = checkedCopy(dst, f64, static_cast<const uint8_t*>(x.data) + first * inputs * bytesOf(x.type), x.type, rows * inputs, false);
  if (c.bad < 0) return true;
  r.bad = int64_t(first * inputs) + c.bad;
  r.value = c.value;
  return false;
}

bool overlaps(const void* p, uint64_t bytes, const Block& b) {
  const uint8_t* a = static_cast<const uint8_t*>(p);
  return a < b.host() + b.total() && b.host() < a + bytes;
}

// More than one batch on plain CUDA device memory: one fed run (RunFeed), each group of batches
// staged while the device runs the one before, one wait.
PredictRows predictFed(Block& b, const RunParams& params, const TypedSource& x, uint64_t count, uint8_t* out, const PredictShape& s, bool f64) {
  const uint64_t bpe = f64 ? 8 : 4;
  PredictRows r;
  RunFeed f;
  f.batches = (count + s.batch - 1) / s.batch;
  f.batch = s.batch;
  f.z0 = s.z0;
  f.zOut = s.zOut;
  f.inRow = s.inputs * bpe;
  f.outRow = s.outputs * bpe;
  // A group of about 1 MB of rows: one wake of the copy's threads each (a batch of S, 313 KB,
  // took the threads longer to wake and join than to copy), and the device starts after the first.
  constexpr uint64_t kGroupBytes = uint64_t(1) << 20;
  f.group = std::max<uint64_t>(1, std::min<uint64_t>(f.batches - 1, kGroupBytes / (s.batch * f.inRow)));
  const RunCopies whole = b.runCopies({{s.z0, s.batch * f.inRow}}, {{s.zOut, s.batch * f.outRow}});  // the ranges, checked once
  f.stage = [&](uint64_t k, uint64_t n, uint8_t* in) -> uint64_t {
    const uint64_t first = k * s.batch, rows = std::min(n * s.batch, count - first);
    return checkRows(in, f64, x, first, rows, s.inputs, r) ? rows : 0;
  };
  f.take = [&](uint64_t k, uint64_t rows, const uint8_t* o) {
    std::memcpy(out + k * s.batch * f.outRow, o, rows * f.outRow);
    RunCopies one;
    one.in.push_back({s.z0, rows * f.inRow});
    one.out.push_back({s.zOut, rows * f.outRow});
    b.countRunCopies(one);
    ++r.batches;
  };
  RunParams p = params;
  p.rows = std::min(s.batch, count);
  p.feed = &f;
  std::lock_guard<std::mutex> lock(b.mutex());
  b.backend().activate();
  const uint64_t slotIn = f.group * s.batch * f.inRow, slotOut = f.group * s.batch * f.outRow;
  uint8_t* staging = b.staging(2 * (slotIn + slotOut));
  f.last = {whole.host + s.z0, whole.host + s.zOut};
  f.slots[0] = {staging, staging + slotIn};
  f.slots[1] = {staging + slotIn + slotOut, staging + 2 * slotIn + slotOut};
  r.path = runReplica(b, nullptr, p);
  return r;
}

}  // namespace

PredictRows predictRows(Block& b, const RunParams& params, const TypedSource& x, uint64_t count, uint8_t* out, const PredictShape& s) {
  nna_header h;
  std::memcpy(&h, b.header(), sizeof h);
  const bool f64 = h.dtype == NNA_FLOAT64;
  const uint64_t bpe = f64 ? 8 : 4;
  // x or out in the arena's own host memory (a view of it) stays on the batch-by-batch path,
  // whose copies never race with the slots' transfers.
  if (count > s.batch && b.options().cuda && b.options().memory == Memory::Device && !overlaps(x.data, count * s.inputs * bytesOf(x.type), b) &&
      !overlaps(out, count * s.outputs * bpe, b))
    return predictFed(b, params, x, count, out, s, f64);
  PredictRows r;
  RunParams p = params;
  for (uint64_t first = 0; first < count; first += s.batch) {
    const uint64_t rows = std::min(s.batch, count - first);
    if (!checkRows(b.host() + s.z0, f64, x, first, rows, s.inputs, r)) return r;
    p.rows = rows;
    r.path = runWithCopies(b, p, {{s.z0, rows * s.inputs * bpe}}, {{s.zOut, rows * s.outputs * bpe}});
    std::memmove(out + first * s.outputs * bpe, b.host() + s.zOut, rows * s.outputs * bpe);  // out may be a view of the arena
    ++r.batches;
  }
  return r;
}

}  // namespace nna::addon
