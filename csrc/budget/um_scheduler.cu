// um_scheduler.cu: the prefetch scheduler of a budgeted managed arena ("direct instruction" in
// the seed study). The plan (csrc/budget/residency.h) says, phase by phase, what to bring to the
// device and what to send back; this file carries it out:
//   - fetches: cudaMemPrefetchAsync to the device, or for a region its phase writes whole a
//     discard + prefetch (pages made resident without copying dead bytes in);
//   - evictions: prefetch to the host (which also makes the range the driver's first choice
//     to evict), or for dead bytes a discard (nothing crosses the link);
//   - the compute stream waits on an event of each fetch before the phase that needs it.
// Prefetch calls may block their caller while the driver updates page tables, and an eviction
// must wait for the kernels that last used the range: the movers are host threads of their
// own (a stream each; two fetching, four evicting), so the compute thread only ever waits for
// a fetch it needs now.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../core/failure.h"
#include "../cuda/check.cuh"
#include "device_meter.h"
#include "scheduled_run.h"
#include "../core/env.h"

namespace nna {

namespace {

uint64_t microsSince(std::chrono::steady_clock::time_point t0) {
  return uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
}

// Discards cover whole 2 MiB blocks inside a region only: the blocks at its edges may hold
// bytes of its neighbours (biases sit between activations and weights), which must survive.
constexpr uintptr_t kDiscardBlock = uintptr_t(2) << 20;

cudaMemLocation locationOf(bool device, int id) {
  cudaMemLocation loc{};
  loc.type = device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  loc.id = device ? id : 0;
  return loc;
}

// What the compute thread, the stream callbacks and the movers tell each other. Moves are
// numbered in the order they are planned; a fetch is "unissued" until its prefetch is queued
// and its event recorded, an eviction "evicting" until it has left the device.
struct Progress {
  std::mutex m;
  std::condition_variable cv;
  uint64_t phasesDone = 0;                // phases of the run whose kernels have ended
  std::set<uint64_t> unissued;            // fetches not yet issued
  std::map<uint64_t, uint64_t> evicting;  // evictions not yet complete -> their bytes
  uint64_t evictingBytes = 0;
  bool failed = false;            // a mover failed: every wait gives up
  std::vector<double> phaseEnds;  // NN_ARENA_UM_TRACE: when each phase's callback ran (ms)
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  bool trace = false;
  // Waits for `ready`; a minute without progress is a scheduling bug, reported (STALLED) with
  // the state of the counters rather than left to hang the run.
  template <class Pred> void wait(Pred ready, const char* what) {
    std::unique_lock<std::mutex> l(m);
    if (cv.wait_for(l, std::chrono::seconds(60), [&] { return failed || ready(); })) return;
    NNA_FAIL("STALLED", std::string("memory scheduler stalled waiting for ") + what + ": phases ended " + std::to_string(phasesDone) + ", fetches unissued " +
                            std::to_string(unissued.size()) + ", evictions in flight " + std::to_string(evicting.size()));
  }
  template <class F> void update(F change) {
    {
      std::lock_guard<std::mutex> l(m);
      change();
    }
    cv.notify_all();
  }
};

void CUDART_CB phaseEnded(void* progress) {
  // After endRun every phase counts as ended (UINT64_MAX): a late callback must not wrap it.
  static_cast<Progress*>(progress)->update([p = static_cast<Progress*>(progress)] {
    if (p->phasesDone != UINT64_MAX) p->phasesDone++;
    if (p->trace) p->phaseEnds.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p->t0).count());
  });
}

