#include "window_stager.h"

#include <mutex>

#include "../budget/budgeted_block.h"
#include "../core/finite.h"
#include "addon_data.h"
#include "arena_handle.h"
#include "convert.h"
#include "js_error.h"
#include "promise_worker.h"

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

// Checks a slot's window and copies it to the slot's staging buffer, off the JS thread. Resolves
// with -1, or the index of the first non-finite element (x's first, then y's): nothing went up.
class UploadWorker : public PromiseWorker {
 public:
  UploadWorker(Napi::Env env, Napi::Object owner, int64_t* flag, std::shared_ptr<WindowStager::Buffers> b, uint64_t i,
               uint64_t xBytes, uint64_t yAt, uint64_t yBytes, bool f64)
      : PromiseWorker(env, "nn-arena:stream-upload"), owner_(Napi::Persistent(owner)), flag_(flag), b_(std::move(b)), slot_(b_->slots[i]),
        staged_(b_->staged[i]), xBytes_(xBytes), yAt_(yAt), yBytes_(yBytes), f64_(f64) {}

 private:
  void Run() override {
    const uint64_t size = f64_ ? 8 : 4;
    bad_ = firstNonFinite(slot_, xBytes_ / size, f64_);
    if (bad_ < 0) {
      const int64_t y = firstNonFinite(slot_ + yAt_, yBytes_ / size, f64_);
      if (y >= 0) bad_ = int64_t(xBytes_ / size) + y;
    }
    if (bad_ >= 0) return;
    const Backend::Copy copies[2] = {{staged_, slot_, xBytes_}, {staged_ + yAt_, slot_ + yAt_, yBytes_}};
    b_->block->backend().copyAside(copies, 2, Dir::ToDevice, false);
    for (const auto& c : copies) if (c.bytes) b_->block->countTransfer(Dir::ToDevice, c.bytes);  // after they succeeded
  }
  Napi::Value Result() override { return Napi::Number::New(Env(), double(bad_)); }
  void Ended(bool) override { *flag_ = -1; }

  Napi::ObjectReference owner_;  // keeps the stager (and its flag) alive
  int64_t* flag_;
  std::shared_ptr<WindowStager::Buffers> b_;
  uint8_t* slot_;
  uint8_t* staged_;
  uint64_t xBytes_, yAt_, yBytes_;
  bool f64_;
  int64_t bad_ = -1;
};

}  // namespace

Napi::Function WindowStager::Define(Napi::Env env) {
  return DefineClass(env, "WindowStager",
                     {InstanceMethod<&WindowStager::Slot>("slot"), InstanceMethod<&WindowStager::Upload>("upload"),
                      InstanceMethod<&WindowStager::Commit>("commit"), InstanceMethod<&WindowStager::Dispose>("dispose")});
}

WindowStager::WindowStager(const Napi::CallbackInfo& info) : Napi::ObjectWrap<WindowStager>(info) {
  Napi::Env env = info.Env();
  const Napi::Value h = info[0];
  if (!h.IsObject() || !h.As<Napi::Object>().InstanceOf(env.GetInstanceData<AddonData>()->arenaClass.Value()))
    throwJs(env, "BAD_ARGUMENT", "expected an arena handle");
  xOffset_ = exactU64(env, info[1], "xOffset");
  xCapacity_ = exactU64(env, info[2], "xCapacity");
  yOffset_ = exactU64(env, info[3], "yOffset");
  yCapacity_ = exactU64(env, info[4], "yCapacity");
  f64_ = boolean(env, info[5], "f64");
  const uint64_t slots = exactU64(env, info[6], "slots");
  if (slots < 1 || slots > 4) throwJs(env, "BAD_ARGUMENT", "slots must be 1 to 4");
  arena_ = ArenaHandle::Unwrap(h.As<Napi::Object>());
  const std::shared_ptr<Block> block = arena_->live(env, false);
  if (dynamic_cast<BudgetedBlock*>(block.get()))
    throwJs(env, "NOT_SUPPORTED", "streaming needs an arena without a device budget");
  const uint64_t total = block->total();
  if (xOffset_ > total || xCapacity_ > total - xOffset_ || yOffset_ > total || yCapacity_ > total - yOffset_)
    throwJs(env, "OUT_OF_RANGE", "a streaming window outside the arena");
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
  auto* w = new UploadWorker(env, Value(), &uploading_, b, i, xBytes, xCapacity_, yBytes, f64_);
  Napi::Promise p = w->promise();
  uploading_ = int64_t(i);
  w->Queue();
  return p;
}

// commit(i, xBytes, yBytes): slot i's staged rows into the arena's xdata / ydata on the device;
// the arena must be idle (BUSY during a run), and no upload in flight into that buffer.
Napi::Value WindowStager::Commit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t i = exactU64(env, info[0], "slot"), xBytes = exactU64(env, info[1], "xBytes"), yBytes = exactU64(env, info[2], "yBytes");
  const std::shared_ptr<Buffers> b = live(env);
  if (i >= b->staged.size() || xBytes > xCapacity_ || yBytes > yCapacity_) throwJs(env, "OUT_OF_RANGE", "commit outside the stream's buffers");
  if (uploading_ == int64_t(i)) throwJs(env, "BUSY", "an upload into this buffer is in flight");
  const std::shared_ptr<Block> block = arena_->live(env, true);
  if (block != b->block) throwJs(env, "DISPOSED", "the arena was disposed");
  guarded(env, [&] {
    std::lock_guard<std::mutex> lock(block->mutex());
    if (block->released()) NNA_FAIL("DISPOSED", "the arena was disposed");
    const Backend::Copy copies[2] = {{block->device() + xOffset_, b->staged[i], xBytes}, {block->device() + yOffset_, b->staged[i] + xCapacity_, yBytes}};
    block->backend().copyAside(copies, 2, Dir::ToDevice, true);
  });
  return env.Undefined();
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
