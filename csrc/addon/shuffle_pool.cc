// shuffle_pool.cc: the shuffle buffer of an iterable (src/train/shuffle-buffer.ts describes the
// order). The draws are the JS generator's (src/train/rng.ts: splitmix64, the same doubles), one
// at a time in order, so a seed gives the order the JS buffer gave; only the bookkeeping (which
// row goes where) is serial, on the JS thread; the row copies then run in parallel: first every
// window row out (from the held rows as they were, or from the batch for a row that came in and
// went out within the same push), then the batch's rows that stay into their slots.
#include "shuffle_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "convert.h"
#include "gather_pool.h"
#include "js_error.h"

namespace nna::addon {

namespace {

// src/train/rng.ts's Rng: next() and int(n), bit for bit.
struct SplitMix {
  uint64_t s;
  double next() {
    s += 0x9e3779b97f4a7c15ULL;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return double(z >> 11) / 9007199254740992.0;
  }
  uint64_t below(uint64_t n) { return uint64_t(std::floor(next() * double(n))); }
};

// A copy of one row's x and y.
struct Move {
  uint8_t* dx;
  uint8_t* dy;
  const uint8_t* sx;
  const uint8_t* sy;
};

class CopyTask : public GatherTask {
 public:
  CopyTask(std::shared_ptr<ShufflePool::Rows> r, std::shared_ptr<bool> busy) : r_(std::move(r)), busy_(std::move(busy)) {}
  std::vector<Move> phase_[2];  // out to the window, then in to the held rows
  size_t phases() const override { return 2; }
  size_t items(size_t p) const override { return phase_[p].size(); }
  size_t grain(size_t) const override { return std::max<uint64_t>(64, (1 << 20) / (r_->xb + r_->yb)); }
  void run(size_t p, size_t from, size_t to) override {
    for (size_t i = from; i < to; ++i) {
      const Move& m = phase_[p][i];
      std::memcpy(m.dx, m.sx, r_->xb);
      std::memcpy(m.dy, m.sy, r_->yb);
    }
  }
  void settled() override { *busy_ = false; }

 private:
  std::shared_ptr<ShufflePool::Rows> r_;  // the held rows live until the copies end
  std::shared_ptr<bool> busy_;
};

// The generator's state: a BigUint64Array of one, read before the draws and written after.
uint64_t* stateArg(Napi::Env env, const Napi::Value& v) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_biguint64_array || v.As<Napi::TypedArray>().ElementLength() != 1)
    throwJs(env, "BAD_ARGUMENT", "the generator state must be a BigUint64Array of 1");
  Napi::TypedArray t = v.As<Napi::TypedArray>();
  return reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(t.ArrayBuffer().Data()) + t.ByteOffset());
}

}  // namespace

Napi::Function ShufflePool::Define(Napi::Env env) {
  return DefineClass(env, "ShufflePool",
                     {InstanceMethod<&ShufflePool::Push>("push"), InstanceMethod<&ShufflePool::Drain>("drain"), InstanceMethod<&ShufflePool::Reset>("reset"),
                      InstanceMethod<&ShufflePool::Dispose>("dispose")});
}

