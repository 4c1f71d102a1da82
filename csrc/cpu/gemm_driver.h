// gemm_driver.h: the blocked GEMM (BLIS loop order: NC columns of B, KC deep, MC rows of A,
// then NR x MR micro-tiles) written once over a kernel trait K and compiled per ISA: each
// gemm_<isa>.cc includes it after its `#pragma GCC target`, with its own K, so every
// instantiation has internal linkage and its ISA. Include only after <algorithm>, <cstdlib>,
// <cstring>, "gemm.h", "../core/thread_pool.h" and "../train/math.h" (not under the pragma).
//
// K provides: T, V (vector of L lanes), MR, NV (NR = NV * L), KC, MC, NC, and zero, load
// (aligned), loadu, storeu, set1, fma(a, b, c) = a * b + c, mul, fmaS (scalar a * b + c).

namespace nna {
namespace cpu {
namespace {

#include "act_float.h"  // GELU and SiLU in float (inside this namespace: per ISA)

template <class K> struct Driver {
  using T = typename K::T;
  using V = typename K::V;
  static constexpr size_t MR = K::MR, NV = K::NV, L = K::L, NR = K::NV * K::L;

  // acc = sum over p of a[p*MR + i] * b[p*NR + j]; then c = alpha * acc + beta * c on the first
  // K block (c not read when beta == 0), c = alpha * acc + c on later ones.
  static inline void micro(size_t kc, const T* __restrict a, const T* __restrict b, T* c, size_t ldc, T alpha, T beta, bool first) {
    V acc[MR][NV];
    // C's tile is read at the end; start bringing it in now (it is often in L3 only).
    for (size_t i = 0; i < MR; ++i) {
      __builtin_prefetch(c + i * ldc, 1, 3);
      __builtin_prefetch(c + i * ldc + NR - 1, 1, 3);
    }
#pragma GCC unroll 32
    for (size_t i = 0; i < MR; ++i)
#pragma GCC unroll 8
      for (size_t v = 0; v < NV; ++v) acc[i][v] = K::zero();
    for (size_t p = 0; p < kc; ++p) {
      V bv[NV];
#pragma GCC unroll 8
      for (size_t v = 0; v < NV; ++v) bv[v] = K::load(b + v * L);
#pragma GCC unroll 32
      for (size_t i = 0; i < MR; ++i) {
        const V av = K::set1(a[i]);
#pragma GCC unroll 8
        for (size_t v = 0; v < NV; ++v) acc[i][v] = K::fma(av, bv[v], acc[i][v]);
      }
      a += MR;
      b += NR;
    }
    const V va = K::set1(alpha);
    if (first && beta == T(0)) {
#pragma GCC unroll 32
      for (size_t i = 0; i < MR; ++i)
#pragma GCC unroll 8
        for (size_t v = 0; v < NV; ++v) K::storeu(c + i * ldc + v * L, K::mul(va, acc[i][v]));
    } else if (first) {
      const V vb = K::set1(beta);
#pragma GCC unroll 32
      for (size_t i = 0; i < MR; ++i)
#pragma GCC unroll 8
        for (size_t v = 0; v < NV; ++v) {
          T* p = c + i * ldc + v * L;
          K::storeu(p, K::fma(va, acc[i][v], K::mul(vb, K::loadu(p))));
        }
    } else {
#pragma GCC unroll 32
      for (size_t i = 0; i < MR; ++i)
#pragma GCC unroll 8
        for (size_t v = 0; v < NV; ++v) {
          T* p = c + i * ldc + v * L;
          K::storeu(p, K::fma(va, acc[i][v], K::loadu(p)));
        }
    }
  }

  // A partial tile at the matrix edge: the full kernel into a scratch tile, then the same
  // merge in scalar code (same rounding as the vector merge: one fused multiply-add).
  static void edge(size_t kc, const T* a, const T* b, T* c, size_t ldc, size_t mr, size_t nr, T alpha, T beta, bool first) {
    alignas(64) T tmp[MR * NR];
    micro(kc, a, b, tmp, NR, T(1), T(0), true);
    for (size_t i = 0; i < mr; ++i)
      for (size_t j = 0; j < nr; ++j) {
        T& out = c[i * ldc + j];
        const T acc = tmp[i * NR + j];
        if (first && beta == T(0))
          out = alpha * acc;
        else if (first)
          out = K::fmaS(alpha, acc, beta * out);
        else
          out = K::fmaS(alpha, acc, out);
      }
  }

  // The transposing packs read one row segment after another, each from other lines: ask for
  // the next one's lines while this one is copied (the hardware prefetcher does not follow).
  // Past the last row this only touches an address; prefetches never fault.
  static inline void prefetchRow(const T* p, size_t n) {
    for (size_t o = 0; o < n; o += 64 / sizeof(T)) __builtin_prefetch(p + o, 0, 3);
  }

  // op(A) rows [i0, i0+mc) x cols [p0, p0+kc) into MR-row micro-panels: dst[ir*kc + p*MR + i].
  static void packA(const Gemm<T>& g, size_t i0, size_t mc, size_t p0, size_t kc, T* dst) {
    for (size_t ir = 0; ir < mc; ir += MR) {
      const size_t mr = std::min(MR, mc - ir);
      T* d = dst + ir * kc;
      if (!g.transA) {
        size_t p16 = 0;
        if constexpr (K::kT16 && MR <= 16)
          for (; p16 + 16 <= kc; p16 += 16) K::transpose16(g.a + (i0 + ir) * g.lda + p0 + p16, g.lda, mr, d + p16 * MR, MR);
        for (size_t i = 0; i < mr; ++i) {
          const T* src = g.a + (i0 + ir + i) * g.lda + p0;
          if (p16 == 0) prefetchRow(src + g.lda, kc);
          for (size_t p = p16; p < kc; ++p) d[p * MR + i] = src[p];
        }
      } else {
        for (size_t p = 0; p < kc; ++p) {
          const T* src = g.a + (p0 + p) * g.lda + i0 + ir;
          for (size_t i = 0; i < mr; ++i) d[p * MR + i] = src[i];
        }
      }
      if (mr < MR)
        for (size_t p = 0; p < kc; ++p)
          for (size_t i = mr; i < MR; ++i) d[p * MR + i] = T(0);
    }
  }

  // op(B) rows [p0, p0+kc) x cols [j0, j0+nc) into NR-column micro-panels: dst[jr*kc + p*NR + j].
  static void packB(const Gemm<T>& g, size_t j0, size_t nc, size_t p0, size_t kc, T* dst) {
    for (size_t jr = 0; jr < nc; jr += NR) {
      const size_t nr = std::min(NR, nc - jr);
      T* d = dst + jr * kc;
      if (!g.transB) {
        for (size_t p = 0; p < kc; ++p) {
          const T* src = g.b + (p0 + p) * g.ldb + j0 + jr;
          T* o = d + p * NR;
          for (size_t j = 0; j < nr; ++j) o[j] = src[j];
          for (size_t j = nr; j < NR; ++j) o[j] = T(0);
        }
      } else {
        size_t p16 = 0;
        if constexpr (K::kT16 && NR % 16 == 0)
          if (nr == NR)
            for (; p16 + 16 <= kc; p16 += 16)
              for (size_t jb = 0; jb < NR; jb += 16) K::transpose16(g.b + (j0 + jr + jb) * g.ldb + p0 + p16, g.ldb, 16, d + p16 * NR + jb, NR);
        for (size_t j = 0; j < nr; ++j) {
          const T* src = g.b + (j0 + jr + j) * g.ldb + p0;
          if (p16 == 0) prefetchRow(src + g.ldb, kc);
          for (size_t p = p16; p < kc; ++p) d[p * NR + j] = src[p];
        }
        if (nr < NR)
          for (size_t p = 0; p < kc; ++p)
            for (size_t j = nr; j < NR; ++j) d[p * NR + j] = T(0);
      }
    }
  }

  // Precisions bf16 and fp16: a packed panel rounded in place to the half format, kept as float
  // (to nearest, ties to even, as the GPU's __float2bfloat16_rn / __float2half_rn copies; a NaN
  // stays a NaN). A product of two such values is exact in float, so the micro-kernels then
  // compute what the tensor cores do with fp32 accumulation; only the order of the sums
  // differs. One pass over a panel in L2.
  static void roundPanel(T* p, size_t n, Round how) {
    if constexpr (std::is_same_v<T, float>) {
      uint32_t* u = reinterpret_cast<uint32_t*>(p);
      if (how == Round::Bf16) {
#pragma omp simd
        for (size_t i = 0; i < n; ++i) {
          const uint32_t b = u[i];
          const uint32_t r = (b & 0x7fffffffu) > 0x7f800000u ? b | 0x00400000u : b + 0x7fffu + ((b >> 16) & 1u);
          u[i] = r & 0xffff0000u;
        }
      } else {  // IEEE binary16: 10 fraction bits, exponents down to -14, multiples of 2^-24 below
#pragma omp simd
        for (size_t i = 0; i < n; ++i) {
          const uint32_t b = u[i], a = b & 0x7fffffffu;
          // Below 2^-14: |x| + 0.5 has an ulp of 2^-24, so the float addition rounds |x| to a
          // multiple of it (to nearest even) and the subtraction is exact.
          float ax, small;
          std::memcpy(&ax, &a, 4);
          small = (ax + 0.5f) - 0.5f;
          uint32_t s;
          std::memcpy(&s, &small, 4);
          const uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
          const uint32_t r = a > 0x7f800000u    ? a | 0x00400000u  // NaN
                             : a >= 0x477ff000u ? 0x7f800000u      // from 65520 (the tie with 65536) up: infinite
                             : a >= 0x38800000u ? normal
                                                : s;
          u[i] = r | (b & 0x80000000u);
        }
      }
    }
  }

  // A tile's sum of squares: eight accumulators by column (they vectorise), then a fixed tree.
  // One compiled body (noinline) for the epilogue and squaresOf, so both give the same bits.
  __attribute__((noinline)) static double tileSquares(const T* c, size_t ldc, size_t mr, size_t nr) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < mr; ++i) {
      const T* r = c + i * ldc;
      size_t j = 0;
      for (; j + 8 <= nr; j += 8)
        for (size_t k = 0; k < 8; ++k) s[k] += double(r[j + k]) * double(r[j + k]);
      for (size_t k = 0; j < nr; ++j, ++k) s[k] += double(r[j]) * double(r[j]);
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  }

