// read_rows.cc: RowFile, the rows of a streamed .npy file (src/train/npy-rows.ts) gathered into
// a window: positions [start, start + n) of the epoch's order k -> (a k + c) mod N (a = 1, c = 0:
// the file in order), in parallel parts on the gather pool (gather_pool.h).
// Two ways to read (NN_ARENA_GATHER): mmap (default), the file mapped once for the stream and
// each row one memcpy from the page cache (no syscall a row); pread, each part's rows sorted
// and runs of adjacent rows read by one preadv. On a file in the page cache mmap was the faster
// (bench/gather.ts). A file cut short after it was opened is found by an fstat before every
// window (the rows past its end are not read: the window comes back short); one cut while a
// window is read faults a mapped read (SIGBUS), which fault_guard.h turns into a short window.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>
#include <vector>

#include "../core/env.h"
#include "convert.h"
#include "fault_guard.h"
#include "gather_pool.h"
#include "js_error.h"
#include "read_rows.h"

namespace nna::addon {

RowFile::Source::~Source() {
  if (map) munmap(map, mapBytes);
  if (fd >= 0) close(fd);
}

namespace {

uint64_t mulmod(uint64_t a, uint64_t b, uint64_t n) { return uint64_t((unsigned __int128)a * b % n); }

class GatherRowsTask : public GatherTask {
 public:
  GatherRowsTask(std::shared_ptr<RowFile::Source> s, uint8_t* dest, uint64_t start, uint64_t n, uint64_t a, uint64_t c, uint64_t valid, bool mapped)
      : s_(std::move(s)), dest_(dest), start_(start), n_(n), a_(a), c_(c), valid_(valid), mapped_(mapped) {}
  size_t items(size_t) const override { return n_; }
  uint64_t step(uint64_t r) const { return r + a_ >= s_->rows ? r + a_ - s_->rows : r + a_; }
  size_t grain(size_t) const override { return std::max<uint64_t>(64, (1 << 20) / s_->rowBytes); }  // about 1 MiB a part at least
  double result() const override { return error_ ? double(error_) : double(bytes_.load()); }

  void run(size_t, size_t from, size_t to) override {
    const uint64_t N = s_->rows, rb = s_->rowBytes;
    uint64_t row = (mulmod(a_, start_ + from, N) + c_) % N, got = 0;
    if (mapped_) {
      const uint8_t* base = s_->map + s_->offset;
      // A cut while the part is read faults the copy: the part then counts nothing, and the
      // window comes back short (the file ended) instead of the process ending.
      if (!guardMappedReads([&] {
            for (size_t i = from; i < to;) {
              size_t j = i + 1;  // a run of adjacent rows (a whole part, in order): one copy
              uint64_t next = step(row);
              while (j < to && next == row + (j - i)) next = step(next), ++j;
              const uint64_t k = row >= valid_ ? 0 : std::min<uint64_t>(j - i, valid_ - row);  // rows past a cut are not read
              std::memcpy(dest_ + i * rb, base + row * rb, k * rb);
              got += k * rb;
              row = next;
              i = j;
            }
          }))
        got = 0;
    } else {
      got = readParts(from, to, row);
    }
    bytes_ += got;
  }

