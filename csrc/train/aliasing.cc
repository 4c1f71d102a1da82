#include "aliasing.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <vector>

#include "../core/validate.h"
#include "phases.h"

namespace nna {
namespace {

// Which region last wrote each byte: segment start -> region (-1: nobody's, scratch).
class Owners {
 public:
  explicit Owners(uint64_t total) {
    seg_[0] = -1;
    seg_[total] = -1;
  }
  void assign(uint64_t begin, uint64_t end, int32_t owner) {
    split(begin);
    split(end);
    seg_.erase(seg_.find(begin), seg_.find(end));
    seg_[begin] = owner;
  }
  // The first region other than `owner` found over [begin, end), or `owner` when none.
  int32_t intruder(uint64_t begin, uint64_t end, int32_t owner) const {
    for (auto it = std::prev(seg_.upper_bound(begin)); it != seg_.end() && it->first < end; ++it)
      if (it->second != owner) return it->second;
    return owner;
  }

 private:
  void split(uint64_t at) {
    auto it = std::prev(seg_.upper_bound(at));
    if (it->first != at) seg_[at] = it->second;
  }
  std::map<uint64_t, int32_t> seg_;
};

// The user regions of a validated header (the kind table): the user's data, persistent like the
// kept kinds. validateHeader already refused any overlap with them; the replay holds them too, so
// that no run may write over their bytes whatever validated the header.
struct UserSpan {
  uint64_t begin, end;
  std::string name;
};
std::vector<UserSpan> userSpans(const uint8_t* header, const nna_header& h) {
  std::vector<UserSpan> out;
  if (!h.num_extras) return out;
  std::vector<nna_extra> extras(h.num_extras);
  std::memcpy(extras.data(), header + h.extras_offset, extras.size() * sizeof(nna_extra));
  const uint8_t* table = header + h.extras_offset + extras.size() * sizeof(nna_extra);
  for (const nna_extra& e : extras)
    for (uint32_t i = 0; i < e.entries; ++i) {
      nna_region r;
      std::memcpy(&r, table + uint64_t(e.first + i) * sizeof(nna_region), sizeof r);
      if (!r.count) continue;
      const std::string name =
          std::string("user region '") + std::string(e.name, strnlen(e.name, NNA_EXTRA_NAME_BYTES)) + "'" + (e.rule == NNA_EXTRA_BYTES ? "" : " of layer " + std::to_string(i));
      out.push_back({r.offset, r.offset + r.count * e.elem_bytes, name});
    }
  return out;
}

const char* opName(Op op) { return op == Op::Train ? "train" : op == Op::Eval ? "eval" : "forward"; }

}  // namespace

std::string checkAliasing(const uint8_t* header) {
  nna_header h;
  std::memcpy(&h, header, sizeof h);
  if (!(h.flags & NNA_FLAG_COMPACT)) return "";
  const StepModel m(header);
  const std::vector<RegionInfo>& regions = m.regions();
  // A region that overlaps no other keeps its bytes whatever runs: it starts every run valid.
  std::vector<uint32_t> byOffset(regions.size());
  for (uint32_t i = 0; i < byOffset.size(); ++i) byOffset[i] = i;
  std::sort(byOffset.begin(), byOffset.end(), [&](uint32_t a, uint32_t b) { return regions[a].offset < regions[b].offset; });
  std::vector<bool> shared(regions.size(), false);
  uint64_t reach = 0;
  for (size_t i = 0; i < byOffset.size(); ++i) {
    const RegionInfo& r = regions[byOffset[i]];
    if (i > 0 && r.offset < reach) {  // overlaps one before it, which overlaps it
      shared[byOffset[i]] = true;
      for (size_t j = i; j-- > 0 && regions[byOffset[j]].offset + regions[byOffset[j]].bytes > r.offset;) shared[byOffset[j]] = true;
    }
    reach = std::max(reach, r.offset + r.bytes);
  }
  // User regions take owner ids after the built-in ones.
  const std::vector<UserSpan> user = userSpans(header, h);
  const int32_t firstUser = int32_t(regions.size());
  auto label = [&](int32_t r) { return r < 0 ? std::string("nothing") : r >= firstUser ? user[size_t(r - firstUser)].name : regionLabel(regions[size_t(r)]); };

  for (const Op op : {Op::Train, Op::Eval, Op::Forward})
    for (const bool resident : {false, true}) {
      if (resident && h.samples == 0) continue;
      for (const Path path : {Path::Layers, Path::Fused}) {
        const std::string run = std::string(opName(op)) + (resident ? ", resident" : "") + (path == Path::Fused ? ", fused order" : ", per-layer order");
        Owners owners(h.total_bytes);
        for (uint32_t r = 0; r < regions.size(); ++r)
          if (!shared[r]) owners.assign(regions[r].offset, regions[r].offset + regions[r].bytes, int32_t(r));
        for (size_t u = 0; u < user.size(); ++u) owners.assign(user[u].begin, user[u].end, firstUser + int32_t(u));
        const std::vector<PhaseInfo> phases = m.step(op, resident, path);
        for (int s = 0; s < 2; ++s)
          for (const PhaseInfo& ph : phases) {
            const std::string where = std::string(stageName(ph.stage)) + " of layer " + std::to_string(ph.layer) + " (" + run + ")";
            // One phase's kernels run at once: the regions it uses must not share bytes.
            std::vector<uint32_t> used;
            for (const Use& u : ph.uses) used.push_back(u.region);
            std::sort(used.begin(), used.end(), [&](uint32_t a, uint32_t b) { return regions[a].offset < regions[b].offset; });
            for (size_t i = 1; i < used.size(); ++i)
              for (size_t j = i; j-- > 0;)
                if (regions[used[j]].offset + regions[used[j]].bytes > regions[used[i]].offset)
                  return label(int32_t(used[j])) + " and " + label(int32_t(used[i])) + " share bytes but are both used in " + where;
            for (const Use& u : ph.uses) {
              const RegionInfo& r = regions[u.region];
              if (!(u.access & kRead)) continue;
              const int32_t other = owners.intruder(r.offset, r.offset + r.bytes, int32_t(u.region));
              if (other != int32_t(u.region))
                return label(int32_t(u.region)) + " is read in " + where + " but " + (other < 0 ? "holds no value of its own there" : label(other) + " wrote over its bytes");
            }
            for (const Use& u : ph.uses)
              if (u.access & kWrite) owners.assign(regions[u.region].offset, regions[u.region].offset + regions[u.region].bytes, int32_t(u.region));
          }
        // After the run: what is kept, and the outputs of the last layer, still hold their bytes.
        for (uint32_t r = 0; r < regions.size(); ++r) {
          const RegionInfo& ri = regions[r];
          if (!outlivesRun(h.num_layers, ri.layer, ri.kind)) continue;
          const int32_t other = owners.intruder(ri.offset, ri.offset + ri.bytes, int32_t(r));
          if (other != int32_t(r))
            return label(int32_t(r)) + " must outlive a run (" + run + ") but " + (other < 0 ? "shares bytes that no phase gives it" : label(other) + " wrote over its bytes");
        }
        for (size_t u = 0; u < user.size(); ++u) {
          const int32_t other = owners.intruder(user[u].begin, user[u].end, firstUser + int32_t(u));
          if (other != firstUser + int32_t(u)) return user[u].name + " is the user's data but " + label(other) + " wrote over its bytes (" + run + ")";
        }
      }
    }
  return "";
}

bool outlivesRun(uint32_t numLayers, uint32_t layer, uint32_t kind) {
  switch (kind) {
    case NNA_W:
    case NNA_B:
    case NNA_MW:
    case NNA_MB:
    case NNA_VW:
    case NNA_VB:
    case NNA_XDATA:
    case NNA_YDATA:
    case NNA_STATS: return true;
    case NNA_Z: return layer + 1 == numLayers;  // the outputs, read after the run
    default: return false;
  }
}

std::string validateArena(const void* base, size_t readable, size_t available) {
  const std::string why = validateHeader(base, readable, available);
  return why.empty() ? checkAliasing(static_cast<const uint8_t*>(base)) : why;
}

}  // namespace nna
