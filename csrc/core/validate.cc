#include "validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../descriptors/optimizers.h"

namespace nna {
namespace {

bool mulOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

std::string at(uint32_t l, uint32_t k) { return "layer " + std::to_string(l) + " region " + kindName(k); }

// A user region's name: [A-Za-z_][A-Za-z0-9_]*, NUL-terminated within the field and NUL-padded,
// not a built-in kind's name nor "header" / "padding" / "shared" (names of the other entries of a plan's byte counts).
std::string nameProblem(const char (&name)[NNA_EXTRA_NAME_BYTES]) {
  size_t n = 0;
  while (n < NNA_EXTRA_NAME_BYTES && name[n]) ++n;
  if (n == 0) return "is empty";
  if (n == NNA_EXTRA_NAME_BYTES) return "is not NUL-terminated";
  for (size_t i = n; i < NNA_EXTRA_NAME_BYTES; ++i)
    if (name[i]) return "is not NUL-padded";
  for (size_t i = 0; i < n; ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return "has a character outside [A-Za-z0-9_] (or starts with a digit)";
  }
  const std::string s(name, n);
  if (s == "header" || s == "padding" || s == "shared") return "is reserved";
  for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k)
    if (s == kindName(k)) return "is a built-in kind's name";
  return "";
}

}  // namespace

bool embedTableElements(const nna_embed_col* cols, uint32_t count, uint64_t* out) {
  *out = 0;
  for (uint32_t j = 0; j < count; ++j) {
    uint64_t n;
    if (mulOverflows(cols[j].cardinality, cols[j].dim, &n) || n > UINT64_MAX - *out) return false;
    *out += n;
  }
  return true;
}

bool expectedCount(const nna_header& h, const nna_layer& L, uint32_t l, uint32_t k, uint64_t* out, uint64_t tables) {
  const bool hidden = l > 0, last = l + 1 == h.num_layers;
  // A compact plan of an optimizer without state (SGD) has no dw for a dense layer: CUDA folds
  // the update into the weight-gradient product, the CPU keeps that product in a transient
  // buffer, and what needs dw (tf32x3, gradients(), clipping) is refused. An op's parameters (a
  // norm's gain, an embedding's tables) keep theirs: their updates read it.
  const bool dw = !(h.flags & NNA_FLAG_COMPACT) || !optimizerFolds(h.optimizer) || (hidden && L.op != NNA_OP_DENSE);
  const bool keeps = optimizerKeeps(h.optimizer, k);
  *out = 0;
  // What the op's w and b hold (nn_arena.h NNA_OPS): a dense layer's matrix and bias, a norm's
  // gain (and bias), an embedding's tables (`tables` elements), nothing for dropout and residual.
  const uint32_t wShape = hidden ? nna_op_w(L.op) : 0;
  const bool bias = hidden && nna_op_b(L.op);
  switch (k) {
    case NNA_Z:  // an activation whose f' needs x keeps it in a second half (nn_arena.h)
      return !mulOverflows(h.batch, L.units, out) && !mulOverflows(*out, nna_act_keeps_pre(L.activation) ? 2 : 1, out);
    case NNA_D:
    case NNA_Y:
      if (k == NNA_D ? hidden : last) return !mulOverflows(h.batch, L.units, out);
      return true;
    case NNA_B:
    case NNA_DB: *out = bias ? L.units : 0; return true;
    case NNA_MB:
    case NNA_VB: *out = bias && keeps ? L.units : 0; return true;
    case NNA_W:
    case NNA_DW:
    case NNA_MW:
    case NNA_VW: {
      const bool present = wShape && (k == NNA_W || (k == NNA_DW && dw) || keeps);
      if (!present) return true;
      if (wShape == 3) return (*out = tables, true);
      return wShape == 1 ? (*out = L.units, true) : !mulOverflows(L.units, L.fan_in, out);
    }
    case NNA_XDATA:
      if (l == 0) return !mulOverflows(h.samples, L.units, out);
      return true;
    case NNA_YDATA:
      if (last) return !mulOverflows(h.samples, L.units, out);
      return true;
    case NNA_STATS: *out = last ? NNA_STATS_COUNT : 0; return true;
  }
  return false;
}