  // Every micro-tile's squares from memory, added in slot order (Epilogue::squares).
  static double squaresOf(const T* c, size_t rows, size_t cols) {
    double total = 0;
    for (size_t i = 0; i < rows; i += MR)
      for (size_t j = 0; j < cols; j += NR) total += tileSquares(c + i * cols + j, cols, std::min(MR, rows - i), std::min(NR, cols - j));
    return total;
  }

  // The finished tile at rows [i0, i0+mr), columns [j0, j0+nr) of C.
  static void epilogue(const Gemm<T>& g, size_t i0, size_t j0, size_t mr, size_t nr) {
    const Epilogue<T>& e = g.ep;
    if (e.kind == Epi::Squares) {
      e.squares[(i0 / MR) * ((g.n + NR - 1) / NR) + j0 / NR] = tileSquares(g.c + i0 * g.ldc + j0, g.ldc, mr, nr);
      return;
    }
    for (size_t i = 0; i < mr; ++i) {
      T* c = g.c + (i0 + i) * g.ldc + j0;
      if (e.kind == Epi::BiasAct) {
        const T* b = e.bias + j0;
        if (e.pre) {  // an activation whose f' needs x: keep it beside z (activations.h)
          T* x = e.pre + (i0 + i) * g.ldc + j0;
          if (std::is_same_v<T, float> && e.act == NNA_ACT_GELU) {
            for (size_t j = 0; j < nr; ++j) {
              x[j] = c[j] + b[j];
              c[j] = T(geluF(float(x[j])));
            }
          } else if (std::is_same_v<T, float> && e.act == NNA_ACT_SILU) {
            for (size_t j = 0; j < nr; ++j) {
              x[j] = c[j] + b[j];
              c[j] = T(siluF(float(x[j])));
            }
          } else {
            for (size_t j = 0; j < nr; ++j) {
              x[j] = c[j] + b[j];
              c[j] = activate<T>(e.act, x[j], e.param);
            }
          }
        } else if (e.act == NNA_ACT_RELU) {
          for (size_t j = 0; j < nr; ++j) {
            const T x = c[j] + b[j];
            c[j] = x > T(0) ? x : T(0);
          }
        } else if (e.act == NNA_ACT_IDENTITY || e.act == NNA_ACT_SOFTMAX) {
          for (size_t j = 0; j < nr; ++j) c[j] += b[j];
        } else {
          for (size_t j = 0; j < nr; ++j) c[j] = activate<T>(e.act, c[j] + b[j], e.param);
        }
      } else if (e.kind == Epi::ActGrad) {
        const T* z = e.z + (i0 + i) * e.ldz + j0;
        if (e.act == NNA_ACT_RELU)
          for (size_t j = 0; j < nr; ++j) c[j] *= z[j] > T(0) ? T(1) : T(0);
        else if (std::is_same_v<T, float> && e.act == NNA_ACT_GELU)
          for (size_t j = 0; j < nr; ++j) c[j] *= T(geluGradF(float(z[j])));
        else if (std::is_same_v<T, float> && e.act == NNA_ACT_SILU)
          for (size_t j = 0; j < nr; ++j) c[j] *= T(siluGradF(float(z[j])));
        else
          for (size_t j = 0; j < nr; ++j) c[j] *= activationGrad<T>(e.act, z[j], e.param);
      } else if (e.kind == Epi::Update) {
        const size_t off = (i0 + i) * g.ldc + j0;
        update(e, e.w + off, e.m ? e.m + off : nullptr, e.v ? e.v + off : nullptr, c, nr);
      }
    }
  }

