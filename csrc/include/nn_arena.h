/* The public C header keeps the layout it is read in (and its one-line case macros, which the
 * formatter would join). */
/* clang-format off */
/*
 * nn_arena.h: the header at offset 0 of every nn-arena buffer.
 *
 * Public and self-contained (C99 / C++ / CUDA). A native module of your own can include it,
 * take an arena's base address (host or device, see Arena.hostAddress / deviceAddress) and bind
 * every region of every layer from that address alone: no other pointer is ever passed.
 *
 * The one definition of the format: scripts/gen-tables.cjs generates the TypeScript side's
 * sizes, offsets, codes and limits (FORMAT in src/native/tables.generated.ts) from the #defines,
 * enums and structs below, and the TS encoder (src/layout/header.ts) writes at those offsets.
 *
 * Layout of an arena:
 *   [nna_header][nna_layer x num_layers][kind table of user regions][padding to align]  <- header_bytes
 *   regions at the offsets recorded in each nna_layer.region[kind] and in the kind table
 *   (disjoint, except in a compact plan: flags & NNA_FLAG_COMPACT, where built-in regions that
 *   never live at the same time share bytes; a user region never shares bytes with anything)
 * An arena may hold K = nna_models(h) networks of one shape (header field `models`; 0 = 1).
 * A region's count is then ONE model's elements; a per-model region holds its K copies back to
 * back, model m's at offset + m * nna_region_stride() (each copy starts aligned). The input
 * batch z[0], the targets y and the resident data set (xdata, ydata) are held once and shared:
 * every model sees the same rows. nna_model_ptr() binds model m's copy. User regions and
 * models > 1 do not go together (yet): such a header is refused.
 * All offsets are bytes from the arena base; all counts are elements of the arena's dtype
 * (a user region's count is in units of its elem_bytes: 1 for a region of raw bytes).
 * Every multi-byte field is little-endian (the magic reads wrong on a big-endian host).
 *
 * Version 2 added user regions (the kind table, nna_extra_*); a version-1 header is a version-2
 * header with no user regions (extras_offset, num_extras and extra_size are 0 in both).
 * Version 3 added ops (nna_layer.op, version 2's reserved field, 0 = dense) and the op parameter
 * table (nna_header.ops_offset, version 2's reserved_tail); a version-2 header is a version-3
 * header whose layers are all dense. A header is written with the lowest version that holds it:
 * a network of dense layers only is still written as version 2. An embedding layer (layer 1)
 * adds the embedding column table right after the op parameter table (nna_embed_col).
 * Version 4 added region dtypes: the activations (z of layers 1..L, pre-activations included)
 * and the errors (d of layers 1..L) of a float32 arena may be 16-bit (nna_region_dtype codes, in
 * flags bits NNA_FLAG_Z_DTYPE / NNA_FLAG_D_DTYPE); a region's count stays its elements, its
 * bytes are count x its own element size (nna_elem_bytes). A header with neither is written as
 * version 3 or lower; a version-3 header is a version-4 header whose regions all take the dtype.
 */
#ifndef NN_ARENA_H
#define NN_ARENA_H

#include <stdint.h>
#include <stddef.h>

#if defined(__CUDACC__)
#define NNA_HD __host__ __device__ __forceinline__
#else
#define NNA_HD static inline
#endif

#define NNA_MAGIC 0x414E4E41u /* bytes "ANNA" in memory order */
#define NNA_VERSION 4u
#define NNA_MAX_LAYERS 4096u
#define NNA_MAX_EXTRAS 64u        /* user regions (entries of the kind table) per arena */
#define NNA_EXTRA_NAME_BYTES 32u  /* a user region's name, NUL-padded: at most 31 characters */
#define NNA_MAX_MODELS 65535u     /* networks of one shape in one arena (nna_header.models) */
#define NNA_MIN_ALIGN 8u          /* nna_header.align: a power of two in [NNA_MIN_ALIGN, NNA_MAX_ALIGN] */
#define NNA_MAX_ALIGN 1073741824u /* 2^30 */
#define NNA_MAX_SAMPLES 4294967295u /* rows of a resident data set a run reads: its shuffle indexes them in 32 bits */

/* Element type of every region (but those a region dtype names: nna_region_dtype). */
enum nna_dtype { NNA_FLOAT32 = 1, NNA_FLOAT64 = 2 };

/* A kind's own element type (version 4, flags bits NNA_FLAG_Z_DTYPE / NNA_FLAG_D_DTYPE), over a
 * float32 arena: 0, the header's dtype; bf16 or fp16, two bytes an element. */
enum nna_region_dtype { NNA_REGION_BASE = 0, NNA_REGION_BF16 = 1, NNA_REGION_FP16 = 2 };

/* layer-major: each layer's regions are one contiguous range (one prefetch per layer).
 * kind-major: all regions of one kind are one range (all weights in one transfer). */
