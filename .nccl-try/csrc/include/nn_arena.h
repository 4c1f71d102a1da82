/*
 * nn_arena.h: the header at offset 0 of every nn-arena buffer.
 *
 * Public and self-contained (C99 / C++ / CUDA). A native module of your own can include it,
 * take an arena's base address (host or device, see Arena.hostAddress / deviceAddress) and bind
 * every region of every layer from that address alone: no other pointer is ever passed.
 *
 * The TypeScript encoder (src/layout/header.ts) writes exactly these bytes. Both sides are
 * checked against each other by test/header-drift.test.ts (sizeof/offsetof from the addon vs the
 * TS constants) and by a round trip through the native decoder.
 *
 * Layout of an arena:
 *   [nna_header][nna_layer x num_layers][padding to align]  <- header_bytes
 *   regions at the offsets recorded in each nna_layer.region[kind]
 * All offsets are bytes from the arena base; all counts are elements of the arena's dtype.
 * Every multi-byte field is little-endian (the magic reads wrong on a big-endian host).
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
#define NNA_VERSION 1u
#define NNA_MAX_LAYERS 4096u

/* Element type of every region. */
enum nna_dtype { NNA_FLOAT32 = 1, NNA_FLOAT64 = 2 };

/* layer-major: each layer's regions are one contiguous range (one prefetch per layer).
 * kind-major: all regions of one kind are one range (all weights in one transfer). */
enum nna_order { NNA_LAYER_MAJOR = 0, NNA_KIND_MAJOR = 1 };

enum nna_optimizer { NNA_SGD = 0, NNA_MOMENTUM = 1, NNA_ADAM = 2 };

/* Per-layer activation; the input layer has NNA_ACT_INPUT. */
enum nna_activation {
  NNA_ACT_INPUT = 0,
  NNA_ACT_IDENTITY = 1,
  NNA_ACT_RELU = 2,
  NNA_ACT_SIGMOID = 3,
  NNA_ACT_TANH = 4,
  NNA_ACT_SOFTMAX = 5
};

/* Region kinds. The numeric order is the kind-major placement order. */
enum nna_kind {
  NNA_Z = 0,     /* outputs, batch x units (layer 0: the input batch)        */
  NNA_B = 1,     /* biases, units                                            */
  NNA_W = 2,     /* weights, units x fan_in (row-major: w[j * fan_in + i])   */
  NNA_D = 3,     /* errors dL/d(pre-activation), batch x units               */
  NNA_DB = 4,    /* bias gradients, units                                    */
  NNA_DW = 5,    /* weight gradients, units x fan_in                         */
  NNA_MW = 6,    /* optimizer state 1 for w (momentum velocity / Adam m)     */
  NNA_MB = 7,    /* optimizer state 1 for b                                  */
  NNA_VW = 8,    /* optimizer state 2 for w (Adam v)                         */
  NNA_VB = 9,    /* optimizer state 2 for b                                  */
  NNA_Y = 10,    /* targets of the batch, batch x units (output layer only)  */
  NNA_XDATA = 11,/* resident training inputs, samples x units (layer 0)      */
  NNA_YDATA = 12,/* resident training targets, samples x units (last layer)  */
  NNA_STATS = 13,/* NNA_STATS_COUNT accumulators (last layer), see nna_stat     */
  NNA_KIND_COUNT = 14
};

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
  uint32_t activation; /* enum nna_activation */
  uint32_t reserved;
  nna_region region[NNA_KIND_COUNT];
} nna_layer;

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
  uint64_t align;        /* every region starts at a multiple of this (power of two >= 8) */
  uint64_t header_bytes; /* header + layer table + padding: where the first region may start */
  uint64_t total_bytes;  /* size of the whole arena */
  uint64_t layers_offset;/* offset of the nna_layer table (== sizeof(nna_header)) */
  uint64_t reserved[6];
} nna_header;

/* Sizes are part of the format: a change here must change NNA_VERSION and the TS encoder. */
#if defined(__cplusplus)
static_assert(sizeof(nna_region) == 16, "nna_region size is part of the format");
static_assert(sizeof(nna_layer) == 24 + 16 * NNA_KIND_COUNT, "nna_layer size is part of the format");
static_assert(sizeof(nna_header) == 128, "nna_header size is part of the format");
#else
_Static_assert(sizeof(nna_region) == 16, "nna_region size is part of the format");
_Static_assert(sizeof(nna_layer) == 24 + 16 * NNA_KIND_COUNT, "nna_layer size is part of the format");
_Static_assert(sizeof(nna_header) == 128, "nna_header size is part of the format");
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

#if defined(__cplusplus)
/* Typed pointers of one layer, the C++ analogue of the seed design's re-binding function. */
template <typename T>
struct nna_bound_layer {
  T *z, *b, *w, *d, *db, *dw, *mw, *mb, *vw, *vb, *y, *xdata, *ydata, *stats;
  uint64_t units, fan_in;
  uint32_t activation;
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
  return r;
}
#endif

#endif /* NN_ARENA_H */