  // A vector of L lanes as a number: the optimizers' element updates (optimizers.h) run on it as
  // written, so each lane takes the operations, in the order, that one T takes (no vector copy).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // always inlined (NNA_ELEM): no call passes a vector
  struct Lanes {
    V v;
    Lanes(V x) : v(x) {}           // NOLINT: implicit, as T's arithmetic
    Lanes(T x) : v(K::set1(x)) {}  // NOLINT
    friend Lanes operator+(Lanes a, Lanes b) { return K::add(a.v, b.v); }
    friend Lanes operator-(Lanes a, Lanes b) { return K::sub(a.v, b.v); }
    friend Lanes operator*(Lanes a, Lanes b) { return K::mul(a.v, b.v); }
    friend Lanes operator/(Lanes a, Lanes b) { return K::div(a.v, b.v); }
    friend Lanes nsqrt(Lanes a) { return K::sqrt(a.v); }
  };
#pragma GCC diagnostic pop

  // The optimizer step of n parameters from their gradients g: the descriptor's element update
  // on vectors, then on the tail one T at a time (updateParam): the same bits either way.
  static void update(const Epilogue<T>& e, T* __restrict w, T* __restrict m, T* __restrict v, const T* __restrict g, size_t n) {
    const Hyper<T>& h = e.h;
    size_t j = 0;
    withOptimizer(e.optimizer, [&](auto d) {
      using D = decltype(d);
      constexpr bool hasM = (D::states >> NNA_MW) & 1u, hasV = (D::states >> NNA_VW) & 1u;
      for (; j + L <= n; j += L) {
        Lanes wj = K::loadu(w + j), mj = hasM ? K::loadu(m + j) : K::zero(), vj = hasV ? K::loadu(v + j) : K::zero();
        D::step(wj, Lanes(K::loadu(g + j)), mj, vj, h);
        K::storeu(w + j, wj.v);
        if constexpr (hasM) K::storeu(m + j, mj.v);
        if constexpr (hasV) K::storeu(v + j, vj.v);
      }
    });
    for (; j < n; ++j) updateParam<T>(e.optimizer, w + j, g[j], m ? m + j : nullptr, v ? v + j : nullptr, h);
  }