// new ShufflePool(rows, xRowBytes, yRowBytes)
ShufflePool::ShufflePool(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ShufflePool>(info) {
  Napi::Env env = info.Env();
  size_ = exactU64(env, info[0], "rows");
  const uint64_t xb = exactU64(env, info[1], "xRowBytes"), yb = exactU64(env, info[2], "yRowBytes");
  if (size_ == 0 || size_ > UINT32_MAX || xb == 0 || yb == 0 || xb > (uint64_t(1) << 40) / size_ || yb > (uint64_t(1) << 40) / size_)
    throwJs(env, "BAD_ARGUMENT", "ShufflePool: bad size or row bytes");
  guarded(env, [&] {
    auto r = std::make_shared<Rows>();
    r->xb = xb, r->yb = yb;
    r->x.reset(new uint8_t[size_ * xb]);  // not zeroed: a row is read only once written
    r->y.reset(new uint8_t[size_ * yb]);
    phys_.resize(size_);
    for (uint32_t i = 0; i < size_; ++i) phys_[i] = i;
    batch_.assign(size_, 0), row_.assign(size_, 0), stamp_.assign(size_, 0), writer_.assign(size_, 0);
    rows_ = std::move(r);
  });
}

void ShufflePool::Finalize(Napi::BasicEnv) { rows_.reset(); }

void ShufflePool::check(Napi::Env env) const {
  if (!rows_) throwJs(env, "DISPOSED", "the shuffle buffer was disposed");
  if (*busy_) throwJs(env, "BUSY", "a shuffle buffer copy is in flight");
}

// push(x: Uint8Array, y: Uint8Array, batch, firstRow, outX, outY, outRow, maxOut, state, where):
// the batch's rows (x, y: whole rows of the window's type) in order: while fewer than `rows` are
// held, each is kept; then each draws a held row out to window row outRow, outRow + 1, ... and
// takes its slot, until maxOut are out. where[2 i], where[2 i + 1]: window row i's batch and row.
// Returns [rows taken, rows out, a promise of the copies].
Napi::Value ShufflePool::Push(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  check(env);
  Napi::Uint8Array x = uint8Array(env, info[0], "x"), y = uint8Array(env, info[1], "y"), ox = uint8Array(env, info[4], "outX"), oy = uint8Array(env, info[5], "outY");
  const double batch = double(exactU64(env, info[2], "batch")), first = double(exactU64(env, info[3], "firstRow"));
  const uint64_t outRow = exactU64(env, info[6], "outRow"), maxOut = exactU64(env, info[7], "maxOut");
  uint64_t* state = stateArg(env, info[8]);
  if (!info[9].IsTypedArray() || info[9].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) throwJs(env, "BAD_ARGUMENT", "where must be a Float64Array");
  Napi::Float64Array where = info[9].As<Napi::Float64Array>();
  const uint64_t xb = rows_->xb, yb = rows_->yb, m = x.ByteLength() / xb;
  if (x.ByteLength() % xb || y.ByteLength() != m * yb || (outRow + maxOut) * xb > ox.ByteLength() || (outRow + maxOut) * yb > oy.ByteLength() ||
      2 * (outRow + maxOut) > where.ElementLength())
    throwJs(env, "BAD_ARGUMENT", "ShufflePool.push: rows outside the buffers");
  auto task = guarded(env, [&] { return std::make_shared<CopyTask>(rows_, busy_); });
  uint8_t *hx = rows_->x.get(), *hy = rows_->y.get();
  if (++pushes_ == 0) std::fill(stamp_.begin(), stamp_.end(), 0), pushes_ = 1;
  SplitMix rng{*state};
  uint64_t k = 0, out = 0;
  guarded(env, [&] {  // room first: the loop below then cannot fail half way
    task->phase_[0].reserve(std::min(m, maxOut));
    task->phase_[1].reserve(std::min(m, size_));
  });
  {
    for (; k < m; ++k) {
      uint32_t p;
      if (count_ < size_) {
        p = phys_[count_++];
      } else {
        if (out == maxOut) break;
        p = phys_[rng.below(count_)];
        const uint64_t o = outRow + out++;
        const bool fresh = stamp_[p] == pushes_;  // came in within this push: still in the batch
        task->phase_[0].push_back(
            {ox.Data() + o * xb, oy.Data() + o * yb, fresh ? x.Data() + writer_[p] * xb : hx + uint64_t(p) * xb, fresh ? y.Data() + writer_[p] * yb : hy + uint64_t(p) * yb});
        where[2 * o] = batch_[p], where[2 * o + 1] = row_[p];
      }
      if (stamp_[p] != pushes_) task->phase_[1].push_back({hx + uint64_t(p) * xb, hy + uint64_t(p) * yb, nullptr, nullptr});
      stamp_[p] = pushes_, writer_[p] = uint32_t(k);
      batch_[p] = batch, row_[p] = first + double(k);
    }
    for (Move& mv : task->phase_[1]) {  // each slot takes the last row that came into it
      const uint64_t p = uint64_t(mv.dx - hx) / xb;
      mv.sx = x.Data() + writer_[p] * xb, mv.sy = y.Data() + writer_[p] * yb;
    }
  }
  *state = rng.s;
  *busy_ = true;
  Napi::Promise done = startTask(env, task, {x, y, ox, oy});
  Napi::Array r = Napi::Array::New(env, 3);
  r.Set(0u, Napi::Number::New(env, double(k)));
  r.Set(1u, Napi::Number::New(env, double(out)));
  r.Set(2u, done);
  return r;
}

// drain(outX, outY, outRow, maxOut, state, where): the source is exhausted: up to maxOut held
// rows drawn out, each slot taken by the last held row. Returns [rows out, a promise].
Napi::Value ShufflePool::Drain(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  check(env);
  Napi::Uint8Array ox = uint8Array(env, info[0], "outX"), oy = uint8Array(env, info[1], "outY");
  const uint64_t outRow = exactU64(env, info[2], "outRow"), maxOut = exactU64(env, info[3], "maxOut");
  uint64_t* state = stateArg(env, info[4]);
  if (!info[5].IsTypedArray() || info[5].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) throwJs(env, "BAD_ARGUMENT", "where must be a Float64Array");
  Napi::Float64Array where = info[5].As<Napi::Float64Array>();
  const uint64_t xb = rows_->xb, yb = rows_->yb;
  if ((outRow + maxOut) * xb > ox.ByteLength() || (outRow + maxOut) * yb > oy.ByteLength() || 2 * (outRow + maxOut) > where.ElementLength())
    throwJs(env, "BAD_ARGUMENT", "ShufflePool.drain: rows outside the buffers");
  auto task = guarded(env, [&] { return std::make_shared<CopyTask>(rows_, busy_); });
  SplitMix rng{*state};
  uint64_t out = 0;
  guarded(env, [&] { task->phase_[0].reserve(std::min(maxOut, count_)); });
  {
    for (; out < maxOut && count_ > 0; ++out) {
      const uint64_t j = rng.below(count_), o = outRow + out;
      const uint32_t p = phys_[j];
      task->phase_[0].push_back({ox.Data() + o * xb, oy.Data() + o * yb, rows_->x.get() + uint64_t(p) * xb, rows_->y.get() + uint64_t(p) * yb});
      where[2 * o] = batch_[p], where[2 * o + 1] = row_[p];
      phys_[j] = phys_[--count_], phys_[count_] = p;
    }
  }
  *state = rng.s;
  *busy_ = true;
  Napi::Promise done = startTask(env, task, {ox, oy});
  Napi::Array r = Napi::Array::New(env, 2);
  r.Set(0u, Napi::Number::New(env, double(out)));
  r.Set(1u, done);
  return r;
}

// reset(): no rows held (a new epoch).
Napi::Value ShufflePool::Reset(const Napi::CallbackInfo& info) {
  check(info.Env());
  count_ = 0;
  return info.Env().Undefined();
}

// dispose(): the held rows go once a copy in flight ends.
Napi::Value ShufflePool::Dispose(const Napi::CallbackInfo& info) {
  rows_.reset();
  return info.Env().Undefined();
}

}  // namespace nna::addon
