#include "window_stager.h"

#include <cstring>
#include <mutex>

#include "../budget/budgeted_block.h"
#include "addon_data.h"
#include "arena_handle.h"
#include "convert.h"
#include "js_error.h"
#include "promise_worker.h"
#include "run_worker.h"

namespace nna::addon {

WindowStager::Buffers::~Buffers() {
  try {
    Backend& be = block->backend();
    for (uint8_t* s : slots) be.freeHost(s, bytes, pinned);
    for (uint8_t* s : staged) be.freeDevice(s, bytes, Memory::Device);
  } catch (...) {  // a destructor: a failed free must not end the process
  }
}

namespace {

// Copies a slot's window to the slot's staging buffer, off the JS thread. Its values are
// checked on their way from there into the data regions (run()).
class UploadWorker : public PromiseWorker {
 public:
  UploadWorker(Napi::Env env, Napi::Object owner, int64_t* flag, std::shared_ptr<WindowStager::Buffers> b, uint64_t i, uint64_t xBytes, uint64_t yAt, uint64_t yBytes)
      : PromiseWorker(env, "nn-arena:stream-upload"),
        owner_(Napi::Persistent(owner)),
        flag_(flag),
        b_(std::move(b)),
        slot_(b_->slots[i]),
        staged_(b_->staged[i]),
        xBytes_(xBytes),
        yAt_(yAt),
        yBytes_(yBytes) {}

 private:
  void Run() override {
    const Backend::Copy copies[2] = {{staged_, slot_, xBytes_}, {staged_ + yAt_, slot_ + yAt_, yBytes_}};
    b_->block->backend().copyAside(copies, 2, Dir::ToDevice, false);
    for (const auto& c : copies)
      if (c.bytes) b_->block->countTransfer(Dir::ToDevice, c.bytes);  // after they succeeded
  }
  void Ended(bool) override { *flag_ = -1; }

  Napi::ObjectReference owner_;  // keeps the stager (and its flag) alive
  int64_t* flag_;
  std::shared_ptr<WindowStager::Buffers> b_;
  uint8_t* slot_;
  uint8_t* staged_;
  uint64_t xBytes_, yAt_, yBytes_;
};

}  // namespace

Napi::Function WindowStager::Define(Napi::Env env) {
  return DefineClass(env, "WindowStager",
                     {InstanceMethod<&WindowStager::Slot>("slot"), InstanceMethod<&WindowStager::Upload>("upload"), InstanceMethod<&WindowStager::Run>("run"),
                      InstanceMethod<&WindowStager::Dispose>("dispose")});
}

WindowStager::WindowStager(const Napi::CallbackInfo& info) : Napi::ObjectWrap<WindowStager>(info) {
  Napi::Env env = info.Env();
  const Napi::Value h = info[0];
  if (!h.IsObject() || !h.As<Napi::Object>().InstanceOf(env.GetInstanceData<AddonData>()->arenaClass.Value())) throwJs(env, "BAD_ARGUMENT", "expected an arena handle");
  xOffset_ = exactU64(env, info[1], "xOffset");
  xCapacity_ = exactU64(env, info[2], "xCapacity");
  yOffset_ = exactU64(env, info[3], "yOffset");
  yCapacity_ = exactU64(env, info[4], "yCapacity");
  f64_ = boolean(env, info[5], "f64");
  const uint64_t slots = exactU64(env, info[6], "slots");
  if (slots < 1 || slots > 4) throwJs(env, "BAD_ARGUMENT", "slots must be 1 to 4");
  arena_ = ArenaHandle::Unwrap(h.As<Napi::Object>());
  const std::shared_ptr<Block> block = arena_->live(env, false);
  if (dynamic_cast<BudgetedBlock*>(block.get())) throwJs(env, "NOT_SUPPORTED", "streaming needs an arena without a device budget");
  const uint64_t total = block->total();
  if (xOffset_ > total || xCapacity_ > total - xOffset_ || yOffset_ > total || yCapacity_ > total - yOffset_) throwJs(env, "OUT_OF_RANGE", "a streaming window outside the arena");
  handle_ = Napi::Persistent(h.As<Napi::Object>());
  guarded(env, [&] {
    auto b = std::make_shared<Buffers>();
    b->block = block;
    b->bytes = xCapacity_ + yCapacity_;
    b->pinned = block->options().cuda && block->options().pinned;
    for (uint64_t i = 0; i < slots; ++i) b->slots.push_back(static_cast<uint8_t*>(block->backend().allocHost(b->bytes, b->pinned)));
    for (uint64_t i = 0; i < slots; ++i) b->staged.push_back(static_cast<uint8_t*>(block->backend().allocDevice(b->bytes, Memory::Device)));
    buffers_ = std::move(b);
  });
}

void WindowStager::Finalize(Napi::BasicEnv) { buffers_.reset(); }

std::shared_ptr<WindowStager::Buffers> WindowStager::live(Napi::Env env) const {
  if (!buffers_) throwJs(env, "DISPOSED", "the stream's buffers were disposed");
  return buffers_;
}

// slot(i): an ArrayBuffer over slot i (x rows at 0, y rows at xCapacity), detached by dispose().
Napi::Value WindowStager::Slot(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t i = exactU64(env, info[0], "slot");
  const std::shared_ptr<Buffers> b = live(env);
  if (i >= b->slots.size()) throwJs(env, "OUT_OF_RANGE", "no such slot");
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, b->slots[i], b->bytes, [](Napi::Env, void*) {});
  ab.Set(Napi::Symbol::New(env, "nn-arena stager"), Value());  // the buffers live as long as a view
  views_.push_back(Napi::Reference<Napi::ArrayBuffer>::New(ab, 0));
  return ab;
}