enum nna_order { NNA_LAYER_MAJOR = 0, NNA_KIND_MAJOR = 1 };

/* Optimizer codes. Each optimizer's state kinds, hyperparameters and element update: its
 * descriptor in csrc/descriptors/optimizers.h (the one table; the addon hands it to TypeScript). */
enum nna_optimizer { NNA_SGD = 0, NNA_MOMENTUM = 1, NNA_ADAM = 2, NNA_ADAMW = 3 };

/* ---- The activations: one row each, the one table of them ------------------------------------
 *   X(ENUM, code, "name", keeps_pre, on, init, param, "torch")
 *   keeps_pre  1: f' needs the pre-activation x (f is not invertible), which the layer's z region
 *              then keeps: z of such a layer has 2 x batch x units elements, the outputs f(x) first,
 *              then the pre-activations x (nna_bind's .pre); 0: f' is computed from the output
 *   on         where it may be used: NNA_ON_HIDDEN and / or NNA_ON_OUTPUT (the input layer has
 *              NNA_ACT_INPUT, on no other layer)
 *   init       the weights Trainer.init draws: NNA_INIT_HE (relu-like) or NNA_INIT_XAVIER
 *   param      0: f has no parameter; else the default of its one parameter, the header's act_param
 *              (one per arena: every layer of that activation uses it)
 *   torch      the torch.nn module of it (the PyTorch estimate), "" for none
 * f and f' of each: csrc/train/activations.h. The TypeScript tables are generated from this one (scripts/gen-tables.cjs writes
 * src/native/tables.generated.ts); nothing else lists the activations. */
#define NNA_ON_HIDDEN 1u
#define NNA_ON_OUTPUT 2u
#define NNA_INIT_HE 1u
#define NNA_INIT_XAVIER 2u
#define NNA_ACTIVATIONS(X)                                                         \
  X(NNA_ACT_INPUT, 0, "input", 0, 0, 0, 0, "")                                     \
  X(NNA_ACT_IDENTITY, 1, "identity", 0, 3, NNA_INIT_XAVIER, 0, "")                 \
  X(NNA_ACT_RELU, 2, "relu", 0, 3, NNA_INIT_HE, 0, "ReLU")                         \
  X(NNA_ACT_SIGMOID, 3, "sigmoid", 0, 3, NNA_INIT_XAVIER, 0, "Sigmoid")            \
  X(NNA_ACT_TANH, 4, "tanh", 0, 3, NNA_INIT_XAVIER, 0, "Tanh")                     \
  X(NNA_ACT_SOFTMAX, 5, "softmax", 0, 2, NNA_INIT_XAVIER, 0, "Softmax")            \
  X(NNA_ACT_GELU, 6, "gelu", 1, 1, NNA_INIT_HE, 0, "GELU")                         \
  X(NNA_ACT_GELU_TANH, 7, "gelu-tanh", 1, 1, NNA_INIT_HE, 0, "GELU")               \
  X(NNA_ACT_SILU, 8, "silu", 1, 1, NNA_INIT_HE, 0, "SiLU")                         \
  X(NNA_ACT_LEAKY_RELU, 9, "leaky-relu", 0, 1, NNA_INIT_HE, 0.01, "LeakyReLU")     \
  X(NNA_ACT_SOFTPLUS, 10, "softplus", 1, 1, NNA_INIT_HE, 0, "Softplus")

#define NNA_ACT_ENUM_(e, code, name, pre, on, init, param, torch) e = code,
#define NNA_ACT_PRE_(e, code, name, pre, on, init, param, torch) case code: return pre;
#define NNA_ACT_COUNT_(e, code, name, pre, on, init, param, torch) +1
#define NNA_ACT_ON_(e, code, name, pre, on, init, param, torch) case code: return on;
#define NNA_ACT_PARAM_(e, code, name, pre, on, init, param, torch) case code: return param;
enum nna_activation { NNA_ACTIVATIONS(NNA_ACT_ENUM_) };
#define NNA_ACT_COUNT (0 NNA_ACTIVATIONS(NNA_ACT_COUNT_)) /* codes are 0 .. NNA_ACT_COUNT - 1 */

/* Whether a layer of activation `act` keeps its pre-activations in the second half of z. */
NNA_HD int nna_act_keeps_pre(uint32_t act) {
  switch (act) { NNA_ACTIVATIONS(NNA_ACT_PRE_) default: return 0; }
}
/* The default of activation `act`'s parameter (the header's act_param), 0 when it has none. */
NNA_HD double nna_act_param_default(uint32_t act) {
  switch (act) { NNA_ACTIVATIONS(NNA_ACT_PARAM_) default: return 0; }
}
/* Where activation `act` may be used (NNA_ON_* bits); 0 for unknown codes and the input's. */
NNA_HD uint32_t nna_act_on(uint32_t act) {
  switch (act) { NNA_ACTIVATIONS(NNA_ACT_ON_) default: return 0; }
}

