// read_rows.cc: readRows, the positional gather of a shuffled streaming window (src/train/
// stream.ts): rows scattered over a file go straight into a window buffer at their positions,
// off the JS thread and in parallel parts (one fs.read per row from JS costs more than the read).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <vector>

#include "convert.h"
#include "functions.h"
#include "js_error.h"
#include "promise_worker.h"

namespace nna::addon {

namespace {

// Rows closer than this are read as one span through a scratch buffer (one call instead of
// many), up to kSpanBytes a span.
constexpr uint64_t kGapBytes = 16384, kSpanBytes = 1 << 20;
// Parts: one per core up to 8 (a pread from the page cache is a syscall and a copy: the cores,
// not the disk, set the pace), of at least 256 rows.
constexpr size_t kMaxThreads = 8, kRowsPerThread = 256;
size_t threads() { return std::clamp<size_t>(std::thread::hardware_concurrency(), 2, kMaxThreads); }

class ReadRowsWorker : public PromiseWorker {
 public:
  ReadRowsWorker(Napi::Env env, int fd, uint64_t offset, uint64_t rowBytes, std::vector<double> rows, std::vector<uint32_t> at, Napi::Uint8Array dest)
      : PromiseWorker(env, "nn-arena:read-rows"), fd_(fd), offset_(offset), rowBytes_(rowBytes), rows_(std::move(rows)), at_(std::move(at)),
        dest_(Napi::Persistent(dest)), out_(dest.Data()) {}

 private:
  void Run() override {
    const size_t n = rows_.size(), parts = std::max<size_t>(1, std::min(threads(), n / kRowsPerThread));
    std::vector<int64_t> got(parts, 0);
    std::vector<std::thread> pool;
    try {
      for (size_t p = 1; p < parts; ++p) pool.emplace_back([&, p] { got[p] = part(n * p / parts, n * (p + 1) / parts); });
    } catch (...) {  // no thread: this one reads those parts too
    }
    got[0] = part(0, n / parts);
    for (size_t p = pool.size() + 1; p < parts; ++p) got[p] = part(n * p / parts, n * (p + 1) / parts);
    for (auto& t : pool) t.join();
    result_ = 0;
    for (int64_t g : got) {
      if (g < 0) { result_ = g; return; }
      result_ += g;
    }
  }
  Napi::Value Result() override { return Napi::Number::New(Env(), double(result_)); }

  // Reads sorted rows [from, to): bytes read, or -errno.
  int64_t part(size_t from, size_t to) noexcept {
    try {
      return read(from, to);
    } catch (...) {  // the scratch buffer
      return -ENOMEM;
    }
  }
  int64_t read(size_t from, size_t to) {
    std::vector<uint8_t> scratch;
    int64_t total = 0;
    for (size_t i = from; i < to;) {
      // A span: the next rows while gaps are small; read in place when the rows are contiguous
      // in the destination too (one row, or an unshuffled run).
      size_t j = i + 1;
      bool inPlace = true;
      const uint64_t first = uint64_t(rows_[i]);
      while (j < to) {
        const uint64_t r = uint64_t(rows_[j]), prev = uint64_t(rows_[j - 1]);
        if ((r - prev - 1) * rowBytes_ > kGapBytes || (r - first + 1) * rowBytes_ > kSpanBytes) break;
        inPlace = inPlace && r == prev + 1 && at_[j] == at_[j - 1] + 1;
        ++j;
      }
      const uint64_t bytes = (uint64_t(rows_[j - 1]) - first + 1) * rowBytes_;
      uint8_t* buf = out_ + uint64_t(at_[i]) * rowBytes_;
      if (!inPlace) {
        if (scratch.size() < bytes) scratch.resize(bytes);
        buf = scratch.data();
      }
      const int64_t got = readAll(buf, bytes, offset_ + first * rowBytes_);
      if (got < 0) return got;
      if (!inPlace) {
        for (size_t k = i; k < j; ++k) {
          const uint64_t src = (uint64_t(rows_[k]) - first) * rowBytes_;
          if (src + rowBytes_ <= uint64_t(got)) std::copy_n(buf + src, rowBytes_, out_ + uint64_t(at_[k]) * rowBytes_);
        }
        total += int64_t(std::min<uint64_t>(uint64_t(got), uint64_t(j - i) * rowBytes_));  // short only at the file's end
      } else {
        total += got;
      }
      if (uint64_t(got) < bytes) return total;  // the file ended: the caller reports it
      i = j;
    }
    return total;
  }
  int64_t readAll(uint8_t* buf, uint64_t bytes, uint64_t at) const {
    uint64_t done = 0;
    while (done < bytes) {
      const ssize_t r = pread(fd_, buf + done, bytes - done, off_t(at + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -errno;
      if (r == 0) break;
      done += uint64_t(r);
    }
    return int64_t(done);
  }

  int fd_;
  uint64_t offset_, rowBytes_;
  std::vector<double> rows_;
  std::vector<uint32_t> at_;
  Napi::Reference<Napi::Uint8Array> dest_;  // the destination lives until the read ends
  uint8_t* out_;
  int64_t result_ = 0;
};

// readRows(fd, offset, rowBytes, rows: Float64Array (ascending), at: Uint32Array, dest: Uint8Array):
// row rows[i] of the file (rowBytes each from byte offset) into dest at row at[i]. Resolves with
// the bytes read (fewer: the file ended) or -errno.
Napi::Value ReadRows(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t fd = exactU64(env, info[0], "fd"), offset = exactU64(env, info[1], "offset"), rowBytes = exactU64(env, info[2], "rowBytes");
  if (!info[3].IsTypedArray() || info[3].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) throwJs(env, "BAD_ARGUMENT", "rows must be a Float64Array");
  if (!info[4].IsTypedArray() || info[4].As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array) throwJs(env, "BAD_ARGUMENT", "at must be a Uint32Array");
  if (!info[5].IsTypedArray() || info[5].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) throwJs(env, "BAD_ARGUMENT", "dest must be a Uint8Array");
  const Napi::Float64Array r = info[3].As<Napi::Float64Array>();
  const Napi::Uint32Array a = info[4].As<Napi::Uint32Array>();
  const Napi::Uint8Array dest = info[5].As<Napi::Uint8Array>();
  if (fd > 0x7fffffff || rowBytes == 0 || r.ElementLength() != a.ElementLength()) throwJs(env, "BAD_ARGUMENT", "readRows: bad fd, row size or lengths");
  std::vector<double> rows(r.Data(), r.Data() + r.ElementLength());
  std::vector<uint32_t> at(a.Data(), a.Data() + a.ElementLength());
  const uint64_t capacity = dest.ByteLength() / rowBytes;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!(rows[i] >= 0 && rows[i] < 9007199254740992.0) || (i > 0 && !(rows[i] > rows[i - 1])) || at[i] >= capacity)
      throwJs(env, "BAD_ARGUMENT", "readRows: rows must ascend and every row fit dest");
  }
  auto* w = new ReadRowsWorker(env, int(fd), offset, rowBytes, std::move(rows), std::move(at), dest);
  Napi::Promise p = w->promise();
  w->Queue();
  return p;
}

}  // namespace

void registerReadRows(Napi::Env env, Napi::Object exports) { exportFunctions(env, exports, {{"readRows", ReadRows}}); }

}  // namespace nna::addon