// Host threads issuing managed-memory operations, each on a stream of its own, taking the
// ops in the order they were pushed (they may end out of order: every op waits for what it
// depends on through Progress). Several threads: one migration's driver work on the CPU does
// not hold up the next.
class Movers {
 public:
  Movers(int device, Progress& progress, int threads) : progress_(progress) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this, device] { loop(device); });
  }
  ~Movers() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void push(std::function<void(cudaStream_t)> op) {
    {
      std::lock_guard<std::mutex> l(m_);
      ops_.push_back(std::move(op));
    }
    cv_.notify_all();
  }
  // Waits until every op pushed so far has run; rethrows the first failure.
  void drain() {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return ops_.empty() && busy_ == 0; });
    if (!code_.empty()) throw Failure(code_, message_);
  }

 private:
  void loop(int device) {
    cudaStream_t stream = nullptr;
    run([&] {
      CUDA_CHECK(cudaSetDevice(device));  // a new thread has no current device
      CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    });
    for (;;) {
      std::function<void(cudaStream_t)> op;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || !ops_.empty(); });
        if (ops_.empty()) break;
        op = std::move(ops_.front());
        ops_.pop_front();
        ++busy_;
      }
      run([&] { op(stream); });
      {
        std::lock_guard<std::mutex> l(m_);
        --busy_;
      }
      cv_.notify_all();
    }
    if (stream) cudaStreamDestroy(stream);  // thread exit: nothing left to report to
  }
  // Runs one op unless an earlier one failed; a failure is kept for drain() and releases
  // everyone waiting on progress.
  template <class F> void run(F op) {
    {
      std::lock_guard<std::mutex> l(m_);
      if (!code_.empty()) return;
    }
    try {
      op();
    } catch (const Failure& e) { fail(e.code, e.what()); } catch (const std::exception& e) {
      fail("INTERNAL", e.what());
    }
  }
  void fail(const std::string& code, const std::string& message) {
    {
      std::lock_guard<std::mutex> l(m_);
      if (code_.empty()) {
        code_ = code;
        message_ = message;
      }
    }
    progress_.update([&] { progress_.failed = true; });
  }

  Progress& progress_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void(cudaStream_t)>> ops_;
  bool stop_ = false;
  int busy_ = 0;
  std::string code_, message_;
  std::vector<std::thread> threads_;  // last: started once the members above exist
};

// NN_ARENA_UM_TRACE=1: host-side times (ms from the run's start) of every mover op (waiting,
// then in the driver) and of the compute thread's waits, printed when the run ends. Where the
// managed step goes (docs/device-budgets.md says what such a trace showed).
class UmTrace {
 public:
  explicit UmTrace(Progress& p) : on_(knobOn(Knob::UmTrace)), progress_(p) { progress_.trace = on_; }
  bool on() const { return on_; }
  double now() const { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - progress_.t0).count(); }
  void add(const char* who, double a, double b, double c, std::string what) {
    std::lock_guard<std::mutex> l(m_);
    items_.push_back({a, b, c, who, std::move(what)});
  }
  void print() {
    std::lock_guard<std::mutex> l(m_);
    std::sort(items_.begin(), items_.end(), [](const Item& x, const Item& y) { return x.a < y.a; });
    for (const Item& it : items_) std::fprintf(stderr, "[um] %-7s %9.3f %9.3f %9.3f  %s\n", it.who, it.a, it.b, it.c, it.what.c_str());
    std::lock_guard<std::mutex> p(progress_.m);
    for (size_t i = 0; i < progress_.phaseEnds.size(); ++i) std::fprintf(stderr, "[um] phase %zu ended %9.3f\n", i, progress_.phaseEnds[i]);
  }

 private:
  struct Item {
    double a, b, c;
    const char* who;
    std::string what;
  };
  bool on_;
  Progress& progress_;
  std::mutex m_;
  std::vector<Item> items_;
};