/* ---- The ops: what a layer computes, one row each, the one table of them ----------------------
 *   X(ENUM, code, "name", w, b, "torch", param)
 *   w   what the layer's w region (and dw, mw, vw) holds: 2 a matrix, units x fan_in (dense);
 *       1 a gain, units elements (norms); 3 the embedding tables, sum of cardinality x dim over
 *       the embedding column table (each column's table [cardinality][dim], in column order);
 *       0 none. A w of 2 or 3 is a 2-D parameter: weight decay applies (nna_op_w_decays)
 *   b   whether the layer has a bias (b, db, mb, vb: units elements)
 *   torch the torch.nn module it matches ("" for none: residual is an addition)
 *   param what the layer's entry of the op parameter table holds, as checkOp (validate.cc)
 *       checks it: NNA_OP_PARAM_NONE nothing (zeros); _EPS value: eps, finite > 0; _P value: p
 *       in [0, 1), the op drops units in training runs (its mask from nna_dropout_keep, so the
 *       step in parts refuses it: check.cc); _FROM from: a layer k < l - 1 of the same width
 *       (value 0); _EMBED the embedding's numeric columns and column table (checkEmbedding)
 * Every op but dense keeps its width (fan_in == units), has the identity activation and takes its
 * parameter from the layer's entry of the op parameter table (nna_op_param):
 *   layernorm  value: eps (> 0)   y = (x - mean) / sqrt(var + eps) * gain + bias, per row
 *   rmsnorm    value: eps (> 0)   y = x / sqrt(mean(x^2) + eps) * gain, per row
 *   dropout    value: p in [0, 1) training runs: y = x * keep / (1 - p), keep from nna_dropout_keep;
 *                                 other runs: y = x
 *   residual   from: a layer k < l - 1 of the same width    y = z[l-1] + z[k]
 *   alpha-dropout  value: p in [0, 1) training runs: nn.AlphaDropout's, with the mask of dropout:
 *                                 y = keep ? x a + alpha a p : alpha a (p - 1), a = 1 / sqrt((alpha^2 p
 *                                 + 1)(1 - p)), alpha = 1.7580993408473766; other runs: y = x
 * but embedding, which is layer 1 only, with the identity activation: from is its numeric
 * columns N, count its categorical columns C (entries of the embedding column table, >= 1);
 * layer 0 has N + C units, layer 1 N + the sum of the columns' dims. Per row of x = z[0]:
 *   y = [x[0..N), table_0[x[N]], table_1[x[N+1]], ...]; an index that is not an integer in
 *   [0, cardinality) gives NaN in that column's dims and in the row's outputs (z of the last
 *   layer, after its product), so that the run's non-finite check reports it.
 *   Its backward sums each row's error into the rows of the tables it read (rows in order) and
 *   passes nothing to layer 0.
 * Their forward and backward: csrc/ops/. The input layer and the output layer are dense. */
enum nna_op_param_kind { NNA_OP_PARAM_NONE = 0, NNA_OP_PARAM_EPS = 1, NNA_OP_PARAM_P = 2, NNA_OP_PARAM_FROM = 3, NNA_OP_PARAM_EMBED = 4 };
#define NNA_OPS(X)                                                         \
  X(NNA_OP_DENSE, 0, "dense", 2, 1, "Linear", NNA_OP_PARAM_NONE)           \
  X(NNA_OP_LAYERNORM, 1, "layernorm", 1, 1, "LayerNorm", NNA_OP_PARAM_EPS) \
  X(NNA_OP_RMSNORM, 2, "rmsnorm", 1, 0, "RMSNorm", NNA_OP_PARAM_EPS)       \
  X(NNA_OP_DROPOUT, 3, "dropout", 0, 0, "Dropout", NNA_OP_PARAM_P)         \
  X(NNA_OP_RESIDUAL, 4, "residual", 0, 0, "", NNA_OP_PARAM_FROM)           \
  X(NNA_OP_EMBEDDING, 5, "embedding", 3, 0, "Embedding", NNA_OP_PARAM_EMBED)        \
  X(NNA_OP_ALPHA_DROPOUT, 6, "alpha-dropout", 0, 0, "AlphaDropout", NNA_OP_PARAM_P)

#define NNA_OP_ENUM_(e, code, name, w, b, torch, param) e = code,
#define NNA_OP_COUNT_(e, code, name, w, b, torch, param) +1
#define NNA_OP_W_(e, code, name, w, b, torch, param) case code: return w;
#define NNA_OP_B_(e, code, name, w, b, torch, param) case code: return b;
#define NNA_OP_NAME_(e, code, name, w, b, torch, param) case code: return name;
#define NNA_OP_PARAM_(e, code, name, w, b, torch, param) case code: return param;
enum nna_op { NNA_OPS(NNA_OP_ENUM_) };
#define NNA_OP_COUNT (0 NNA_OPS(NNA_OP_COUNT_)) /* codes are 0 .. NNA_OP_COUNT - 1 */

