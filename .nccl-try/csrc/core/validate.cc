#include "validate.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace nna {
namespace {

bool mulOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

std::string at(uint32_t l, uint32_t k) { return "layer " + std::to_string(l) + " region " + kindName(k); }

// Expected element count of (layer, kind) from the header's shape fields; false on overflow.
bool expectedCount(const nna_header& h, const nna_layer& L, uint32_t l, uint32_t k, uint64_t* out) {
  const bool hidden = l > 0, last = l + 1 == h.num_layers;
  const bool opt1 = h.optimizer == NNA_MOMENTUM || h.optimizer == NNA_ADAM, opt2 = h.optimizer == NNA_ADAM;
  *out = 0;
  switch (k) {
    case NNA_Z: return !mulOverflows(h.batch, L.units, out);
    case NNA_D: case NNA_Y:
      if (k == NNA_D ? hidden : last) return !mulOverflows(h.batch, L.units, out);
      return true;
    case NNA_B: case NNA_DB: *out = hidden ? L.units : 0; return true;
    case NNA_MB: *out = hidden && opt1 ? L.units : 0; return true;
    case NNA_VB: *out = hidden && opt2 ? L.units : 0; return true;
    case NNA_W: case NNA_DW: case NNA_MW: case NNA_VW: {
      const bool present = hidden && (k == NNA_W || k == NNA_DW || (k == NNA_MW && opt1) || (k == NNA_VW && opt2));
      if (present) return !mulOverflows(L.units, L.fan_in, out);
      return true;
    }
    case NNA_XDATA: if (l == 0) return !mulOverflows(h.samples, L.units, out); return true;
    case NNA_YDATA: if (last) return !mulOverflows(h.samples, L.units, out); return true;
    case NNA_STATS: *out = last ? NNA_STATS_COUNT : 0; return true;
  }
  return false;
}

}  // namespace

std::string validateHeader(const void* base, size_t readable, size_t available) {
  if (readable < sizeof(nna_header)) return "header needs " + std::to_string(sizeof(nna_header)) + " bytes, have " + std::to_string(readable);
  nna_header h;
  std::memcpy(&h, base, sizeof h);  // no alignment assumption on a user buffer
  if (h.magic != NNA_MAGIC) return "bad magic (not an nn-arena header, or written with another byte order)";
  if (h.version != NNA_VERSION) return "unsupported header version " + std::to_string(h.version);
  if (h.num_kinds != NNA_KIND_COUNT) return "num_kinds " + std::to_string(h.num_kinds) + " != " + std::to_string(NNA_KIND_COUNT);
  if (h.layer_size != sizeof(nna_layer)) return "layer_size " + std::to_string(h.layer_size) + " != " + std::to_string(sizeof(nna_layer));
  const size_t elem = dtypeBytes(h.dtype);
  if (!elem) return "unknown dtype " + std::to_string(h.dtype);
  if (h.order > NNA_KIND_MAJOR) return "unknown order " + std::to_string(h.order);
  if (h.optimizer > NNA_ADAM) return "unknown optimizer " + std::to_string(h.optimizer);
  if (h.num_layers < 2 || h.num_layers > NNA_MAX_LAYERS) return "num_layers " + std::to_string(h.num_layers) + " outside [2, " + std::to_string(NNA_MAX_LAYERS) + "]";
  if (h.batch == 0) return "batch is 0";
  if (h.align < 8 || (h.align & (h.align - 1)) || h.align > (1u << 30)) return "align " + std::to_string(h.align) + " is not a power of two in [8, 2^30]";
  if (h.layers_offset != sizeof(nna_header)) return "layers_offset " + std::to_string(h.layers_offset) + " != " + std::to_string(sizeof(nna_header));
  const uint64_t tableEnd = sizeof(nna_header) + uint64_t(h.num_layers) * sizeof(nna_layer);  // <= 128 + 4096*232: no overflow
  if (h.header_bytes < tableEnd) return "header_bytes " + std::to_string(h.header_bytes) + " < end of layer table " + std::to_string(tableEnd);
  if (h.total_bytes < h.header_bytes) return "total_bytes " + std::to_string(h.total_bytes) + " < header_bytes";
  if (h.total_bytes > available) return "header claims " + std::to_string(h.total_bytes) + " bytes, only " + std::to_string(available) + " available";
  if (tableEnd > readable) return "layer table ends at " + std::to_string(tableEnd) + ", only " + std::to_string(readable) + " bytes readable";

  struct Span { uint64_t begin, end; uint32_t l, k; };
  std::vector<Span> spans;
  uint64_t prevUnits = 0;
  for (uint32_t l = 0; l < h.num_layers; ++l) {
    nna_layer L;
    std::memcpy(&L, static_cast<const char*>(base) + h.layers_offset + uint64_t(l) * sizeof(nna_layer), sizeof L);
    if (L.units == 0) return "layer " + std::to_string(l) + " has 0 units";
    if (L.fan_in != prevUnits) return "layer " + std::to_string(l) + " fan_in " + std::to_string(L.fan_in) + " != units of the layer before (" + std::to_string(prevUnits) + ")";
    if (l == 0 ? L.activation != NNA_ACT_INPUT : (L.activation < NNA_ACT_IDENTITY || L.activation > NNA_ACT_SOFTMAX))
      return "layer " + std::to_string(l) + " has invalid activation " + std::to_string(L.activation);
    prevUnits = L.units;
    for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k) {
      const nna_region r = L.region[k];
      uint64_t want, bytes;
      if (!expectedCount(h, L, l, k, &want)) return at(l, k) + ": size overflows 64 bits";
      if (r.count != want) return at(l, k) + " has count " + std::to_string(r.count) + ", its shape needs " + std::to_string(want);
      if (!r.count) { if (r.offset) return at(l, k) + " is absent but has offset " + std::to_string(r.offset); continue; }
      if (mulOverflows(r.count, elem, &bytes)) return at(l, k) + ": byte size overflows 64 bits";
      if (r.offset % h.align) return at(l, k) + " offset " + std::to_string(r.offset) + " is not aligned to " + std::to_string(h.align);
      if (r.offset < h.header_bytes) return at(l, k) + " starts inside the header";
      if (r.offset > h.total_bytes || bytes > h.total_bytes - r.offset) return at(l, k) + " ends beyond total_bytes";
      spans.push_back({r.offset, r.offset + bytes, l, k});
    }
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end) return at(spans[i].l, spans[i].k) + " overlaps " + at(spans[i - 1].l, spans[i - 1].k);
  return "";
}

}  // namespace nna
