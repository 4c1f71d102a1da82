#include "residency_check.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "../core/failure.h"
#include "../core/env.h"

namespace nna {
namespace {

// Where a region's bytes are valid. Managed memory has one copy that moves (`dev` says where,
// `host` says whether it holds the live bytes); staged memory has the host image and, while
// resident, a slot (each valid or not).
struct Copy {
  bool resident = false;
  bool host = true;  // managed: the one copy is live; staged: the host image is live
  bool dev = false;  // staged: the slot holds the live bytes
};

class Replay {
 public:
  Replay(Residency& res) : res_(res), copies_(res.model().regions().size()) {}

  std::string apply(const std::vector<Move>& moves) {
    static const bool trace = knobOn(Knob::ResidencyTrace);
    static const char* names[] = {"fetch", "place", "writeback", "drop"};
    if (trace)
      for (const Move& m : moves) std::fprintf(stderr, "  %s %s (after %lld)\n", names[m.kind], label(m.region).c_str(), (long long)m.lastUse);
    const bool staged = res_.placement() == Placement::Staged;
    for (const Move& m : moves) {
      Copy& c = copies_[m.region];
      const std::string name = label(m.region);
      switch (m.kind) {
        case Move::Fetch:
          if (c.resident) return "fetch of " + name + " while resident";
          if (!c.host) return "fetch of " + name + " whose bytes are lost";
          c.resident = true;
          c.dev = true;
          break;
        case Move::Place:
          if (c.resident) return "place of " + name + " while resident";
          c.resident = true;
          c.dev = false;
          if (!staged) c.host = false;  // discarded: its next use writes it whole
          break;
        case Move::WriteBack:
          if (!c.resident) return "write-back of " + name + " that is not resident";
          if (staged && !c.dev) return "write-back of " + name + " copies stale slot bytes over the host image";
          if (!staged && !c.host) return "write-back of " + name + " whose bytes are dead";
          if (staged) c.host = true;
          c.resident = c.dev = false;
          break;
        case Move::Drop:
          if (!c.resident) return "drop of " + name + " that is not resident";
          c.resident = c.dev = false;
          if (!staged) c.host = false;
          break;
      }
    }
    return check();
  }

  std::string use(const PhaseInfo& ph) {
    if (knobOn(Knob::ResidencyTrace)) std::fprintf(stderr, "%s %u   used %llu MiB\n", stageName(ph.stage), ph.layer, (unsigned long long)(res_.used() >> 20));
    const bool staged = res_.placement() == Placement::Staged;
    for (const Use& u : ph.uses) {
      if (res_.model().regions()[u.region].remote) continue;
      Copy& c = copies_[u.region];
      const std::string where = std::string(stageName(ph.stage)) + " of layer " + std::to_string(ph.layer);
      if (!c.resident || !res_.state()[u.region].resident) return where + " uses " + label(u.region) + " while it is not resident";
      if (u.access & kRead && !(staged ? c.dev : c.host)) return where + " reads " + label(u.region) + " whose bytes are not there";
      if (u.access & kWrite) {
        if (staged) {
          c.dev = true;
          c.host = false;
        } else
          c.host = true;
      }
    }
    return "";
  }

  // The host wrote region r's device side between runs (a transfer): its bytes are live there.
  void hostWrote(uint32_t r) { copies_[r] = Copy{}; }

  // After a run: the bytes it leaves for the host (`kept`) are where the host can reach them:
  // in the image, or (staged) in a slot that Residency::dirtyIn names for a transfer to copy out.
  std::string end(const std::vector<bool>& kept) const {
    const bool staged = res_.placement() == Placement::Staged;
    for (uint32_t r = 0; r < copies_.size(); ++r) {
      const Copy& c = copies_[r];
      const bool inSlot = staged && c.resident && c.dev && res_.state()[r].dirty;
      if (kept[r] && !c.host && !inSlot) return "after the run, the bytes of " + label(r) + " are lost";
    }
    return "";
  }