namespace {

// An embedding layer (layer 1) against the input layer and its column table (nn_arena.h).
std::string checkEmbedding(const std::vector<nna_layer>& layers, const nna_op_param& q, const std::vector<nna_embed_col>& cols) {
  const nna_layer& L = layers[1];
  const std::string who = "layer 1 (embedding)";
  if (q.value != 0) return who + " has a value in the op parameter table";
  if (q.count == 0) return who + " has no categorical columns";
  if (layers[0].units != uint64_t(q.from) + q.count)
    return who + ": the input layer has " + std::to_string(layers[0].units) + " units, not " + std::to_string(q.from) + " numeric + " + std::to_string(q.count) +
           " categorical columns";
  uint64_t width = q.from;
  for (uint32_t j = 0; j < q.count; ++j) {
    const std::string col = who + " column " + std::to_string(j);
    if (cols[j].cardinality == 0 || cols[j].cardinality > NNA_MAX_CARDINALITY)
      return col + " has cardinality " + std::to_string(cols[j].cardinality) + " outside [1, " + std::to_string(NNA_MAX_CARDINALITY) + "]";
    if (cols[j].dim == 0) return col + " has dim 0";
    width += cols[j].dim;  // <= 2^32 + 2^32 * 2^32: no overflow
  }
  if (L.units != width) return who + " has " + std::to_string(L.units) + " units, not numeric + the columns' dims (" + std::to_string(width) + ")";
  return "";
}

// Layer l's op against its place and shape (nn_arena.h NNA_OPS), with its entry of the op
// parameter table (`q`, null where the header has none) and the embedding column table.
std::string checkOp(const std::vector<nna_layer>& layers, uint32_t l, const nna_op_param* q, const std::vector<nna_embed_col>& cols) {
  const nna_layer& L = layers[l];
  const std::string who = "layer " + std::to_string(l);
  if (L.op >= NNA_OP_COUNT) return who + " has unknown op " + std::to_string(L.op);
  if (q && q->count && L.op != NNA_OP_EMBEDDING) return who + " has a column count in the op parameter table but is not an embedding";
  if (L.op == NNA_OP_DENSE) {
    if (q && (q->value != 0 || q->from != 0)) return who + " is dense but has op parameters";
    return "";
  }
  const std::string op = std::string(" (") + nna_op_name(L.op) + ")";
  if (l == 0 || l + 1 == layers.size()) return who + op + ": the input and the output layer are dense";
  if (L.activation != NNA_ACT_IDENTITY) return who + op + " has activation " + std::to_string(L.activation) + ", not identity";
  const uint32_t param = nna_op_param_kind_of(L.op);
  if (param == NNA_OP_PARAM_EMBED && l != 1) return who + op + ": an embedding is layer 1 (right after the input)";
  if (param == NNA_OP_PARAM_EMBED) return checkEmbedding(layers, *q, cols);
  if (L.fan_in != L.units) return who + op + " changes the width (" + std::to_string(L.fan_in) + " -> " + std::to_string(L.units) + ")";
  // The entry as the op's row of NNA_OPS says (its param column).
  if (param == NNA_OP_PARAM_FROM) {
    if (q->value != 0) return who + op + " has a value in the op parameter table";
    if (q->from + 1 >= l) return who + op + " adds layer " + std::to_string(q->from) + ", which must come before layer " + std::to_string(l - 1);
    if (layers[q->from].units != L.units)
      return who + op + " adds layer " + std::to_string(q->from) + " of " + std::to_string(layers[q->from].units) + " units to " + std::to_string(L.units);
    return "";
  }
  if (q->from != 0) return who + op + " has a from in the op parameter table";
  if (param == NNA_OP_PARAM_P && !(q->value >= 0 && q->value < 1)) return who + op + " has p " + std::to_string(q->value) + " outside [0, 1)";
  if (param == NNA_OP_PARAM_EPS && !(std::isfinite(q->value) && q->value > 0)) return who + op + " has eps " + std::to_string(q->value) + ", not a finite value > 0";
  if (param == NNA_OP_PARAM_NONE && q->value != 0) return who + op + " has a value in the op parameter table";
  return "";
}

// The kind table (version 2): every entry's name, rule and counts against the shapes, every
// region in bounds and aligned (added to the spans for the overlap check by `span`).
template <typename AddSpan>
std::string checkExtras(const void* base, size_t readable, const nna_header& h, const std::vector<nna_layer>& layers, size_t elem, uint64_t tables, AddSpan span) {
  if (!h.num_extras) return "";
  const char* p = static_cast<const char*>(base);
  const uint64_t structsEnd = h.extras_offset + uint64_t(h.num_extras) * sizeof(nna_extra);  // small: no overflow
  if (structsEnd > h.header_bytes) return "kind table ends beyond header_bytes";
  if (structsEnd > readable) return "kind table ends at " + std::to_string(structsEnd) + ", only " + std::to_string(readable) + " bytes readable";
  std::vector<nna_extra> extras(h.num_extras);
  std::memcpy(extras.data(), p + h.extras_offset, extras.size() * sizeof(nna_extra));
  uint64_t entries = 0;
  for (uint32_t i = 0; i < h.num_extras; ++i) {
    const nna_extra& e = extras[i];
    const std::string who = "user region " + std::to_string(i);
    const std::string bad = nameProblem(e.name);
    if (!bad.empty()) return who + " name " + bad;
    for (uint32_t j = 0; j < i; ++j)
      if (std::strncmp(extras[j].name, e.name, NNA_EXTRA_NAME_BYTES) == 0) return who + " name '" + e.name + "' repeats user region " + std::to_string(j);
    if (e.reserved0 || e.reserved1) return who + " '" + e.name + "' has non-zero reserved fields";
    if (e.rule == NNA_EXTRA_PER_LAYER) {
      if (e.like >= NNA_KIND_COUNT || !(NNA_EXTRA_LIKE_KINDS >> e.like & 1u))
        return who + " '" + e.name + "' is shaped like kind " + std::to_string(e.like) + " (must be z, b or w)";
      if (e.elem_bytes != elem) return who + " '" + e.name + "' elem_bytes " + std::to_string(e.elem_bytes) + " != the dtype's " + std::to_string(elem);
      if (e.entries != h.num_layers) return who + " '" + e.name + "' has " + std::to_string(e.entries) + " entries, not one per layer";
    } else if (e.rule == NNA_EXTRA_BYTES) {
      if (e.like || e.elem_bytes != 1 || e.entries != 1) return who + " '" + e.name + "' (raw bytes) must have like 0, elem_bytes 1 and 1 entry";
    } else {
      return who + " '" + e.name + "' has unknown rule " + std::to_string(e.rule);
    }
    if (e.first != entries) return who + " '" + e.name + "' first entry " + std::to_string(e.first) + " != " + std::to_string(entries);
    entries += e.entries;
  }
  const uint64_t end = structsEnd + entries * sizeof(nna_region);  // entries <= 64 * 4096
  if (end > h.header_bytes) return "kind table ends beyond header_bytes";
  if (end > readable) return "kind table ends at " + std::to_string(end) + ", only " + std::to_string(readable) + " bytes readable";
  std::vector<nna_region> table(entries);
  std::memcpy(table.data(), p + structsEnd, table.size() * sizeof(nna_region));
  for (uint32_t i = 0; i < h.num_extras; ++i) {
    const nna_extra& e = extras[i];
    uint64_t present = 0;
    for (uint32_t l = 0; l < e.entries; ++l) {
      const nna_region r = table[e.first + l];
      const std::string who = std::string("user region '") + e.name + "'" + (e.rule == NNA_EXTRA_BYTES ? "" : " of layer " + std::to_string(l));
      uint64_t want = 0, bytes;
      if (e.rule == NNA_EXTRA_PER_LAYER && !expectedCount(h, layers[l], l, e.like, &want, tables)) return who + ": size overflows 64 bits";
      if (!r.count) {
        if (r.offset) return who + " is absent but has offset " + std::to_string(r.offset);
        continue;
      }
      // A layer has this region or not (count 0); where it has it, the shape decides the count.
      if (e.rule == NNA_EXTRA_PER_LAYER && r.count != want)
        return who + " has count " + std::to_string(r.count) + ", its shape (like " + kindName(e.like) + ") needs " + std::to_string(want);
      if (mulOverflows(r.count, e.elem_bytes, &bytes)) return who + ": byte size overflows 64 bits";
      if (r.offset % h.align) return who + " offset " + std::to_string(r.offset) + " is not aligned to " + std::to_string(h.align);
      if (r.offset < h.header_bytes) return who + " starts inside the header";
      if (r.offset > h.total_bytes || bytes > h.total_bytes - r.offset) return who + " ends beyond total_bytes";
      span(r.offset, r.offset + bytes, who);
      ++present;
    }
    if (!present) return std::string("user region '") + e.name + "' has no region in any layer";
  }
  return "";
}

}  // namespace