class UmScheduler final : public LayerHooks {
 public:
  UmScheduler(BudgetedBlock& block, const RunParams& p)
      : block_(block), res_(block.residency()), plan_(res_, p), base_(reinterpret_cast<char*>(block.device())), regions_(res_.model().regions()) {
    CUDA_CHECK(cudaGetDevice(&device_));
    // How dead bytes leave and how write-only regions arrive. By default no dead byte crosses
    // the link: a discard drops it where it is (the driver may reuse those pages at once, with
    // no copy back), and a region about to be written whole is made resident by a discard and
    // prefetch, populating pages without copying. 'discard-host' also moves the discarded pages
    // to the host, 'host' copies dead bytes like live ones (bench/um.ts measures both).
    evictDead_ = knob(Knob::UmEvictDead, "discard");
    place_ = knob(Knob::UmPlace, "discard-device");
    if (evictDead_ != "discard-host" && evictDead_ != "discard" && evictDead_ != "host")
      NNA_FAIL("BAD_OPTION", "NN_ARENA_UM_EVICT_DEAD must be discard-host, discard or host, got '" + evictDead_ + "'");
    if (place_ != "discard-device" && place_ != "device") NNA_FAIL("BAD_OPTION", "NN_ARENA_UM_PLACE must be discard-device or device, got '" + place_ + "'");
    ready_.assign(regions_.size(), nullptr);
    for (cudaEvent_t& e : ready_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    fetchSeq_.assign(regions_.size(), 0);
    waitedSeq_.assign(regions_.size(), 0);
    evictSeq_.assign(regions_.size(), 0);
    shared_.assign(regions_.size(), false);
    // NN_ARENA_UM_READ_DUP=1: weights fetched for a forward phase come as read-only duplicates
    // (read-mostly advice), so the host copy stays valid and evicting them moves nothing back.
    readDup_ = knob(Knob::UmReadDup) == "1";
    // Evictions may still be in flight while later fetches start, up to one layer's range
    // (NN_ARENA_UM_SLACK bytes, 0: every fetch waits for the evictions planned before it):
    // the link then carries both directions at once. The device holds at most budget + slack.
    slack_ = uint64_t(knobInt(Knob::UmSlack, -1, -1, INT32_MAX));
    if (slack_ == uint64_t(-1)) slack_ = largestLayerRange();
    // Two threads fetch, four evict (NN_ARENA_UM_MOVERS="in,out"): a prefetch to the host on one
    // thread ran far below the link's copy rate (bench/um.ts, link rates). A thread of its own for
    // what the next phase needs now was tried and made the step slower: its fetches still waited
    // for the evictions that make room for them (NN_ARENA_UM_TRACE).
    const std::string movers = knob(Knob::UmMovers, "2,4");
    const size_t comma = movers.find(',');
    const int nIn = std::atoi(movers.substr(0, comma).c_str()), nOut = comma == std::string::npos ? 0 : std::atoi(movers.substr(comma + 1).c_str());
    if (nIn < 1 || nOut < 1 || nIn > 16 || nOut > 16) NNA_FAIL("BAD_OPTION", "NN_ARENA_UM_MOVERS must be \"in,out\" thread counts in [1, 16], got '" + movers + "'");
    in_ = std::make_unique<Movers>(device_, progress_, nIn);
    out_ = std::make_unique<Movers>(device_, progress_, nOut);
  }

  ~UmScheduler() override {
    // Normally endRun drained both movers; after an earlier failure, release any op still waiting.
    progress_.update([&] { progress_.failed = true; });
    in_.reset();
    out_.reset();
    for (cudaEvent_t e : ready_)
      if (e) cudaEventDestroy(e);  // a destructor cannot report
  }

  void beginRun(cudaStream_t s, uint64_t) override {
    const nna_header& h = res_.model().header();
    if (!res_.known()) {
      // Start from a known state: the whole arena on the host. What the device then holds is
      // the baseline the report measures the arena's peak against.
      CUDA_CHECK(cudaMemPrefetchAsync(base_, h.total_bytes, locationOf(false, 0), 0, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      // The gather reads a batch of rows of the data set: mapped for the GPU and kept on the
      // host, it is read in place over the link instead of migrating (and later evicting) the
      // whole data set every step. The advice that measurably helps (bench/um.ts).
      for (const RegionInfo& r : regions_) {
        if (!r.remote) continue;
        CUDA_CHECK(cudaMemAdvise(base_ + r.offset, r.bytes, cudaMemAdviseSetPreferredLocation, locationOf(false, 0)));
        CUDA_CHECK(cudaMemAdvise(base_ + r.offset, r.bytes, cudaMemAdviseSetAccessedBy, locationOf(true, device_)));
      }
      res_.setKnown();
      block_.meter().baseline = deviceBytesInUse();
      block_.meter().hasBaseline = true;
    }
    // Every kernel binds from the header: it stays on the device (counted in the budget).
    CUDA_CHECK(cudaMemPrefetchAsync(base_, h.header_bytes, locationOf(true, device_), 0, s));
    meter_ = std::make_unique<MeterThread>(block_.meter());
    moves_.clear();
    plan_.start(moves_);
    issue(moves_);
    // The stats region, resident from here to the end of the run: the reset kernel comes next.
    waitFetches(moves_, s);
  }

  void waitFetches(const std::vector<Move>& moves, cudaStream_t s) {
    for (const Move& m : moves) {
      const uint32_t r = m.region;
      if ((m.kind != Move::Fetch && m.kind != Move::Place) || fetchSeq_[r] <= waitedSeq_[r]) continue;
      const uint64_t seq = fetchSeq_[r];
      progress_.wait([&] { return !progress_.unissued.count(seq); }, "the stats region");
      CUDA_CHECK(cudaStreamWaitEvent(s, ready_[r], 0));
      waitedSeq_[r] = seq;
    }
  }

  uint64_t largestLayerRange() const {
    std::vector<uint64_t> perLayer(res_.model().layers().size(), 0);
    for (const RegionInfo& r : regions_)
      if (!r.remote) perLayer[r.layer] += r.bytes;
    return *std::max_element(perLayer.begin(), perLayer.end());
  }

  void before(Stage phase, uint32_t layer, cudaStream_t s) override {
    const PhaseInfo& ph = plan_.launched(t_, phase, layer, "scheduler");
    moves_.clear();
    plan_.before(t_, moves_);
    issue(moves_);
    for (const Use& u : ph.uses)
      if (u.access & kWrite && shared_[u.region]) unshare(u.region);
    for (const Use& u : ph.uses) {
      const uint32_t r = u.region;
      if (regions_[r].remote || fetchSeq_[r] <= waitedSeq_[r]) continue;
      const uint64_t seq = fetchSeq_[r];
      const auto t0 = std::chrono::steady_clock::now();
      const double a = trace_.on() ? trace_.now() : 0;
      progress_.wait([&] { return !progress_.unissued.count(seq); }, "a fetch the next phase needs");
      waitMicros_ += microsSince(t0);
      if (trace_.on()) trace_.add("compute", a, a, trace_.now(), "phase " + std::to_string(t_) + " waits for the fetch of " + describe(r));
      CUDA_CHECK(cudaStreamWaitEvent(s, ready_[r], 0));
      waitedSeq_[r] = seq;
    }
  }

  void after(Stage, uint32_t, cudaStream_t s) override {
    CUDA_CHECK(cudaLaunchHostFunc(s, phaseEnded, &progress_));
    moves_.clear();
    plan_.after(t_, moves_);
    issue(moves_);
    ++t_;
  }

  void endRun(cudaStream_t) override {
    // The compute stream is synchronised: every phase that will ever end has.
    progress_.update([&] { progress_.phasesDone = UINT64_MAX; });
    moves_.clear();
    plan_.finish(moves_);
    issue(moves_);
    in_->drain();
    out_->drain();
    // No advice outlives the run: what is still a duplicate becomes a plain device copy.
    for (uint32_t r = 0; r < regions_.size(); ++r)
      if (shared_[r]) {
        collapse(r, true);
        shared_[r] = false;
      }
    if (meter_) meter_->stop();
    if (trace_.on()) trace_.print();
    block_.meter().waitMicros = waitMicros_;
    block_.meter().fetchMicros = fetchMicros_.load();
    block_.meter().evictMicros = evictMicros_.load();
  }

 private:
  // Ends region r's read duplication: the copy at `toDevice`'s side is kept (the preferred
  // location decides where duplicates collapse), the other dropped; no bytes move.
  void collapse(uint32_t r, bool toDevice) {
    char* p = base_ + regions_[r].offset;
    const size_t bytes = regions_[r].bytes;
    CUDA_CHECK(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, locationOf(toDevice, device_)));
    CUDA_CHECK(cudaMemAdvise(p, bytes, cudaMemAdviseUnsetReadMostly, locationOf(true, device_)));
    CUDA_CHECK(cudaMemAdvise(p, bytes, cudaMemAdviseUnsetPreferredLocation, locationOf(true, device_)));
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));  // advice that the driver queued there
  }