 private:
  std::string label(uint32_t r) const { return regionLabel(res_.model().regions()[r]); }

  // The bookkeeping agrees with the model, stays within the budget, and slots do not overlap.
  std::string check() const {
    uint64_t sum = res_.fixedBytes();
    std::vector<std::pair<uint64_t, uint64_t>> slots;
    for (uint32_t r = 0; r < copies_.size(); ++r) {
      const auto& s = res_.state()[r];
      if (s.resident != copies_[r].resident) return "bookkeeping of " + label(r) + " disagrees with its moves";
      if (!s.resident) continue;
      sum += res_.cost(r);
      slots.push_back({s.slot, s.slot + res_.cost(r)});
    }
    if (sum != res_.used()) return "accounted bytes " + std::to_string(res_.used()) + " differ from the resident sum " + std::to_string(sum);
    if (sum > res_.budget()) return "device bytes " + std::to_string(sum) + " above the budget " + std::to_string(res_.budget());
    if (res_.placement() == Placement::Staged) {
      std::sort(slots.begin(), slots.end());
      for (size_t i = 0; i < slots.size(); ++i) {
        if (slots[i].first < res_.fixedBytes() || slots[i].second > res_.budget()) return "a slot lies outside the pool";
        if (i && slots[i].first < slots[i - 1].second) return "two slots overlap";
      }
    }
    return "";
  }

  Residency& res_;
  std::vector<Copy> copies_;
};

}  // namespace

ResidencyReplay replayResidency(const uint8_t* header, Placement placement, uint64_t budget, const std::vector<RunParams>& runs) {
  ResidencyReplay out;
  Residency res(header, placement, budget);
  Replay model(res);
  std::vector<Move> moves;
  auto step = [&](const std::string& where, const std::string& why) {
    if (!why.empty() && out.error.empty()) out.error = where + ": " + why;
    return why.empty();
  };
  for (size_t i = 0; i < runs.size() && out.error.empty(); ++i) {
    if (!runs[i].resident) {  // the host stages the batch first (Trainer: toDevice of z[0] and y)
      const uint32_t last = res.model().header().num_layers - 1;
      for (const auto& lk : {std::make_pair(0u, uint32_t(NNA_Z)), std::make_pair(last, uint32_t(NNA_Y))}) {
        const int32_t r = res.model().regionOf(lk.first, lk.second);
        if (r < 0) continue;
        const RegionInfo& ri = res.model().regions()[r];
        res.forget(ri.offset, ri.bytes);
        model.hostWrote(uint32_t(r));
      }
    }
    Planner plan(res, runs[i]);
    const std::string run = "run " + std::to_string(i);
    moves.clear();
    plan.start(moves);
    if (!step(run + " start", model.apply(moves))) break;
    for (uint32_t r = 0; r < res.model().regions().size(); ++r)
      if (plan.pinned(r) && !res.state()[r].resident) step(run + " start", "the stats region is not resident");
    res.setKnown();
    for (uint64_t t = 0; t < plan.phases(); ++t) {
      const std::string at = run + " phase " + std::to_string(t);
      moves.clear();
      plan.before(t, moves);
      if (!step(at + " (before)", model.apply(moves)) || !step(at, model.use(plan.phase(t)))) break;
      moves.clear();
      plan.after(t, moves);
      if (!step(at + " (after)", model.apply(moves))) break;
      out.phases++;
    }
    if (!out.error.empty()) break;
    moves.clear();
    plan.finish(moves);
    std::vector<bool> kept;
    for (uint32_t r = 0; r < res.model().regions().size(); ++r) kept.push_back(plan.keptAfterRun(r));
    step(run + " finish", model.apply(moves)) && step(run + " end", model.end(kept));
  }
  out.counters = res.total;
  return out;
}

}  // namespace nna