/* What op `op`'s w region holds: 2 a units x fan_in matrix, 1 a units-long gain, 3 embedding
 * tables, 0 none. */
NNA_HD uint32_t nna_op_w(uint32_t op) {
  switch (op) { NNA_OPS(NNA_OP_W_) default: return 0; }
}
/* Whether op `op`'s w is a 2-D parameter (a matrix or tables), which weight decay applies to;
 * a gain decays as a bias does (only with decayBiases). */
NNA_HD int nna_op_w_decays(uint32_t op) { return nna_op_w(op) >= 2u; }
/* Whether op `op` has a bias. */
NNA_HD uint32_t nna_op_b(uint32_t op) {
  switch (op) { NNA_OPS(NNA_OP_B_) default: return 0; }
}
/* What op `op`'s entry of the op parameter table holds (NNA_OP_PARAM_*). */
NNA_HD uint32_t nna_op_param_kind_of(uint32_t op) {
  switch (op) { NNA_OPS(NNA_OP_PARAM_) default: return NNA_OP_PARAM_NONE; }
}
/* The name of op `op`, or NULL for an unknown code. */
NNA_HD const char* nna_op_name(uint32_t op) {
  switch (op) { NNA_OPS(NNA_OP_NAME_) default: return (const char*)0; }
}

/* Whether unit (row, col) of dropout layer `layer` is kept at optimizer step `step` (1-based) of
 * a run seeded with `seed`: a counter-based draw (splitmix64's finalizer over the counter), so the
 * CPU and CUDA keep the same units and a resumed run the units the straight run would have.
 * `threshold`: p scaled to 24 bits (nna_dropout_threshold); a unit is kept when its 24-bit draw
 * is at least that. */
NNA_HD uint64_t nna_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
NNA_HD uint32_t nna_dropout_threshold(double p) { return (uint32_t)(p * 16777216.0); }
NNA_HD int nna_dropout_keep(uint64_t seed, uint64_t step, uint32_t layer, uint64_t row, uint64_t col, uint64_t units, uint32_t threshold) {
  const uint64_t stream = nna_mix64(seed ^ nna_mix64(step * 4096u + layer));
  return (uint32_t)(nna_mix64(stream + row * units + col) >> 40) >= threshold;
}

/* ---- Region kinds: one row each, the one table of them ------------------------------------
 *   X(ENUM, code, "name")   the code's order is the kind-major placement order; the name is the
 *                           one the TS API and messages use (the generated KINDS; nna_kind_name)
 *   z      outputs, batch x units (layer 0: the input batch)
 *   b      biases, units
 *   w      weights, units x fan_in (row-major: w[j * fan_in + i])
 *   d      errors dL/d(pre-activation), batch x units
 *   db dw  bias and weight gradients
 *   mw mb  optimizer state 1 for w and b (momentum velocity / Adam m)
 *   vw vb  optimizer state 2 for w and b (Adam v)
 *   y      targets of the batch, batch x units (output layer only)
 *   xdata  resident training inputs, samples x units (layer 0)
 *   ydata  resident training targets, samples x units (last layer)
 *   stats  NNA_STATS_COUNT accumulators (last layer), see nna_stat */
#define NNA_KINDS(X)          \
  X(NNA_Z, 0, "z")            \
  X(NNA_B, 1, "b")            \
  X(NNA_W, 2, "w")            \
  X(NNA_D, 3, "d")            \
  X(NNA_DB, 4, "db")          \
  X(NNA_DW, 5, "dw")          \
  X(NNA_MW, 6, "mw")          \
  X(NNA_MB, 7, "mb")          \
  X(NNA_VW, 8, "vw")          \
  X(NNA_VB, 9, "vb")          \
  X(NNA_Y, 10, "y")           \
  X(NNA_XDATA, 11, "xdata")   \
  X(NNA_YDATA, 12, "ydata")   \
  X(NNA_STATS, 13, "stats")

#define NNA_KIND_ENUM_(e, code, name) e = code,
#define NNA_KIND_COUNT_(e, code, name) +1
#define NNA_KIND_NAME_(e, code, name) case code: return name;
enum nna_kind { NNA_KINDS(NNA_KIND_ENUM_) NNA_KIND_COUNT = 0 NNA_KINDS(NNA_KIND_COUNT_) /* codes are 0 .. NNA_KIND_COUNT - 1 */ };

/* The name of a region kind ("w", "db", ...), or NULL for an unknown code. */
NNA_HD const char* nna_kind_name(uint32_t kind) {
  switch (kind) { NNA_KINDS(NNA_KIND_NAME_) default: return (const char*)0; }
}

/* Slots of the stats region: kernels accumulate here so that training needs no per-step
 * read-back; the host reads the few bytes once per epoch or progress report. */