// upload(i, xBytes, yBytes): slot i's first xBytes of x and yBytes of y to its staging buffer.
Napi::Value WindowStager::Upload(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t i = exactU64(env, info[0], "slot"), xBytes = exactU64(env, info[1], "xBytes"), yBytes = exactU64(env, info[2], "yBytes");
  const std::shared_ptr<Buffers> b = live(env);
  if (i >= b->slots.size() || xBytes > xCapacity_ || yBytes > yCapacity_) throwJs(env, "OUT_OF_RANGE", "upload outside the stream's buffers");
  if (uploading_ >= 0) throwJs(env, "BUSY", "an upload is in flight on this stream");
  if (b->runsQueued[i] > 0) throwJs(env, "BUSY", "a queued run has yet to take this buffer's window");
  auto* w = new UploadWorker(env, Value(), &uploading_, b, i, xBytes, xCapacity_, yBytes);
  Napi::Promise p = w->promise();
  uploading_ = int64_t(i);
  w->Queue();
  return p;
}

// run(i, xBytes, yBytes, params, statsOffset, statsBytes, first): a run (params as ArenaHandle's
// run) on slot i's staged window. Its worker copies the window into the arena's xdata / ydata,
// checking it on the way (Backend::copyCheckedOnDevice), runs, and reads the arena's bytes
// [statsOffset, + statsBytes) back (one transfer, counted). Resolves with
//   { path, stats: ArrayBuffer, gradNorms: Float64Array (clipping's, a step each),
//     lossScale: Float64Array [scale, good, skipped] (fp16), bad: -1, value },
// or, for a window holding a NaN or infinity, bad = the first one's index (x's values, then y's)
// and value = it, untrained; the runs queued after it then do nothing (bad = -2) until a fit's
// `first` run. Queued behind a run in flight, it starts when that one ends; under fp16 a run that
// is not its fit's first goes on from the loss scale the run before it left. Slot i takes no
// upload until the copy is done (BUSY).
Napi::Value WindowStager::Run(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t i = exactU64(env, info[0], "slot"), xBytes = exactU64(env, info[1], "xBytes"), yBytes = exactU64(env, info[2], "yBytes");
  const RunParams p = runParamsOf(env, info[3]);
  const uint64_t statsOffset = exactU64(env, info[4], "statsOffset"), statsBytes = exactU64(env, info[5], "statsBytes");
  const bool first = boolean(env, info[6], "first");
  const std::shared_ptr<Buffers> b = live(env);
  if (i >= b->staged.size() || xBytes > xCapacity_ || yBytes > yCapacity_) throwJs(env, "OUT_OF_RANGE", "a run outside the stream's buffers");
  if (uploading_ == int64_t(i)) throwJs(env, "BUSY", "an upload into this buffer is in flight");
  const std::shared_ptr<Block> block = arena_->live(env, false);
  if (block != b->block) throwJs(env, "DISPOSED", "the arena was disposed");
  if (statsOffset > block->total() || statsBytes > block->total() - statsOffset) throwJs(env, "OUT_OF_RANGE", "stats outside the arena");
  // Slot i is free for uploads again once the copy is done, or once the work is gone unrun.
  struct Queued {
    std::shared_ptr<Buffers> b;
    uint64_t i;
    bool copied = false;
    Queued(std::shared_ptr<Buffers> buffers, uint64_t slot) : b(std::move(buffers)), i(slot) { ++b->runsQueued[i]; }
    void done() {
      if (!copied) {
        copied = true;
        --b->runsQueued[i];
      }
    }
    ~Queued() { done(); }
  };
  struct Out {
    Readback back;
    int64_t bad = -1;
    double value = 0;
  };
  auto q = std::make_shared<Queued>(b, i);
  auto out = std::make_shared<Out>();
  out->back.stats.resize(statsBytes);
  const uint64_t xAt = xOffset_, yAt = yOffset_, yCap = xCapacity_;
  const bool f64 = f64_;
  const std::shared_ptr<RunTurns> turns = arena_->turns();
  auto work = [q, out, p, xAt, yAt, yCap, xBytes, yBytes, statsOffset, first, f64, turns](Block& blk) -> std::string {
    Buffers& bufs = *q->b;
    if (first) turns->stopped = false;
    if (turns->stopped) {  // a window before this one was refused: this fit trains no more
      q->done();
      out->bad = -2;
      return "";
    }
    uint8_t* staged = bufs.staged[q->i];
    const Backend::Copy copies[2] = {{blk.device() + xAt, staged, xBytes}, {blk.device() + yAt, staged + yCap, yBytes}};
    const int64_t bad = blk.backend().copyCheckedOnDevice(copies, 2, f64);
    if (bad >= 0) {  // the value, read from the staging buffer before anything can refill it
      const uint64_t size = f64 ? 8 : 4, xCount = xBytes / size;
      const uint8_t* at = uint64_t(bad) < xCount ? staged + bad * size : staged + yCap + (bad - xCount) * size;
      uint8_t v[8] = {};
      blk.backend().copy(v, at, size, Dir::ToHost);
      blk.countTransfer(Dir::ToHost, size);
      out->value = valueAt(v, f64);
      turns->stopped = true;
      out->bad = bad;
    }
    q->done();
    if (bad >= 0) return "";
    return runAndReadBack(blk, p, first, statsOffset, out->back);
  };
  auto shape = [out](Napi::Env e, const std::string& path) -> Napi::Value {
    Napi::Object o = Napi::Object::New(e);
    o.Set("path", Napi::String::New(e, path));
    setReadback(e, o, out->back, out->bad == -1);
    o.Set("bad", Napi::Number::New(e, double(out->bad)));
    o.Set("value", Napi::Number::New(e, out->value));
    return o;
  };
  auto* w = new BlockWorker(env, "nn-arena:stream-run", block, arena_, handle_.Value(), work, arena_->turns(), shape);
  return w->start();
}

// dispose(): detaches the slots' views; the memory goes once an upload in flight ends.
Napi::Value WindowStager::Dispose(const Napi::CallbackInfo& info) {
  for (auto& r : views_) {
    Napi::Value v = r.Value();
    if (!v.IsEmpty() && v.IsArrayBuffer() && !v.As<Napi::ArrayBuffer>().IsDetached()) v.As<Napi::ArrayBuffer>().Detach();
  }
  views_.clear();
  buffers_.reset();
  return info.Env().Undefined();
}

}  // namespace nna::addon