  // update() over a whole rows x cols matrix in the epilogue's pieces: each row in tiles of NR
  // columns from column 0 (the micro-tiles of a product are NR-aligned: bands and NC blocks
  // are whole tiles), so every element takes the same vector or scalar code as in a product.
  static void updateMatrix(const Epilogue<T>& e, const T* g, size_t rows, size_t cols) {
    auto rowsIn = [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i)
        for (size_t j = 0; j < cols; j += NR) {
          const size_t off = i * cols + j;
          update(e, e.w + off, e.m ? e.m + off : nullptr, e.v ? e.v + off : nullptr, g + off, std::min(NR, cols - j));
        }
    };
    // A thread per 4k parameters: an Adam-like update of that many elements costs about what a
    // thread's wake-up costs; a clipping step's updates (after the norm, outside the GEMM) of the S
    // network's 100k weights then take every core of a 16-core host.
    const size_t t = std::min<size_t>({poolThreads(), rows, std::max<size_t>(rows * cols / 4096, 1)});
    if (t <= 1) {
      rowsIn(0, rows);
      return;
    }
    parallel(unsigned(t), [&](unsigned k) { rowsIn(rows * k / t, rows * (k + 1) / t); });
  }

  struct Buffers {
    T* a = nullptr;
    T* b = nullptr;
    Buffers() {
      a = static_cast<T*>(std::aligned_alloc(64, sizeof(T) * K::MC * K::KC));
      b = static_cast<T*>(std::aligned_alloc(64, sizeof(T) * (K::NC + NR) * K::KC));
    }
    ~Buffers() {
      std::free(a);
      std::free(b);
    }
  };