enum nna_stat {
  NNA_STAT_LOSS = 0,      /* sum over rows of the per-row loss                          */
  NNA_STAT_CORRECT = 1,   /* rows whose argmax matches the target's argmax              */
  NNA_STAT_ROWS = 2,      /* rows accumulated                                           */
  NNA_STAT_BAD_STEP = 3,  /* first step (0-based in the run) with a non-finite loss, or -1 */
  NNA_STAT_LOSS_FIXED = 4,/* CUDA runs: 16 bytes from this slot on hold one step's loss sum in
                             fixed point (two uint64: fraction bits, then the whole part), added
                             with integer atomics so the sum is exact whatever order rows finish
                             in; folded into NNA_STAT_LOSS (and zeroed) after every step */
  NNA_STAT_GRAD_NORM = 6, /* runs that clip gradients: the global gradient norm (before clipping)
                             of the run's last step */
  NNA_STATS_COUNT = 8
};

/* One region: count == 0 means the layer has no region of this kind (offset is then 0). */
typedef struct nna_region {
  uint64_t offset; /* bytes from the arena base */
  uint64_t count;  /* elements */
} nna_region;

typedef struct nna_layer {
  uint64_t units;
  uint64_t fan_in;     /* units of layer l-1; 0 for the input layer */
  uint32_t activation; /* enum nna_activation (NNA_ACT_IDENTITY on every op but dense) */
  uint32_t op;         /* enum nna_op (version 3; version 2's reserved field: 0, dense) */
  nna_region region[NNA_KIND_COUNT];
} nna_layer;

/* The op parameter table (version 3): one entry per layer at nna_header.ops_offset, right after
 * the layer table; present when a layer's op is not dense (else ops_offset is 0). */
typedef struct nna_op_param {
  double value;      /* layernorm, rmsnorm: eps; dropout: p; else 0 */
  uint32_t from;     /* residual: the layer whose output is added; embedding: its numeric columns; else 0 */
  uint32_t count;    /* embedding: its categorical columns (entries of the embedding column table); else 0 */
} nna_op_param;

/* The embedding column table (version 3, where layer 1 is an embedding): one entry per
 * categorical column, right after the op parameter table. An index of the column is a value of
 * x in [0, cardinality), exact in float32 (cardinality <= NNA_MAX_CARDINALITY). */
typedef struct nna_embed_col {
  uint32_t cardinality; /* rows of the column's table */
  uint32_t dim;         /* columns of the column's table: the embedding's width */
} nna_embed_col;
#define NNA_MAX_CARDINALITY 16777216u /* 2^24: every index is exact in float32 */

typedef struct nna_header {
  uint32_t magic;        /* NNA_MAGIC */
  uint32_t version;      /* NNA_VERSION */
  uint32_t dtype;        /* enum nna_dtype */
  uint32_t order;        /* enum nna_order */
  uint32_t optimizer;    /* enum nna_optimizer */
  uint32_t num_layers;   /* including the input layer */
  uint32_t num_kinds;    /* NNA_KIND_COUNT when written */
  uint32_t layer_size;   /* sizeof(nna_layer) when written */
  uint64_t batch;
  uint64_t samples;      /* rows of XDATA / YDATA; 0 when the arena holds no data set */
  uint64_t align;        /* every region starts at a multiple of this (power of two, NNA_MIN_ALIGN..NNA_MAX_ALIGN) */
  uint64_t header_bytes; /* header + layer table + padding: where the first region may start */
  uint64_t total_bytes;  /* size of the whole arena */
  uint64_t layers_offset;/* offset of the nna_layer table (== sizeof(nna_header)) */
  uint64_t extras_offset;/* offset of the kind table (right after the layer table); 0: no extras */
  uint32_t num_extras;   /* user regions in the kind table (<= NNA_MAX_EXTRAS) */
  uint32_t extra_size;   /* sizeof(nna_extra) when written; 0 when num_extras is 0 */
  uint64_t flags;        /* version 1's reserved[2]: NNA_FLAG_*; 0: every region has bytes of its own */
  uint64_t models;       /* version 1's reserved[3]: networks of this shape; 0 (older headers) means 1 */
  double act_param;      /* version 1's reserved[4]: the negative slope of the arena's leaky-relu
                            layers (PyTorch's default 0.01); 0 when it has none */
  uint64_t ops_offset;   /* version 3 (version 1's reserved[5]): offset of the op parameter table;
                            0: every layer is dense */
} nna_header;

/* flags bit 0: a compact plan. Regions that are never live at the same time share bytes, and an
 * SGD arena has no dw regions (the CUDA paths fold the update into the weight-gradient product;
 * the CPU keeps that product in a transient buffer; tf32x3, which needs dw, is refused). Which regions may share is decided by the phase table of a step and replayed
 * natively (csrc/train/aliasing.cc) before such a header is used. Shared regions hold scratch
 * between runs; gradient runs (Op::Grad) are refused. User regions (the kind table below) are
 * the user's data: they never share bytes with anything, compact or not. */
