#include "residency.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "../core/failure.h"

namespace nna {

namespace {
constexpr uint64_t kNever = UINT64_MAX;
constexpr uint64_t kLookahead = 2;  // phases fetched ahead
bool has(const std::vector<uint32_t>& v, uint32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }
}  // namespace

void ResidencyCounters::add(const ResidencyCounters& o) {
  runs += o.runs;
  steps += o.steps;
  fetches += o.fetches;
  fetchedBytes += o.fetchedBytes;
  placedBytes += o.placedBytes;
  writeBacks += o.writeBacks;
  writtenBackBytes += o.writtenBackBytes;
  drops += o.drops;
  droppedBytes += o.droppedBytes;
  compactions += o.compactions;
  peakScheduledBytes = std::max(peakScheduledBytes, o.peakScheduledBytes);
}

// ---- SlotPool ------------------------------------------------------------------------------

void SlotPool::reset(uint64_t begin, uint64_t end) { free_.assign(1, {begin, end}); }

bool SlotPool::fits(uint64_t bytes) const {
  for (const auto& h : free_)
    if (h.second - h.first >= bytes) return true;
  return false;
}

uint64_t SlotPool::take(uint64_t bytes) {
  for (size_t i = 0; i < free_.size(); ++i) {
    auto& h = free_[i];
    if (h.second - h.first < bytes) continue;
    const uint64_t at = h.first;
    h.first += bytes;
    if (h.first == h.second) free_.erase(free_.begin() + long(i));
    return at;
  }
  NNA_FAIL("INTERNAL", "staging pool: no hole of " + std::to_string(bytes) + " bytes");
}

void SlotPool::give(uint64_t offset, uint64_t bytes) {
  auto it = std::lower_bound(free_.begin(), free_.end(), std::make_pair(offset, uint64_t(0)));
  it = free_.insert(it, {offset, offset + bytes});
  if (it + 1 != free_.end() && it->second == (it + 1)->first) {
    it->second = (it + 1)->second;
    free_.erase(it + 1);
  }
  if (it != free_.begin() && (it - 1)->second == it->first) {
    (it - 1)->second = it->second;
    free_.erase(it);
  }
}

// ---- Residency -----------------------------------------------------------------------------

uint64_t Residency::granuleOf(const StepModel& m, Placement placement) { return placement == Placement::Managed ? kManagedGranule : m.header().align; }

void refuseCompact(const uint8_t* header) {
  nna_header h;
  std::memcpy(&h, header, sizeof h);
  // The schedulers move regions one by one and know nothing of shared bytes.
  if (h.flags & NNA_FLAG_COMPACT) NNA_FAIL("NOT_SUPPORTED", "a device budget cannot schedule a compact plan (regions share bytes); plan it without compact");
}

uint64_t Residency::minBudget(const StepModel& m, Placement placement, PhaseInfo* largest) {
  refuseCompact(reinterpret_cast<const uint8_t*>(&m.header()));
  const uint64_t g = granuleOf(m, placement);
  return m.runBytes(g) + m.largestPhase(g, largest);
}

Residency::Residency(const uint8_t* header, Placement placement, uint64_t budget) : model_(header), placement_(placement), budget_(budget) {
  granule_ = granuleOf(model_, placement);
  fixed_ = StepModel::rounded(0, model_.header().header_bytes, granule_);
  PhaseInfo biggest{};
  const uint64_t need = minBudget(model_, placement, &biggest);
  if (budget < need)
    NNA_FAIL_FIELD("BUDGET_TOO_SMALL", "deviceBudget",
                   "must be at least " + std::to_string(need) + " bytes: the " + stageName(biggest.stage) + " phase of layer " + std::to_string(biggest.layer) +
                       " needs that much of the arena on the device at once (header included)");
  state_.resize(model_.regions().size());
  used_ = fixed_;
  pool_.reset(fixed_, budget_);
}

uint64_t Residency::cost(uint32_t r) const {
  const RegionInfo& ri = model_.regions()[r];
  return StepModel::rounded(ri.offset, ri.bytes, granule_);
}

void Residency::release(uint32_t r) {
  State& s = state_[r];
  if (!s.resident) return;
  if (placement_ == Placement::Staged) pool_.give(s.slot, cost(r));
  used_ -= cost(r);
  s.resident = s.dirty = false;
}

void Residency::forget(uint64_t offset, uint64_t bytes) {
  const auto& regions = model_.regions();
  for (uint32_t r = 0; r < regions.size(); ++r)
    if (regions[r].offset < offset + bytes && offset < regions[r].offset + regions[r].bytes) release(r);
}

std::vector<uint32_t> Residency::dirtyIn(uint64_t offset, uint64_t bytes) const {
  std::vector<uint32_t> out;
  const auto& regions = model_.regions();
  for (uint32_t r = 0; r < regions.size(); ++r)
    if (state_[r].resident && state_[r].dirty && regions[r].offset < offset + bytes && offset < regions[r].offset + regions[r].bytes) out.push_back(r);
  return out;
}

void Residency::cleaned(uint32_t r) {
  state_[r].dirty = false;
  total.writeBacks++;
  total.writtenBackBytes += model_.regions()[r].bytes;
}

void Residency::forgetAll() {
  for (uint32_t r = 0; r < state_.size(); ++r) release(r);
  known_ = false;
}

// ---- Planner -------------------------------------------------------------------------------

Planner::Planner(Residency& res, const RunParams& p) : res_(res), p_(p) {
  step_ = res.model().step(p.op, p.resident);
  perStep_ = step_.size();
  total_ = perStep_ * p.numBatches;
  for (Residency::State& s : res_.state_) s.lastUse = -1;  // the previous run ended synchronised
  res_.lastRun = ResidencyCounters{};
  res_.lastRun.runs = 1;
  res_.lastRun.steps = p.numBatches;
  note();
}

const PhaseInfo& Planner::phase(uint64_t t) const { return step_[t % perStep_]; }

const PhaseInfo& Planner::launched(uint64_t t, Stage stage, uint32_t layer, const char* who) const {
  if (t >= total_) NNA_FAIL("INTERNAL", std::string(who) + ": more phases than the plan of this run");
  const PhaseInfo& ph = phase(t);
  if (ph.stage != stage || ph.layer != layer)
    NNA_FAIL("INTERNAL", std::string(who) + ": the launches reached phase " + stageName(stage) + " of layer " + std::to_string(layer) +
                             " where its plan (csrc/train/phases.cc) has " + stageName(ph.stage) + " of layer " + std::to_string(ph.layer));
  return ph;
}

Planner::NextUse Planner::nextUse(uint32_t r, int64_t now) const {
  // Every step has the same phases: a region not used within one step is not used again.
  const uint64_t from = uint64_t(now + 1);
  const uint64_t end = std::min(total_, from + perStep_);
  for (uint64_t t = from; t < end; ++t)
    for (const Use& u : phase(t).uses)
      if (u.region == r) return {t, u.access};
  return {kNever, 0};
}

bool Planner::dead(uint32_t r, int64_t now) const {
  const NextUse n = nextUse(r, now);
  return n.t == kNever ? !keptAfterRun(r) : n.access == kWrite;
}

// What a run leaves for the host: parameters, optimizer state and stats always; the gradients
// of a grad run, the outputs of a forward run, the batch the host staged. Activations, errors
// and (in a training run) gradients are scratch: every run writes them before reading them.
bool Planner::keptAfterRun(uint32_t r) const {
  const RegionInfo& ri = res_.model().regions()[r];
  const uint32_t last = res_.model().header().num_layers - 1;
  switch (ri.kind) {
    case NNA_Z: return (p_.op == Op::Forward && ri.layer == last) || (!p_.resident && ri.layer == 0);
    case NNA_Y: return !p_.resident;
    case NNA_D: return false;
    case NNA_DW:
    case NNA_DB: return p_.op == Op::Grad;
    default: return true;
  }
}

// The resident region to evict to prepare phase `limit`: dead ones first, then the one needed
// latest; never one used at or before `limit`, nor a pinned one. -1 when there is none.
int32_t Planner::victim(int64_t now, uint64_t limit, const std::vector<uint32_t>& pinned) const {
  int32_t best = -1;
  bool bestDead = false;
  uint64_t bestNext = 0;
  const auto& st = res_.state_;
  for (uint32_t r = 0; r < st.size(); ++r) {
    if (!st[r].resident || has(pinned, r) || this->pinned(r)) continue;
    const NextUse n = nextUse(r, now);
    if (n.t <= limit) continue;
    const bool d = n.t != kNever && n.access == kWrite;
    const bool better = best < 0 || (d && !bestDead) || (d == bestDead && (n.t > bestNext || (n.t == bestNext && res_.cost(r) > res_.cost(uint32_t(best)))));
    if (better) {
      best = int32_t(r);
      bestDead = d;
      bestNext = n.t;
    }
  }
  return best;
}

void Planner::evict(uint32_t r, int64_t now, std::vector<Move>& out) {
  Residency::State& s = res_.state_[r];
  const uint64_t bytes = res_.model().regions()[r].bytes;
  // Managed memory keeps no host copy once pages migrate: anything live must travel back.
  const bool keep = !dead(r, now) && (res_.placement_ == Placement::Managed || s.dirty);
  out.push_back({keep ? Move::WriteBack : Move::Drop, r, s.slot, s.lastUse});
  if (keep) {
    res_.lastRun.writeBacks++;
    res_.lastRun.writtenBackBytes += bytes;
  } else {
    res_.lastRun.drops++;
    res_.lastRun.droppedBytes += bytes;
  }
  res_.release(r);
}

void Planner::fetch(uint32_t r, uint8_t access, uint64_t target, std::vector<Move>& out) {
  Residency::State& s = res_.state_[r];
  const uint64_t c = res_.cost(r);
  if (res_.placement_ == Placement::Staged) s.slot = res_.pool_.take(c);
  s.resident = true;
  s.dirty = false;
  res_.used_ += c;
  const uint64_t bytes = res_.model().regions()[r].bytes;
  const bool place = access == kWrite;
  out.push_back({place ? Move::Place : Move::Fetch, r, s.slot, -1, target});
  res_.lastRun.fetches++;
  (place ? res_.lastRun.placedBytes : res_.lastRun.fetchedBytes) += bytes;
  note();
}

bool Planner::makeRoom(uint32_t r, int64_t now, uint64_t limit, const std::vector<uint32_t>& pinned, std::vector<Move>& out) {
  const uint64_t c = res_.cost(r);
  if (res_.placement_ == Placement::Staged) return makeHole(c, now, limit, pinned, out);
  while (res_.used_ + c > res_.budget_) {
    const int32_t v = victim(now, limit, pinned);
    if (v < 0) return false;
    evict(uint32_t(v), now, out);
  }
  return true;
}

// Staged: room is a contiguous hole. Of every window of `bytes` in the pool that only covers
// evictable regions, take one that needs no copy out of a region the latest phase uses (that
// copy cannot start before the phase ends, and the phase being prepared would wait for it), then
// the one whose soonest needed region is needed latest (Belady over windows), then the one
// evicting the fewest live bytes. Evicting victims one by one instead fragments the pool and
// evicts regions fetched again a phase later.
bool Planner::makeHole(uint64_t bytes, int64_t now, uint64_t limit, const std::vector<uint32_t>& pinned, std::vector<Move>& out) {
  if (res_.pool_.fits(bytes)) return true;
  struct Occupied {
    uint64_t begin, end;
    uint32_t region;
  };
  std::vector<Occupied> occ;
  std::vector<uint64_t> edges;
  for (uint32_t q = 0; q < res_.state_.size(); ++q)
    if (res_.state_[q].resident) occ.push_back({res_.state_[q].slot, res_.state_[q].slot + res_.cost(q), q});
  for (const Occupied& o : occ) {
    edges.push_back(o.begin);
    edges.push_back(o.end);
  }
  for (const auto& h : res_.pool_.holes()) {
    edges.push_back(h.first);
    edges.push_back(h.second);
  }
  const uint64_t lo = res_.fixed_, hi = res_.budget_;
  std::vector<uint64_t> starts;
  for (uint64_t e : edges) {
    starts.push_back(e);
    if (e >= lo + bytes) starts.push_back(e - bytes);
  }
  bool found = false, bestBlocking = false;
  uint64_t bestSoonest = 0, bestLive = 0;
  std::vector<uint32_t> best, cover;
  for (uint64_t a : starts) {
    if (a < lo || a + bytes > hi) continue;
    uint64_t soonest = kNever, live = 0;
    bool ok = true, blocking = false;
    cover.clear();
    for (const Occupied& o : occ) {
      if (o.end <= a || o.begin >= a + bytes) continue;
      const NextUse n = nextUse(o.region, now);
      if (has(pinned, o.region) || this->pinned(o.region) || n.t <= limit) {
        ok = false;
        break;
      }
      if (!dead(o.region, now)) {
        soonest = std::min(soonest, n.t);
        live += o.end - o.begin;
      }
      const Residency::State& st = res_.state_[o.region];
      if (!dead(o.region, now) && st.dirty && now >= 0 && st.lastUse >= now) blocking = true;
      cover.push_back(o.region);
    }
    if (!ok) continue;
    const bool better = !found || (!blocking && bestBlocking) || (blocking == bestBlocking && (soonest > bestSoonest || (soonest == bestSoonest && live < bestLive)));
    if (better) {
      found = true;
      bestSoonest = soonest;
      bestLive = live;
      best = cover;
      bestBlocking = blocking;
    }
  }
  if (!found) return false;
  for (uint32_t q : best) evict(q, now, out);
  return true;
}

void Planner::note() { res_.lastRun.peakScheduledBytes = std::max(res_.lastRun.peakScheduledBytes, res_.used_); }

bool Planner::pinned(uint32_t r) const { return res_.model().regions()[r].kind == NNA_STATS; }

void Planner::start(std::vector<Move>& out) {
  std::vector<uint32_t> none;
  for (uint32_t r = 0; r < res_.state_.size(); ++r) {
    if (!pinned(r) || res_.state_[r].resident) continue;
    if (!makeRoom(r, -1, 0, none, out)) NNA_FAIL("INTERNAL", "residency: no room for the stats region");
    fetch(r, kUpdate, 0, out);
  }
}

void Planner::before(uint64_t t, std::vector<Move>& out) {
  const PhaseInfo& ph = phase(t);
  const int64_t now = int64_t(t) - 1;
  std::vector<uint32_t> need;
  for (const Use& u : ph.uses)
    if (!res_.model().regions()[u.region].remote) need.push_back(u.region);
  // Largest first: the staged pool then has the best chance to hold them all.
  std::sort(need.begin(), need.end(), [&](uint32_t a, uint32_t b) { return res_.cost(a) > res_.cost(b); });
  for (uint32_t r : need) {
    if (res_.state_[r].resident) continue;
    if (!makeRoom(r, now, t, need, out)) {
      compact(t, out);
      break;
    }
    for (const Use& u : ph.uses)
      if (u.region == r) fetch(r, u.access, t, out);
  }
  for (const Use& u : ph.uses)
    if (u.access & kWrite && !res_.model().regions()[u.region].remote) res_.state_[u.region].dirty = true;
}

// Staged only: the pool's holes are too scattered for this phase. Empty it (keeping every live
// byte) and place the phase's regions from the start: budget >= header + largest phase
// guarantees they fit.
void Planner::compact(uint64_t t, std::vector<Move>& out) {
  if (res_.placement_ != Placement::Staged) NNA_FAIL("INTERNAL", "residency: phase " + std::to_string(t) + " does not fit a budget that passed the check");
  const int64_t now = int64_t(t) - 1;
  for (uint32_t r = 0; r < res_.state_.size(); ++r)
    if (res_.state_[r].resident && !pinned(r)) evict(r, now, out);
  std::vector<Use> uses;
  for (const Use& u : phase(t).uses)
    if (!res_.model().regions()[u.region].remote) uses.push_back(u);
  std::sort(uses.begin(), uses.end(), [&](const Use& a, const Use& b) { return res_.cost(a.region) > res_.cost(b.region); });
  for (const Use& u : uses) {
    if (!res_.pool_.fits(res_.cost(u.region))) NNA_FAIL("INTERNAL", "residency: phase does not fit an empty pool");
    fetch(u.region, u.access, t, out);
  }
  res_.lastRun.compactions++;
}

void Planner::after(uint64_t t, std::vector<Move>& out) {
  for (const Use& u : phase(t).uses) res_.state_[u.region].lastUse = int64_t(t);
  // Look ahead: fetch what the next phases read while it fits without evicting anything needed
  // sooner; stop at the first region that does not fit, so fetches stay in the order of need.
  // Regions a phase writes whole are placed only when it comes (before()): placing them early
  // moves no bytes, it would only take room from data worth keeping. Two phases are enough for
  // the copies to overlap the kernels; fetching further ahead only evicts more.
  const uint64_t horizon = std::min(total_, t + 1 + kLookahead);
  for (uint64_t next = t + 1; next < horizon; ++next)
    for (const Use& u : phase(next).uses) {
      if (u.access == kWrite || res_.model().regions()[u.region].remote || res_.state_[u.region].resident) continue;
      if (nextUse(u.region, int64_t(t)).t != next) continue;  // written whole before this read: nothing to fetch
      if (!makeRoom(u.region, int64_t(t), next, {}, out)) return;
      fetch(u.region, u.access, next, out);
    }
}

// Nothing moves at the end of a run: what stays resident stays for the next run, and staged
// regions newer in the pool than in the image stay so until the image is read (dirtyIn).
void Planner::finish(std::vector<Move>&) { res_.total.add(res_.lastRun); }

}  // namespace nna