ShapeProblem shapeProblem(bool compact, uint32_t extras, uint64_t models) {
  if (models <= 1) return {};
  // The aliasing replay (csrc/train/aliasing.cc) places one copy of every region; K copies with
  // their strides are not replayed.
  if (compact) return {"BAD_SPEC", "compact", "a compact plan holds one model; this one has models: " + std::to_string(models) + " (plan it without compact, or with models: 1)"};
  // The kind table has no per-model strides: a user region has one copy.
  if (extras) return {"BAD_EXTRA", "extra", "user regions cannot be combined with models: " + std::to_string(models) + " (yet); plan them with models: 1"};
  return {};
}

std::string validateHeader(const void* base, size_t readable, size_t available) {
  if (readable < sizeof(nna_header)) return "header needs " + std::to_string(sizeof(nna_header)) + " bytes, have " + std::to_string(readable);
  nna_header h;
  std::memcpy(&h, base, sizeof h);  // no alignment assumption on a user buffer
  if (h.magic != NNA_MAGIC) return "bad magic (not an nn-arena header, or written with another byte order)";
  if (h.version < 1 || h.version > NNA_VERSION) return "unsupported header version " + std::to_string(h.version);
  if (h.num_kinds != NNA_KIND_COUNT) return "num_kinds " + std::to_string(h.num_kinds) + " != " + std::to_string(NNA_KIND_COUNT);
  if (h.layer_size != sizeof(nna_layer)) return "layer_size " + std::to_string(h.layer_size) + " != " + std::to_string(sizeof(nna_layer));
  const size_t elem = dtypeBytes(h.dtype);
  if (!elem) return "unknown dtype " + std::to_string(h.dtype);
  if (h.order > NNA_KIND_MAJOR) return "unknown order " + std::to_string(h.order);
  if (!optimizerInfo(h.optimizer)) return "unknown optimizer " + std::to_string(h.optimizer);
  if (h.num_layers < 2 || h.num_layers > NNA_MAX_LAYERS) return "num_layers " + std::to_string(h.num_layers) + " outside [2, " + std::to_string(NNA_MAX_LAYERS) + "]";
  if (h.batch == 0) return "batch is 0";
  if (h.align < NNA_MIN_ALIGN || (h.align & (h.align - 1)) || h.align > NNA_MAX_ALIGN)
    return "align " + std::to_string(h.align) + " is not a power of two in [" + std::to_string(NNA_MIN_ALIGN) + ", " + std::to_string(NNA_MAX_ALIGN) + "]";
  if (h.flags & ~uint64_t(NNA_FLAGS_KNOWN)) return "unknown flags " + std::to_string(h.flags);
  if (h.flags & NNA_FLAG_REGION_DTYPES) {  // version 4: z and d in 16 bits over a float32 arena
    if (h.version < 4) return "version-" + std::to_string(h.version) + " header with region dtypes (flags " + std::to_string(h.flags) + ")";
    if (h.dtype != NNA_FLOAT32) return "region dtypes need a float32 arena, dtype is " + std::to_string(h.dtype);
    for (const uint32_t kind : {uint32_t(NNA_Z), uint32_t(NNA_D)})
      if (const uint32_t code = nna_region_dtype_of(&h, 1, kind); code > NNA_REGION_FP16)
        return "unknown region dtype " + std::to_string(code) + " (flags bits " + std::to_string(kind == NNA_Z ? NNA_FLAG_Z_DTYPE_SHIFT : NNA_FLAG_D_DTYPE_SHIFT) + "..)";
  }
  if (h.models > NNA_MAX_MODELS) return "models " + std::to_string(h.models) + " outside [0, " + std::to_string(NNA_MAX_MODELS) + "] (0 means 1)";
  const uint64_t models = nna_models(&h);
  if (h.layers_offset != sizeof(nna_header)) return "layers_offset " + std::to_string(h.layers_offset) + " != " + std::to_string(sizeof(nna_header));
  const uint64_t tableEnd = sizeof(nna_header) + uint64_t(h.num_layers) * sizeof(nna_layer);  // <= 128 + 4096*232: no overflow
  if (h.header_bytes < tableEnd) return "header_bytes " + std::to_string(h.header_bytes) + " < end of layer table " + std::to_string(tableEnd);
  if (h.total_bytes < h.header_bytes) return "total_bytes " + std::to_string(h.total_bytes) + " < header_bytes";
  if (h.total_bytes > available) return "header claims " + std::to_string(h.total_bytes) + " bytes, only " + std::to_string(available) + " available";
  if (tableEnd > readable) return "layer table ends at " + std::to_string(tableEnd) + ", only " + std::to_string(readable) + " bytes readable";

  // Version 1 had no kind table: its three fields were reserved (zero).
  if (h.version == 1 && (h.extras_offset || h.num_extras || h.extra_size)) return "version-1 header with a kind table";
  if (h.num_extras > NNA_MAX_EXTRAS) return "num_extras " + std::to_string(h.num_extras) + " > " + std::to_string(NNA_MAX_EXTRAS);
  if (h.num_extras == 0 && (h.extras_offset || h.extra_size)) return "no user regions, but extras_offset or extra_size is not 0";
  if (h.num_extras && h.extra_size != sizeof(nna_extra)) return "extra_size " + std::to_string(h.extra_size) + " != " + std::to_string(sizeof(nna_extra));

  // The layers and their ops (version 3: an op parameter table right after the layer table,
  // exactly when a layer is not dense; older versions have neither).
  std::vector<nna_layer> layers(h.num_layers);
  bool anyOp = false;
  for (uint32_t l = 0; l < h.num_layers; ++l) {
    std::memcpy(&layers[l], static_cast<const char*>(base) + h.layers_offset + uint64_t(l) * sizeof(nna_layer), sizeof(nna_layer));
    anyOp |= layers[l].op != NNA_OP_DENSE;
  }
  if (h.version < 3 && (anyOp || h.ops_offset)) return "version-" + std::to_string(h.version) + " header with ops (op codes or an op parameter table)";
  if (!anyOp && h.ops_offset) return "ops_offset " + std::to_string(h.ops_offset) + " but every layer is dense";
  if (anyOp && h.ops_offset != tableEnd) return "ops_offset " + std::to_string(h.ops_offset) + " != end of layer table " + std::to_string(tableEnd);
  const uint64_t opsEnd = tableEnd + (anyOp ? uint64_t(h.num_layers) * sizeof(nna_op_param) : 0);
  if (opsEnd > h.header_bytes) return "op parameter table ends beyond header_bytes";
  if (opsEnd > readable) return "op parameter table ends at " + std::to_string(opsEnd) + ", only " + std::to_string(readable) + " bytes readable";
  std::vector<nna_op_param> params(anyOp ? h.num_layers : 0);
  if (anyOp) std::memcpy(params.data(), static_cast<const char*>(base) + tableEnd, params.size() * sizeof(nna_op_param));
  // The embedding column table, right after the op parameter table where layer 1 is an embedding.
  const uint32_t columns = anyOp && layers[1].op == NNA_OP_EMBEDDING ? params[1].count : 0;
  const uint64_t colsEnd = opsEnd + uint64_t(columns) * sizeof(nna_embed_col);
  if (colsEnd > h.header_bytes) return "embedding column table ends beyond header_bytes";
  if (colsEnd > readable) return "embedding column table ends at " + std::to_string(colsEnd) + ", only " + std::to_string(readable) + " bytes readable";
  std::vector<nna_embed_col> cols(columns);
  if (columns) std::memcpy(cols.data(), static_cast<const char*>(base) + opsEnd, cols.size() * sizeof(nna_embed_col));
  uint64_t tables = 0;
  if (!embedTableElements(cols.data(), columns, &tables)) return "layer 1 (embedding): its tables' size overflows 64 bits";
  if (h.num_extras && h.extras_offset != colsEnd) return "extras_offset " + std::to_string(h.extras_offset) + " != end of the layer and op tables " + std::to_string(colsEnd);
  const ShapeProblem combination = shapeProblem(h.flags & NNA_FLAG_COMPACT, h.num_extras, models);
  if (combination.field) return combination.why;

  struct Span {
    uint64_t begin, end;
    std::string what;
  };
  std::vector<Span> spans;
  uint64_t prevUnits = 0;
  bool usesParam = false;
  for (uint32_t l = 0; l < h.num_layers; ++l) {
    const nna_layer& L = layers[l];
    if (L.units == 0) return "layer " + std::to_string(l) + " has 0 units";
    if (L.fan_in != prevUnits) return "layer " + std::to_string(l) + " fan_in " + std::to_string(L.fan_in) + " != units of the layer before (" + std::to_string(prevUnits) + ")";
    const uint32_t on = l + 1 == h.num_layers ? NNA_ON_OUTPUT : NNA_ON_HIDDEN;  // where the table allows it
    if (l == 0 ? L.activation != NNA_ACT_INPUT : !(nna_act_on(L.activation) & on)) return "layer " + std::to_string(l) + " has invalid activation " + std::to_string(L.activation);
    if (nna_act_param_default(L.activation) != 0) usesParam = true;
    prevUnits = L.units;
    const std::string op = checkOp(layers, l, anyOp ? &params[l] : nullptr, cols);
    if (!op.empty()) return op;
    for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k) {
      const nna_region r = L.region[k];
      uint64_t want, bytes;
      if (!expectedCount(h, L, l, k, &want, tables)) return at(l, k) + ": size overflows 64 bits";
      if (r.count != want) return at(l, k) + " has count " + std::to_string(r.count) + ", its shape needs " + std::to_string(want);
      if (!r.count) {
        if (r.offset) return at(l, k) + " is absent but has offset " + std::to_string(r.offset);
        continue;
      }
      if (mulOverflows(r.count, nna_elem_bytes(&h, l, k), &bytes)) return at(l, k) + ": byte size overflows 64 bits";
      if (models > 1 && nna_kind_per_model(&h, l, k)) {  // K copies, each starting aligned
        uint64_t rest;
        if (bytes > UINT64_MAX - h.align || mulOverflows((bytes + h.align - 1) / h.align * h.align, models - 1, &rest) || rest > UINT64_MAX - bytes)
          return at(l, k) + ": the copies of " + std::to_string(models) + " models overflow 64 bits";
        bytes += rest;
      }
      if (r.offset % h.align) return at(l, k) + " offset " + std::to_string(r.offset) + " is not aligned to " + std::to_string(h.align);
      if (r.offset < h.header_bytes) return at(l, k) + " starts inside the header";
      if (r.offset > h.total_bytes || bytes > h.total_bytes - r.offset) return at(l, k) + " ends beyond total_bytes";
      spans.push_back({r.offset, r.offset + bytes, at(l, k)});
    }
  }
  // act_param: the parameter of the activations that take one (leaky-relu's slope, >= 0 so that
  // f' can come from the output); 0 when no layer uses one, as in older headers.
  if (usesParam ? !(std::isfinite(h.act_param) && h.act_param >= 0) : h.act_param != 0)
    return usesParam ? "act_param " + std::to_string(h.act_param) + " is not a finite value >= 0" : "act_param is not 0, and no layer's activation takes a parameter";
  std::vector<Span> user;  // user regions: never share bytes with anything, compact or not
  const std::string why = checkExtras(base, readable, h, layers, elem, tables, [&](uint64_t b, uint64_t e, std::string what) { user.push_back({b, e, std::move(what)}); });
  if (!why.empty()) return why;
  auto byBegin = [](const Span& a, const Span& b) { return a.begin < b.begin; };
  if (h.flags & NNA_FLAG_COMPACT) {
    // A compact plan shares bytes between built-in regions on purpose: which may is for the
    // replay of its phases to decide (csrc/train/aliasing.cc, validateArena). User regions are
    // checked here: disjoint among themselves and from every built-in region.
    std::sort(user.begin(), user.end(), byBegin);
    for (size_t i = 1; i < user.size(); ++i)
      if (user[i].begin < user[i - 1].end) return user[i].what + " overlaps " + user[i - 1].what;
    for (const Span& s : spans) {  // disjoint and sorted: the first user span ending after s.begin is the only candidate
      const auto it = std::upper_bound(user.begin(), user.end(), s.begin, [](uint64_t v, const Span& u) { return v < u.end; });
      if (it != user.end() && it->begin < s.end) return it->what + " overlaps " + s.what;
    }
    return "";
  }
  spans.insert(spans.end(), user.begin(), user.end());
  std::sort(spans.begin(), spans.end(), byBegin);
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end) return spans[i].what + " overlaps " + spans[i - 1].what;
  return "";
}

}  // namespace nna