#define NNA_FLAG_COMPACT 1u
/* flags bits 8-11 and 12-15 (version 4): the region dtype of z and of d (layers 1..L). */
#define NNA_FLAG_Z_DTYPE_SHIFT 8u
#define NNA_FLAG_D_DTYPE_SHIFT 12u
#define NNA_FLAG_REGION_DTYPES 0xFF00u
#define NNA_FLAGS_KNOWN 0xFF01u /* NNA_FLAG_COMPACT | NNA_FLAG_REGION_DTYPES */

/* ---- The kind table: user regions (planLayout's `extra`) --------------------------------------
 *   [nna_extra x num_extras][nna_region x (sum of entries)]   at extras_offset, inside header_bytes
 * Extra i owns the nna_region entries [first, first + entries) of the array after the structs:
 *   NNA_EXTRA_PER_LAYER  one entry per layer (entries == num_layers); entry l has the count of
 *                        region `like` of layer l (elements of the dtype), or 0 where layer l has
 *                        none of this extra (count 0: offset 0, as for built-in kinds);
 *   NNA_EXTRA_BYTES      one entry (entries == 1): a global region of `count` raw bytes.
 * nn-arena's own training never reads or writes user regions: they are yours. */
enum nna_extra_rule { NNA_EXTRA_PER_LAYER = 1, NNA_EXTRA_BYTES = 2 };
/* The kinds a per-layer user region may be shaped like (its `like`), as bits 1u << kind. */
#define NNA_EXTRA_LIKE_KINDS ((1u << NNA_Z) | (1u << NNA_B) | (1u << NNA_W))

typedef struct nna_extra {
  char name[NNA_EXTRA_NAME_BYTES]; /* [A-Za-z_][A-Za-z0-9_]*, NUL-padded; not a built-in kind's name */
  uint32_t rule;                   /* enum nna_extra_rule */
  uint32_t like;                   /* NNA_EXTRA_PER_LAYER: NNA_Z, NNA_B or NNA_W; else 0 */
  uint32_t elem_bytes;             /* bytes per counted element: the dtype's size, or 1 (NNA_EXTRA_BYTES) */
  uint32_t entries;                /* nna_region entries it owns: num_layers, or 1 */
  uint32_t first;                  /* index of its first entry (the sum of the entries before it) */
  uint32_t reserved0;
  uint64_t reserved1;
} nna_extra;

/* Sizes are part of the format: a change here must change NNA_VERSION (and `npm run gen`). */
#if defined(__cplusplus)
static_assert(sizeof(nna_region) == 16, "nna_region size is part of the format");
static_assert(sizeof(nna_layer) == 24 + 16 * NNA_KIND_COUNT, "nna_layer size is part of the format");
static_assert(sizeof(nna_header) == 128, "nna_header size is part of the format");
static_assert(sizeof(nna_extra) == 64, "nna_extra size is part of the format");
static_assert(sizeof(nna_op_param) == 16, "nna_op_param size is part of the format");
static_assert(NNA_FLAGS_KNOWN == (NNA_FLAG_COMPACT | NNA_FLAG_REGION_DTYPES), "every flag bit is known");
static_assert(sizeof(nna_embed_col) == 8, "nna_embed_col size is part of the format");
#else
_Static_assert(sizeof(nna_region) == 16, "nna_region size is part of the format");
_Static_assert(sizeof(nna_layer) == 24 + 16 * NNA_KIND_COUNT, "nna_layer size is part of the format");
_Static_assert(sizeof(nna_header) == 128, "nna_header size is part of the format");
_Static_assert(sizeof(nna_extra) == 64, "nna_extra size is part of the format");
_Static_assert(sizeof(nna_op_param) == 16, "nna_op_param size is part of the format");
_Static_assert(sizeof(nna_embed_col) == 8, "nna_embed_col size is part of the format");
#endif

/* ---- Binding: from a base address alone, on host or device --------------------------------- */

NNA_HD const nna_header* nna_header_of(const void* base) { return (const nna_header*)base; }

NNA_HD const nna_layer* nna_layer_of(const void* base, uint32_t l) {
  const nna_header* h = (const nna_header*)base;
  return (const nna_layer*)((const char*)base + h->layers_offset) + l;
}

/* Pointer to region `kind` of layer `l`, or NULL where the layer has none. */
NNA_HD void* nna_region_ptr(void* base, uint32_t l, uint32_t kind) {
  const nna_region r = nna_layer_of(base, l)->region[kind];
  return r.count ? (void*)((char*)base + r.offset) : (void*)0;
}

/* Layer l's entry of the op parameter table, or NULL where the header has none (every layer dense). */
NNA_HD const nna_op_param* nna_op_param_of(const void* base, uint32_t l) {
  const nna_header* h = (const nna_header*)base;
  return h->version >= 3u && h->ops_offset ? (const nna_op_param*)((const char*)base + h->ops_offset) + l : (const nna_op_param*)0;
}

