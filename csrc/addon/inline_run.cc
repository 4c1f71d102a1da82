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

PredictRows predictRows(Block& b, const RunParams& params, const TypedSource& x, uint64_t count, uint8_t* out, const PredictShape& s) {
  nna_header h;
  std::memcpy(&h, b.header(), sizeof h);
  const bool f64 = h.dtype == NNA_FLOAT64;
  const uint64_t bpe = f64 ? 8 : 4;
  PredictRows r;
  RunParams p = params;
  for (uint64_t first = 0; first < count; first += s.batch) {
    const uint64_t rows = std::min(s.batch, count - first);
    const CheckedCopy c = checkedCopy(b.host() + s.z0, f64, static_cast<const uint8_t*>(x.data) + first * s.inputs * bytesOf(x.type), x.type, rows * s.inputs, false);
    if (c.bad >= 0) {
      r.bad = int64_t(first * s.inputs) + c.bad;
      r.value = c.value;
      return r;
    }
    p.rows = rows;
    r.path = runWithCopies(b, p, {{s.z0, rows * s.inputs * bpe}}, {{s.zOut, rows * s.outputs * bpe}});
    std::memmove(out + first * s.outputs * bpe, b.host() + s.zOut, rows * s.outputs * bpe);  // out may be a view of the arena
    ++r.batches;
  }
  return r;
}

}  // namespace nna::addon