  // A phase is about to write region r, resident as a read-only duplicate: once the phases
  // reading it have ended, keep the device copy (like a fetch, the compute stream waits for it).
  void unshare(uint32_t r) {
    shared_[r] = false;
    const uint64_t seq = ++seq_;
    const uint64_t waitPhases = uint64_t(res_.state()[r].lastUse + 1);
    fetchSeq_[r] = seq;
    progress_.update([&] { progress_.unissued.insert(seq); });
    in_->push([=](cudaStream_t st) {
      progress_.wait([&] { return progress_.phasesDone >= waitPhases; }, "the reads of a duplicate before it is written");
      collapse(r, true);
      CUDA_CHECK(cudaEventRecord(ready_[r], st));
      progress_.update([&] { progress_.unissued.erase(seq); });
    });
  }

  // The whole 2 MiB blocks inside region r, [begin, end) (empty when it has none).
  std::pair<char*, char*> inner(uint32_t r) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(base_ + regions_[r].offset);
    const uintptr_t begin = (a + kDiscardBlock - 1) / kDiscardBlock * kDiscardBlock;
    const uintptr_t end = (a + regions_[r].bytes) / kDiscardBlock * kDiscardBlock;
    if (end <= begin) return {nullptr, nullptr};
    return {reinterpret_cast<char*>(begin), reinterpret_cast<char*>(end)};
  }

  // Moves region r to `to`: its inner blocks by discard (and, unless `stay`, prefetch without
  // bytes), the rest by prefetch. Without a discard in the driver, all of it by prefetch.
  void moveDead(uint32_t r, const cudaMemLocation& to, bool stay, cudaStream_t st) {
    char* p = base_ + regions_[r].offset;
    const size_t bytes = regions_[r].bytes;
    const auto in = inner(r);
    if (in.first && !noDiscard_.load()) {
      void* ptr = in.first;
      size_t size = size_t(in.second - in.first);
      cudaMemLocation loc = to;
      size_t first = 0;
      const cudaError_t e = stay ? cudaMemDiscardBatchAsync(&ptr, &size, 1, 0, st) : cudaMemDiscardAndPrefetchBatchAsync(&ptr, &size, 1, &loc, &first, 1, 0, st);
      if (e == cudaErrorNotSupported || e == cudaErrorInvalidValue) {
        (void)cudaGetLastError();  // not sticky: plain prefetches from now on
        noDiscard_ = true;
      } else {
        CUDA_CHECK(e);
        if (in.first > p) CUDA_CHECK(cudaMemPrefetchAsync(p, size_t(in.first - p), to, 0, st));
        if (in.second < p + bytes) CUDA_CHECK(cudaMemPrefetchAsync(in.second, size_t(p + bytes - in.second), to, 0, st));
        return;
      }
    }
    CUDA_CHECK(cudaMemPrefetchAsync(p, bytes, to, 0, st));
  }

  void issue(const std::vector<Move>& moves) {
    for (const Move& m : moves) {
      const uint64_t seq = ++seq_;
      const uint32_t r = m.region;
      char* p = base_ + regions_[r].offset;
      const size_t bytes = regions_[r].bytes;
      if (m.kind == Move::Fetch || m.kind == Move::Place) {
        const bool place = m.kind == Move::Place && place_ == "discard-device";
        const uint32_t kind = regions_[r].kind;
        const bool dup = readDup_ && m.kind == Move::Fetch && plan_.phase(m.target).stage == Stage::Forward && (kind == NNA_W || kind == NNA_B);
        shared_[r] = dup;
        const uint64_t needEvicted = lastEviction_, ownEviction = evictSeq_[r];
        fetchSeq_[r] = seq;
        progress_.update([&] { progress_.unissued.insert(seq); });
        in_->push([=](cudaStream_t st) {
          const double ta = trace_.on() ? trace_.now() : 0;
          // Room first: the evictions planned before this fetch have left the device, or what
          // is still leaving is within the slack; and never while its own range is leaving.
          progress_.wait(
              [&] {
                const auto& ev = progress_.evicting;
                const bool room = ev.empty() || ev.begin()->first > needEvicted || progress_.evictingBytes <= slack_;
                return room && !ev.count(ownEviction);
              },
              "the evictions that make room for a fetch");
          const cudaMemLocation dev = locationOf(true, device_);
          const auto t0 = std::chrono::steady_clock::now();
          if (dup) {
            CUDA_CHECK(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, locationOf(false, 0)));
            CUDA_CHECK(cudaMemAdvise(p, bytes, cudaMemAdviseSetReadMostly, dev));
            CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
          }
          // A placed region's pages are already there after the discard: the plain prefetch
          // moves nothing, it records the placement where cudaMemRangeGetAttribute reads it.
          if (place) moveDead(r, dev, false, st);
          const double tb = trace_.on() ? trace_.now() : 0;
          CUDA_CHECK(cudaMemPrefetchAsync(p, bytes, dev, 0, st));
          CUDA_CHECK(cudaEventRecord(ready_[r], st));
          fetchMicros_ += microsSince(t0);
          if (trace_.on()) trace_.add("in", ta, tb, trace_.now(), std::string(place ? "place " : "fetch ") + describe(r) + " for phase " + std::to_string(m.target));
          progress_.update([&] { progress_.unissued.erase(seq); });
        });
        continue;
      }
      lastEviction_ = seq;
      evictSeq_[r] = seq;
      const uint64_t waitPhases = uint64_t(m.lastUse + 1), needFetch = fetchSeq_[r];
      const bool dead = m.kind == Move::Drop, wasShared = shared_[r];
      shared_[r] = false;
      progress_.update([&] {
        progress_.evicting[seq] = bytes;
        progress_.evictingBytes += bytes;
      });
      out_->push([=](cudaStream_t st) {
        const double ta = trace_.on() ? trace_.now() : 0;
        progress_.wait([&] { return progress_.phasesDone >= waitPhases && !progress_.unissued.count(needFetch); }, "the last use of a region to evict");
        if (needFetch) CUDA_CHECK(cudaEventSynchronize(ready_[r]));  // its migration in has ended
        const cudaMemLocation host = locationOf(false, 0);
        const auto t0 = std::chrono::steady_clock::now();
        // A duplicate: the host copy is current, drop the device's (the prefetch below then
        // finds every page on the host and moves nothing).
        if (wasShared) collapse(r, false);
        if (dead && evictDead_ != "host")
          moveDead(r, host, evictDead_ == "discard", st);
        else
          CUDA_CHECK(cudaMemPrefetchAsync(p, bytes, host, 0, st));
        const double tb = trace_.on() ? std::chrono::duration<double, std::milli>(t0 - progress_.t0).count() : 0;
        CUDA_CHECK(cudaStreamSynchronize(st));
        evictMicros_ += microsSince(t0);
        if (trace_.on())
          trace_.add("out", ta, tb, trace_.now(), std::string(dead ? "drop " : "write-back ") + describe(r) + " after phase " + std::to_string(int64_t(waitPhases) - 1));
        progress_.update([&] {
          progress_.evicting.erase(seq);
          progress_.evictingBytes -= bytes;
        });
      });
    }
  }

  std::string describe(uint32_t r) const { return regionLabel(regions_[r], true); }

  BudgetedBlock& block_;
  Residency& res_;
  Planner plan_;
  char* base_;
  const std::vector<RegionInfo>& regions_;
  int device_ = 0;
  std::string evictDead_, place_;
  std::atomic<bool> noDiscard_{false};  // set by a mover on the driver's first refusal
  Progress progress_;
  UmTrace trace_{progress_};
  std::vector<cudaEvent_t> ready_;
  std::vector<uint64_t> fetchSeq_, waitedSeq_, evictSeq_;
  uint64_t slack_ = 0;
  bool readDup_ = false;
  std::vector<bool> shared_;  // resident as a read-only duplicate (read-mostly advice)
  uint64_t seq_ = 0, lastEviction_ = 0, t_ = 0;
  uint64_t waitMicros_ = 0;
  std::atomic<uint64_t> fetchMicros_{0}, evictMicros_{0};
  std::vector<Move> moves_;
  std::unique_ptr<MeterThread> meter_;
  std::unique_ptr<Movers> in_, out_;  // last: their threads stop first
};

// Managed memory without a scheduler: only the measurement, for the report.
class MeterOnly final : public LayerHooks {
 public:
  explicit MeterOnly(BudgetedBlock& block) : block_(block) {}
  void beginRun(cudaStream_t, uint64_t) override {
    if (!block_.meter().hasBaseline) {  // the arena starts on the host (Block): nothing of it is resident yet
      block_.meter().baseline = deviceBytesInUse();
      block_.meter().hasBaseline = true;
    }
    meter_ = std::make_unique<MeterThread>(block_.meter());
  }
  void endRun(cudaStream_t) override {
    if (meter_) meter_->stop();
  }

 private:
  BudgetedBlock& block_;
  std::unique_ptr<MeterThread> meter_;
};

}  // namespace

std::unique_ptr<LayerHooks> makeUmScheduler(BudgetedBlock& block, const RunParams& p) { return std::make_unique<UmScheduler>(block, p); }
std::unique_ptr<LayerHooks> makeMeterOnly(BudgetedBlock& block) { return std::make_unique<MeterOnly>(block); }

}  // namespace nna