/* The embedding column table (nna_op_param_of(base, 1)->count entries), or NULL where layer 1 is
 * not an embedding. */
NNA_HD const nna_embed_col* nna_embed_cols_of(const void* base) {
  const nna_header* h = (const nna_header*)base;
  const nna_op_param* q = nna_op_param_of(base, 0);
  if (!q || nna_layer_of(base, 1)->op != NNA_OP_EMBEDDING) return (const nna_embed_col*)0;
  return (const nna_embed_col*)(q + h->num_layers);
}

/* ---- User regions, by name or index (the header must have passed nn-arena's validation, as
 * every arena's has) ------------------------------------------------------------------------ */

/* Number of user regions (0 for a version-1 header). */
NNA_HD uint32_t nna_extra_count(const void* base) {
  const nna_header* h = (const nna_header*)base;
  return h->version >= 2u ? h->num_extras : 0u;
}

/* Kind-table entry i, or NULL when i >= nna_extra_count(base). */
NNA_HD const nna_extra* nna_extra_at(const void* base, uint32_t i) {
  const nna_header* h = (const nna_header*)base;
  return i < nna_extra_count(base) ? (const nna_extra*)((const char*)base + h->extras_offset) + i : (const nna_extra*)0;
}

/* Name of user region i (NUL-terminated), or NULL. */
NNA_HD const char* nna_extra_name(const void* base, uint32_t i) {
  const nna_extra* e = nna_extra_at(base, i);
  return e ? e->name : (const char*)0;
}

/* Index of the user region called `name`, or -1. */
NNA_HD int32_t nna_extra_find(const void* base, const char* name) {
  const uint32_t n = nna_extra_count(base);
  for (uint32_t i = 0; i < n; ++i) {
    const char* a = nna_extra_at(base, i)->name;
    uint32_t c = 0;
    while (c < NNA_EXTRA_NAME_BYTES && a[c] == name[c] && a[c] != 0) ++c;
    if (c < NNA_EXTRA_NAME_BYTES && a[c] == name[c]) return (int32_t)i;
  }
  return -1;
}

/* Region entry of user region i in layer l (a global region: its one entry, whatever l is), or
 * NULL when i or l is out of range. */
NNA_HD const nna_region* nna_extra_region(const void* base, uint32_t i, uint32_t l) {
  const nna_header* h = (const nna_header*)base;
  const nna_extra* e = nna_extra_at(base, i);
  if (!e) return (const nna_region*)0;
  if (e->rule == NNA_EXTRA_BYTES) l = 0;
  else if (l >= h->num_layers) return (const nna_region*)0;
  const nna_region* table = (const nna_region*)((const char*)base + h->extras_offset + (uint64_t)h->num_extras * sizeof(nna_extra));
  return table + e->first + l;
}

/* Pointer to user region i of layer l (global regions: l is ignored), or NULL where there is none. */
NNA_HD void* nna_extra_ptr(void* base, uint32_t i, uint32_t l) {
  const nna_region* r = nna_extra_region(base, i, l);
  return r && r->count ? (void*)((char*)base + r->offset) : (void*)0;
}

/* Count of user region i of layer l: elements of the dtype (NNA_EXTRA_PER_LAYER) or bytes
 * (NNA_EXTRA_BYTES); 0 where there is none. */
NNA_HD uint64_t nna_extra_elems(const void* base, uint32_t i, uint32_t l) {
  const nna_region* r = nna_extra_region(base, i, l);
  return r ? r->count : 0u;
}

/* ---- K models in one arena ------------------------------------------------------------------ */

NNA_HD uint64_t nna_models(const nna_header* h) { return h->models ? h->models : 1; }

/* Whether region `kind` of layer `l` has one copy per model (else one, shared by all models). */
NNA_HD int nna_kind_per_model(const nna_header* h, uint32_t l, uint32_t kind) {
  (void)h;
  return !(kind == NNA_XDATA || kind == NNA_YDATA || kind == NNA_Y || (kind == NNA_Z && l == 0));
}

/* Bytes from one model's copy of a region to the next: its size rounded up to the alignment
 * (0 for shared regions and single-model arenas). */
/* Region `kind` of layer l's region dtype (an nna_region_dtype code): z and d of layers 1..L by the
 * flags, every other region NNA_REGION_BASE. */
NNA_HD uint32_t nna_region_dtype_of(const nna_header* h, uint32_t l, uint32_t kind) {
  if (l == 0 || (kind != NNA_Z && kind != NNA_D)) return NNA_REGION_BASE;
  return (uint32_t)(h->flags >> (kind == NNA_Z ? NNA_FLAG_Z_DTYPE_SHIFT : NNA_FLAG_D_DTYPE_SHIFT)) & 0xFu;
}

/* Bytes of one element of region `kind` of layer l. */
NNA_HD uint32_t nna_elem_bytes(const nna_header* h, uint32_t l, uint32_t kind) {
  if (nna_region_dtype_of(h, l, kind) != NNA_REGION_BASE) return 2u;
  return h->dtype == NNA_FLOAT64 ? 8u : 4u;
}