 private:
  // Rows sorted by place in the file; adjacent ones go in one preadv (each into its own row).
  uint64_t readParts(size_t from, size_t to, uint64_t row) {
    const uint64_t rb = s_->rowBytes;
    std::vector<std::pair<uint64_t, uint64_t>> rows;  // (file row, window row)
    rows.reserve(to - from);
    for (size_t i = from; i < to; ++i, row = step(row))
      if (row < valid_) rows.emplace_back(row, i);
    std::sort(rows.begin(), rows.end());
    std::vector<iovec> iov;
    uint64_t got = 0;
    for (size_t i = 0; i < rows.size();) {
      iov.clear();
      size_t j = i;
      for (; j < rows.size() && iov.size() < IOV_MAX && (j == i || rows[j].first == rows[j - 1].first + 1); ++j) {
        uint8_t* at = dest_ + rows[j].second * rb;
        if (!iov.empty() && static_cast<uint8_t*>(iov.back().iov_base) + iov.back().iov_len == at)
          iov.back().iov_len += rb;
        else
          iov.push_back({at, rb});
      }
      const int64_t r = readv(iov, s_->offset + rows[i].first * rb, (j - i) * rb);
      if (r < 0) {
        error_ = r;
        return got;
      }
      got += uint64_t(r);
      if (uint64_t(r) < (j - i) * rb) return got;  // the file ended
      i = j;
    }
    return got;
  }
  int64_t readv(std::vector<iovec>& iov, uint64_t at, uint64_t bytes) const {
    uint64_t done = 0;
    size_t k = 0;
    while (done < bytes) {
      const ssize_t r = preadv(s_->fd, iov.data() + k, int(iov.size() - k), off_t(at + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -errno;
      if (r == 0) break;
      done += uint64_t(r);
      for (uint64_t left = uint64_t(r); k < iov.size() && left > 0;) {  // past what was read
        const uint64_t take = std::min<uint64_t>(left, iov[k].iov_len);
        iov[k].iov_base = static_cast<uint8_t*>(iov[k].iov_base) + take;
        iov[k].iov_len -= take;
        left -= take;
        if (iov[k].iov_len == 0) ++k;
      }
    }
    return int64_t(done);
  }

  std::shared_ptr<RowFile::Source> s_;
  uint8_t* dest_;
  uint64_t start_, n_, a_, c_, valid_;
  bool mapped_;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<int64_t> error_{0};
};

}  // namespace

Napi::Function RowFile::Define(Napi::Env env) { return DefineClass(env, "RowFile", {InstanceMethod<&RowFile::Gather>("gather"), InstanceMethod<&RowFile::Close>("close")}); }

// new RowFile(fd, dataOffset, rowBytes, rows): the rows of an open file (fd is duplicated: the
// caller closes its own).
RowFile::RowFile(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RowFile>(info) {
  Napi::Env env = info.Env();
  const uint64_t fd = exactU64(env, info[0], "fd"), offset = exactU64(env, info[1], "dataOffset");
  const uint64_t rowBytes = exactU64(env, info[2], "rowBytes"), rows = exactU64(env, info[3], "rows");
  if (fd > INT_MAX || rowBytes == 0 || rows == 0 || rows > (UINT64_MAX - offset) / rowBytes) throwJs(env, "BAD_ARGUMENT", "RowFile: bad fd, row size or row count");
  auto s = std::make_shared<Source>();
  s->fd = fcntl(int(fd), F_DUPFD_CLOEXEC, 0);
  if (s->fd < 0) throwJs(env, "BAD_FILE", std::string("the file cannot be read: ") + std::strerror(errno));
  s->offset = offset;
  s->rowBytes = rowBytes;
  s->rows = rows;
  source_ = std::move(s);
}

void RowFile::Finalize(Napi::BasicEnv) { source_.reset(); }

// gather(dest: Uint8Array, start, n, a, c): file rows (a k + c) mod rows for k in [start,
// start + n) into dest's rows 0..n-1. Resolves with the bytes read (fewer: the file ended), or
// -errno.
Napi::Value RowFile::Gather(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!source_) throwJs(env, "DISPOSED", "the streamed file was closed");
  Napi::Uint8Array dest = uint8Array(env, info[0], "dest");
  const uint64_t start = exactU64(env, info[1], "start"), n = exactU64(env, info[2], "n"), a = exactU64(env, info[3], "a"), c = exactU64(env, info[4], "c");
  const std::shared_ptr<Source> s = source_;
  if (a == 0 || a >= std::max<uint64_t>(2, s->rows) || c >= s->rows || n > s->rows || n * s->rowBytes > dest.ByteLength())
    throwJs(env, "BAD_ARGUMENT", "RowFile.gather: bad order or window");
  const std::string how = guarded(env, [] { return knob(Knob::Gather, "mmap"); });
  if (how != "mmap" && how != "pread") throw jsError(env, "BAD_OPTION", "NN_ARENA_GATHER must be mmap or pread, got '" + how + "'", "", knobName(Knob::Gather));
  struct stat st;
  if (fstat(s->fd, &st) != 0) throwJs(env, "BAD_FILE", std::string("the file cannot be read: ") + std::strerror(errno));
  const uint64_t size = uint64_t(st.st_size), valid = size <= s->offset ? 0 : std::min(s->rows, (size - s->offset) / s->rowBytes);
  bool mapped = how == "mmap";
  if (mapped && !s->map) {  // the whole file, once: its pages stay mapped from window to window
    void* m = mmap(nullptr, size_t(s->offset + s->rows * s->rowBytes), PROT_READ, MAP_SHARED, s->fd, 0);
    if (m == MAP_FAILED)
      mapped = false;  // pread then
    else
      s->map = static_cast<uint8_t*>(m), s->mapBytes = size_t(s->offset + s->rows * s->rowBytes);
  }
  auto task = std::make_shared<GatherRowsTask>(s, dest.Data(), start, n, a, c, valid, mapped);
  return startTask(env, task, {dest});
}

// close(): the file goes once no gather is in flight.
Napi::Value RowFile::Close(const Napi::CallbackInfo& info) {
  source_.reset();
  return info.Env().Undefined();
}

}  // namespace nna::addon