  // C rows [i0, i1) x columns [j0, j1), all of K, on the calling thread.
  static void block(const Gemm<T>& g, size_t i0, size_t i1, size_t j0, size_t j1) {
    static thread_local Buffers buf;
    for (size_t jc = j0; jc < j1; jc += K::NC) {
      const size_t nc = std::min<size_t>(K::NC, j1 - jc);
      for (size_t pc = 0; pc == 0 || pc < g.k; pc += K::KC) {
        const size_t kc = std::min<size_t>(K::KC, g.k - pc);
        const bool first = pc == 0, last = pc + kc >= g.k;
        packB(g, jc, nc, pc, kc, buf.b);
        if (g.round != Round::None) roundPanel(buf.b, ((nc + NR - 1) / NR) * NR * kc, g.round);
        for (size_t ic = i0; ic < i1; ic += K::MC) {
          const size_t mc = std::min<size_t>(K::MC, i1 - ic);
          packA(g, ic, mc, pc, kc, buf.a);
          if (g.round != Round::None) roundPanel(buf.a, ((mc + MR - 1) / MR) * MR * kc, g.round);
          for (size_t jr = 0; jr < nc; jr += NR) {
            const size_t nr = std::min(NR, nc - jr);
            for (size_t ir = 0; ir < mc; ir += MR) {
              const size_t mr = std::min(MR, mc - ir);
              T* c = g.c + (ic + ir) * g.ldc + jc + jr;
              if (mr == MR && nr == NR)
                micro(kc, buf.a + ir * kc, buf.b + jr * kc, c, g.ldc, g.alpha, g.beta, first);
              else
                edge(kc, buf.a + ir * kc, buf.b + jr * kc, c, g.ldc, mr, nr, g.alpha, g.beta, first);
              if (last && g.ep.kind != Epi::None) epilogue(g, ic + ir, jc + jr, mr, nr);
            }
          }
        }
        if (g.k == 0) break;
      }
    }
  }

  // Splits C into bands of whole micro-tiles. Every band packs all of the operand it shares
  // with the others, so the split is across the larger operand's panels (columns of C when A is
  // the smaller one) and into more bands than threads (up to four per thread, so a thread slowed
  // by another process is made up for by the others) only while that repacking stays under ~2%
  // of the work. Each band runs all of K in the same block order: the split never changes a result.
  static void run(const Gemm<T>& g, unsigned threads) {
    if (g.m == 0 || g.n == 0) return;
    const unsigned pool = poolThreads();
    const size_t t = threads == 0 ? pool : std::min(threads, pool);
    const double macs = double(g.m) * double(g.n) * double(g.k);
    const size_t pn = (g.n + NR - 1) / NR, pm = (g.m + MR - 1) / MR;
    const bool byCols = g.m <= g.n ? pn >= t || pn >= pm : pm < t && pn > pm;
    const size_t panels = byCols ? pn : pm;
    const double repack = double(g.k) * double(byCols ? g.m : g.n);
    size_t tasks = std::min(panels, t);
    while (tasks < 4 * t && tasks * 2 <= panels && repack * double(tasks * 2) * 50 <= macs) tasks *= 2;
    // Under ~1M multiply-adds a product costs more to hand over than it saves.
    if (macs < 1048576.0) tasks = 1;
    if (tasks <= 1) {
      block(g, 0, g.m, 0, g.n);
      return;
    }
    parallel(unsigned(tasks), [&](unsigned i) {
      const size_t p0 = panels * i / tasks, p1 = panels * (i + 1) / tasks;
      if (byCols)
        block(g, 0, g.m, p0 * NR, std::min(g.n, p1 * NR));
      else
        block(g, p0 * MR, std::min(g.m, p1 * MR), 0, g.n);
    });
  }
};

}  // namespace
}  // namespace cpu
}  // namespace nna