NNA_HD uint64_t nna_region_stride(const nna_header* h, uint32_t l, uint64_t count, uint32_t kind) {
  if (nna_models(h) <= 1 || !nna_kind_per_model(h, l, kind)) return 0;
  const uint64_t bytes = count * nna_elem_bytes(h, l, kind);
  return (bytes + h->align - 1) / h->align * h->align;
}

/* Model m's copy of region `kind` of layer `l` (the shared copy for shared kinds), or NULL
 * where the layer has none. m < nna_models(); model 0's copy is nna_region_ptr's. */
NNA_HD void* nna_model_ptr(void* base, uint32_t l, uint32_t kind, uint64_t m) {
  const nna_region r = nna_layer_of(base, l)->region[kind];
  if (!r.count) return (void*)0;
  return (void*)((char*)base + r.offset + m * nna_region_stride(nna_header_of(base), l, r.count, kind));
}

#if defined(__cplusplus)
/* Typed pointers of one layer, the C++ analogue of the seed design's re-binding function. */
template <typename T>
struct nna_bound_layer {
  T *z, *b, *w, *d, *db, *dw, *mw, *mb, *vw, *vb, *y, *xdata, *ydata, *stats;
  T* pre;  /* the pre-activations (second half of z) where nna_act_keeps_pre(activation), else NULL */
  uint64_t units, fan_in;
  uint32_t activation;
  double act_param; /* the header's act_param (leaky-relu's slope) */
  uint32_t op;      /* enum nna_op */
  uint32_t from;    /* residual: the layer whose output is added; embedding: its numeric columns */
  double op_value;  /* the op's eps or p (nna_op_param.value) */
  uint32_t cols_count;          /* embedding: its categorical columns; else 0 */
  const nna_embed_col* cols;    /* embedding: the embedding column table; else NULL */
  uint64_t w_count, b_count; /* elements of w (and dw, mw, vw) and of b (and db, mb, vb); 0: none */
};

template <typename T>
#if defined(__CUDACC__)
__host__ __device__ __forceinline__
#else
inline
#endif
nna_bound_layer<T> nna_bind(void* base, uint32_t l) {
  const nna_layer* L = nna_layer_of(base, l);
  T* p[NNA_KIND_COUNT];
  for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k)
    p[k] = L->region[k].count ? (T*)((char*)base + L->region[k].offset) : (T*)0;
  nna_bound_layer<T> r;
  r.z = p[NNA_Z]; r.b = p[NNA_B]; r.w = p[NNA_W]; r.d = p[NNA_D]; r.db = p[NNA_DB];
  r.dw = p[NNA_DW]; r.mw = p[NNA_MW]; r.mb = p[NNA_MB]; r.vw = p[NNA_VW]; r.vb = p[NNA_VB];
  r.y = p[NNA_Y]; r.xdata = p[NNA_XDATA]; r.ydata = p[NNA_YDATA]; r.stats = p[NNA_STATS];
  r.units = L->units; r.fan_in = L->fan_in; r.activation = L->activation;
  r.pre = r.z && nna_act_keeps_pre(L->activation) ? r.z + nna_header_of(base)->batch * L->units : (T*)0;
  r.act_param = nna_header_of(base)->act_param;
  r.op = L->op;
  const nna_op_param* q = nna_op_param_of(base, l);
  r.from = q ? q->from : 0u;
  r.op_value = q ? q->value : 0.0;
  r.cols_count = q && L->op == NNA_OP_EMBEDDING ? q->count : 0u;
  r.cols = r.cols_count ? nna_embed_cols_of(base) : (const nna_embed_col*)0;
  r.w_count = L->region[NNA_W].count;
  r.b_count = L->region[NNA_B].count;
  return r;
}

/* Model m's pointers of layer l (shared regions: the one copy). nna_bind is model 0's. */
template <typename T>
#if defined(__CUDACC__)
__host__ __device__ __forceinline__
#else
inline
#endif
nna_bound_layer<T> nna_bind_model(void* base, uint32_t l, uint64_t m) {
  nna_bound_layer<T> r = nna_bind<T>(base, l);
  if (m == 0) return r;
  const nna_header* h = nna_header_of(base);
  const nna_layer* L = nna_layer_of(base, l);
  T** p[NNA_KIND_COUNT] = {&r.z, &r.b, &r.w, &r.d, &r.db, &r.dw, &r.mw, &r.mb, &r.vw, &r.vb, &r.y, &r.xdata, &r.ydata, &r.stats};
  for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k)
    if (*p[k]) *p[k] = (T*)((char*)*p[k] + m * nna_region_stride(h, l, L->region[k].count, k));
  if (r.pre) r.pre = r.z + h->batch * L->units;
  return r;
}
#endif

#endif /* NN_ARENA_H */
