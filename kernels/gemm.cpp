#include <executorch/kernels/gemm.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <executorch/extension/threadpool/threadpool.h>

namespace executorch {
namespace kernels {
namespace {

constexpr int64_t kMR = 6;    // rows of C per micro-tile
constexpr int64_t kNR = 16;   // columns of C per micro-tile
constexpr int64_t kKC = 256;  // depth of a packed block
constexpr int64_t kMC = 96;   // rows of A per packed block (multiple of kMR)

// C[mr x nr] (+)= alpha * acc: a micro-tile's sums written out.
inline void store_tile(const float (&acc)[kMR][kNR], float* __restrict__ c, int64_t ldc, int64_t mr, int64_t nr,
                       float alpha, bool accumulate) {
  for (int64_t i = 0; i < mr; ++i) {
    float* ci = c + i * ldc;
    if (accumulate) {
      for (int64_t j = 0; j < nr; ++j) ci[j] += alpha * acc[i][j];
    } else {
      for (int64_t j = 0; j < nr; ++j) ci[j] = alpha * acc[i][j];
    }
  }
}

// sums[i][h] = the sum over p, in order, of ap[p * kMR + i] times the vector V at (h ? b1p : b0p) +
// p * ldb: six rows of A by two vectors of B, twelve accumulators. Inlined into each caller, whose
// target (the AVX2 clone, or AVX-512) sets V's instructions.
template <typename V>
__attribute__((always_inline)) inline void six_by_two(int64_t kc, const float* __restrict__ ap,
                                                      const float* __restrict__ b0p, const float* __restrict__ b1p,
                                                      int64_t ldb, V (&sums)[kMR][2]) {
  V c00 = {}, c01 = {}, c10 = {}, c11 = {}, c20 = {}, c21 = {}, c30 = {}, c31 = {}, c40 = {}, c41 = {}, c50 = {},
    c51 = {};
  for (int64_t p = 0; p < kc; ++p, ap += kMR, b0p += ldb, b1p += ldb) {
    // B read in place has rows a weight's width apart, a stride the hardware prefetchers miss.
    __builtin_prefetch(b0p + 8 * ldb);
    __builtin_prefetch(b1p + 8 * ldb);
    V b0, b1;  // unaligned loads
    std::memcpy(&b0, b0p, sizeof(b0));
    std::memcpy(&b1, b1p, sizeof(b1));
    c00 += ap[0] * b0, c01 += ap[0] * b1;
    c10 += ap[1] * b0, c11 += ap[1] * b1;
    c20 += ap[2] * b0, c21 += ap[2] * b1;
    c30 += ap[3] * b0, c31 += ap[3] * b1;
    c40 += ap[4] * b0, c41 += ap[4] * b1;
    c50 += ap[5] * b0, c51 += ap[5] * b1;
  }
  sums[0][0] = c00, sums[0][1] = c01, sums[1][0] = c10, sums[1][1] = c11, sums[2][0] = c20, sums[2][1] = c21;
  sums[3][0] = c30, sums[3][1] = c31, sums[4][0] = c40, sums[4][1] = c41, sums[5][0] = c50, sums[5][1] = c51;
}

// C[mr x nr] (+)= alpha * a_panel (kc x kMR, packed by k) * b_panel (kc x kNR): a 6 x 16 tile held in
// twelve vector accumulators.
EXECUTORCH_VECTOR_CLONES
void micro_kernel(int64_t kc, const float* __restrict__ ap, const float* __restrict__ bp, int64_t ldb,
                  float* __restrict__ c, int64_t ldc, int64_t mr, int64_t nr, float alpha, bool accumulate) {
  static_assert(kMR == 6 && kNR == 16, "the tile below is written out for 6 x 16");
  v8f rows[kMR][2];
  six_by_two(kc, ap, bp, bp + 8, ldb, rows);
  alignas(32) float acc[kMR][kNR];
  std::memcpy(acc, rows, sizeof(acc));
  store_tile(acc, c, ldc, mr, nr, alpha, accumulate);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// The same tile on AVX-512: a row of 16 columns is one vector, six accumulators, half the instructions
// of the AVX2 form; each element sums its products in the same order.
typedef float v16f __attribute__((vector_size(64)));

__attribute__((target("arch=x86-64-v4"))) void micro_kernel_512(int64_t kc, const float* __restrict__ ap,
                                                                const float* __restrict__ bp, int64_t ldb,
                                                                float* __restrict__ c, int64_t ldc, int64_t mr,
                                                                int64_t nr, float alpha, bool accumulate) {
  v16f c0 = {}, c1 = {}, c2 = {}, c3 = {}, c4 = {}, c5 = {};
  for (int64_t p = 0; p < kc; ++p, ap += kMR, bp += ldb) {
    v16f b;  // an unaligned load
    std::memcpy(&b, bp, sizeof(b));
    c0 += ap[0] * b, c1 += ap[1] * b, c2 += ap[2] * b, c3 += ap[3] * b, c4 += ap[4] * b, c5 += ap[5] * b;
  }
  alignas(64) float acc[kMR][kNR];
  const v16f rows[kMR] = {c0, c1, c2, c3, c4, c5};
  std::memcpy(acc, rows, sizeof(acc));
  store_tile(acc, c, ldc, mr, nr, alpha, accumulate);
}

// Two whole 16-column panels side by side (b0 and b1, both ldb apart by row): a 6 x 32 tile in
// twelve accumulators, enough independent sums to cover the FMA latency that six leave waiting, and
// two B loads per six broadcasts of A. Each element sums its products in the same order as above.
__attribute__((target("arch=x86-64-v4"))) void micro_kernel_512_pair(int64_t kc, const float* __restrict__ ap,
                                                                     const float* __restrict__ b0p,
                                                                     const float* __restrict__ b1p, int64_t ldb,
                                                                     float* __restrict__ c, int64_t ldc, int64_t mr,
                                                                     float alpha, bool accumulate) {
  v16f rows[kMR][2];
  six_by_two(kc, ap, b0p, b1p, ldb, rows);
  alignas(64) float acc[2][kMR][kNR];
  for (int64_t i = 0; i < kMR; ++i) {
    for (int h = 0; h < 2; ++h) std::memcpy(acc[h][i], &rows[i][h], sizeof(rows[i][h]));
  }
  store_tile(acc[0], c, ldc, mr, kNR, alpha, accumulate);
  store_tile(acc[1], c + kNR, ldc, mr, kNR, alpha, accumulate);
}
#endif

// Whether this CPU runs the AVX-512 tiles.
bool has_avx512() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  return avx512;
#else
  return false;
#endif
}

// micro_kernel_512 where the CPU has AVX-512, else micro_kernel (its own AVX2 or baseline clone).
void tile(int64_t kc, const float* ap, const float* bp, int64_t ldb, float* c, int64_t ldc, int64_t mr, int64_t nr,
          float alpha, bool accumulate) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (has_avx512()) return micro_kernel_512(kc, ap, bp, ldb, c, ldc, mr, nr, alpha, accumulate);
#endif
  micro_kernel(kc, ap, bp, ldb, c, ldc, mr, nr, alpha, accumulate);
}

// Two whole panels (b0, b1) at once: micro_kernel_512_pair on AVX-512, else one tile() each.
void tile_pair(int64_t kc, const float* ap, const float* b0, const float* b1, int64_t ldb, float* c, int64_t ldc,
               int64_t mr, float alpha, bool accumulate) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (has_avx512()) return micro_kernel_512_pair(kc, ap, b0, b1, ldb, c, ldc, mr, alpha, accumulate);
#endif
  tile(kc, ap, b0, ldb, c, ldc, mr, kNR, alpha, accumulate);
  tile(kc, ap, b1, ldb, c + kNR, ldc, mr, kNR, alpha, accumulate);
}

// Up to this many rows of A, products with a B whose rows or columns are contiguous skip packing:
// B is streamed once (a decoding step's matrix-vector products, where packing B would cost as
// much as the product and a 6-row tile would compute mostly padding).
constexpr int64_t kStreamRows = 4;

// acc[i * width + j] += sum over p, in order, of rows[i * k + p] * b[p * b_rs + j], for m rows and
// columns [0, width) of B: four rows of B per pass over acc (four read streams, one update of acc in
// L1), eight columns per vector.
EXECUTORCH_VECTOR_CLONES
void scaled_rows(int64_t m, int64_t k, const float* __restrict__ rows, const float* __restrict__ b, int64_t b_rs,
                 int64_t width, float* __restrict__ acc) {
  const int64_t vectors = width / 8 * 8;
  int64_t p = 0;
  for (; p + 4 <= k; p += 4) {
    const float *b0 = b + p * b_rs, *b1 = b0 + b_rs, *b2 = b1 + b_rs, *b3 = b2 + b_rs;
    for (int64_t i = 0; i < m; ++i) {
      const float a0 = rows[i * k + p], a1 = rows[i * k + p + 1], a2 = rows[i * k + p + 2], a3 = rows[i * k + p + 3];
      float* ci = acc + i * width;
      for (int64_t j = 0; j < vectors; j += 8) {
        v8f c, w0, w1, w2, w3;
        std::memcpy(&c, ci + j, sizeof(c));
        std::memcpy(&w0, b0 + j, sizeof(w0));
        std::memcpy(&w1, b1 + j, sizeof(w1));
        std::memcpy(&w2, b2 + j, sizeof(w2));
        std::memcpy(&w3, b3 + j, sizeof(w3));
        c = (((c + a0 * w0) + a1 * w1) + a2 * w2) + a3 * w3;
        std::memcpy(ci + j, &c, sizeof(c));
      }
      for (int64_t j = vectors; j < width; ++j) ci[j] = (((ci[j] + a0 * b0[j]) + a1 * b1[j]) + a2 * b2[j]) + a3 * b3[j];
    }
  }
  for (; p < k; ++p) {
    const float* bp = b + p * b_rs;
    for (int64_t i = 0; i < m; ++i) {
      const float ai = rows[i * k + p];
      float* ci = acc + i * width;
      for (int64_t j = 0; j < width; ++j) ci[j] += ai * bp[j];
    }
  }
}

// C[m, n] += alpha * A B for m <= kStreamRows, B contiguous along k (b_rs == 1: dot products) or
// along n (b_cs == 1: rows of B scaled into a running sum).
void streamed(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
              int64_t b_rs, int64_t b_cs, float* c, int64_t ldc) {
  std::vector<float> packed(static_cast<size_t>(m * k));  // A's rows, contiguous
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) packed[static_cast<size_t>(i * k + p)] = a[i * a_rs + p * a_cs];
  }
  const float* rows = packed.data();
  const bool serial = m * n * k < 64 * 64 * 64;
  if (b_rs == 1) {
    auto columns = [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        const float* bj = b + j * b_cs;
        for (int64_t i = 0; i < m; ++i) c[i * ldc + j] += alpha * dot(rows + i * k, bj, k);
      }
    };
    if (serial) {
      columns(0, n);
    } else {
      extension::threadpool::parallel_for(0, n, 32, columns);
    }
    return;
  }
  // Blocks of columns whose sums for every row stay in L1 (kStreamRows x kBlock floats), each thread
  // taking whole blocks: a block reads runs of kBlock * 4 bytes from each row of B.
  constexpr int64_t kBlock = 1024;
  auto columns = [&](int64_t j0, int64_t j1) {
    float acc[kStreamRows * kBlock];
    for (int64_t jb = j0; jb < j1; jb += kBlock) {
      const int64_t nb = std::min<int64_t>(kBlock, j1 - jb);
      std::fill(acc, acc + m * nb, 0.f);
      scaled_rows(m, k, rows, b + jb, b_rs, nb, acc);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < nb; ++j) c[i * ldc + jb + j] += alpha * acc[i * nb + j];
      }
    }
  };
  const int64_t threads = static_cast<int64_t>(extension::threadpool::get_num_threads());
  if (serial || threads <= 1) {
    columns(0, n);
  } else {  // narrower blocks where n is too small to give every thread a wide one
    const int64_t grain = std::clamp<int64_t>((n + threads - 1) / threads + 7, 8, kBlock) / 8 * 8;
    extension::threadpool::parallel_for(0, n, grain, columns);
  }
}

}  // namespace

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
           int64_t b_rs, int64_t b_cs, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (beta != 1.f) {
    for (int64_t i = 0; i < m; ++i) {
      float* ci = c + i * ldc;
      if (beta == 0.f) {
        std::memset(ci, 0, sizeof(float) * n);
      } else {
        for (int64_t j = 0; j < n; ++j) ci[j] *= beta;
      }
    }
  }
  if (k <= 0) return;
  if (m <= kStreamRows && (b_rs == 1 || b_cs == 1)) {
    streamed(m, n, k, alpha, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc);
    return;
  }
  const int64_t n_panels = (n + kNR - 1) / kNR;
  const int64_t m_blocks = (m + kMC - 1) / kMC;
  // Work is split into (block of rows) x (group of column panels) tiles so that a GEMM with few rows
  // and many columns (a convolution: out channels x pixels) still uses every thread.
  const int64_t threads = static_cast<int64_t>(extension::threadpool::get_num_threads());
  const int64_t n_groups = std::min(n_panels, std::max<int64_t>(1, (threads * 4 + m_blocks - 1) / m_blocks));
  const int64_t panels_per_group = (n_panels + n_groups - 1) / n_groups;
  // Small products run on the calling thread: waking the pool costs more than they do.
  const bool serial = m * n * k < 64 * 64 * 64;
  // One or two blocks of rows of A (a prefill chunk of up to 192 rows) use each panel of B once or
  // twice: packing B would cost about as much as reading it in place, which rows of B contiguous
  // allow (a linear layer's weight). With more blocks, packed panels are reread faster.
  const bool in_place = m_blocks <= 2 && b_cs == 1;
  // Only the last, partial panel needs packing where B is read in place; panel jp's packed copy is
  // at bp + (jp - first_packed) * kNR * kc.
  const int64_t first_packed = in_place ? n / kNR : 0;
  thread_local std::vector<float> bpack;
  bpack.resize(static_cast<size_t>((n_panels - first_packed) * kNR * std::min(k, kKC)));
  float* bp = bpack.data();
  for (int64_t pc = 0; pc < k; pc += kKC) {
    const int64_t kc = std::min(kKC, k - pc);
    // Pack B[pc:pc+kc, :] into kc x kNR panels, zero-padded on the right.
    auto pack_b = [&](int64_t p0, int64_t p1) {
      for (int64_t jp = p0; jp < p1; ++jp) {
        float* dst = bp + (jp - first_packed) * kNR * kc;
        const int64_t j0 = jp * kNR, nr = std::min(kNR, n - j0);
        if (b_rs == 1 && b_cs != 1) {  // columns of B contiguous (a transposed weight): read them whole
          for (int64_t j = 0; j < kNR; ++j) {
            const float* src = j < nr ? b + pc + (j0 + j) * b_cs : nullptr;
            for (int64_t p = 0; p < kc; ++p) dst[p * kNR + j] = src ? src[p] : 0.f;
          }
          continue;
        }
        for (int64_t p = 0; p < kc; ++p) {
          const float* src = b + (pc + p) * b_rs + j0 * b_cs;
          float* row = dst + p * kNR;
          if (b_cs == 1) {
            std::memcpy(row, src, sizeof(float) * nr);
          } else {
            for (int64_t j = 0; j < nr; ++j) row[j] = src[j * b_cs];
          }
          for (int64_t j = nr; j < kNR; ++j) row[j] = 0.f;
        }
      }
    };
    auto tiles = [&](int64_t t0, int64_t t1) {
      thread_local std::vector<float> apack;
      apack.resize(static_cast<size_t>(kMC * kc));
      int64_t packed_block = -1;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t ib = t / n_groups, group = t % n_groups;
        const int64_t i0 = ib * kMC, mc = std::min(kMC, m - i0);
        if (packed_block != ib) {
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            float* dst = apack.data() + ir * kc;
            const int64_t mr = std::min(kMR, mc - ir);
            for (int64_t p = 0; p < kc; ++p) {
              for (int64_t i = 0; i < kMR; ++i) {
                dst[p * kMR + i] = i < mr ? a[(i0 + ir + i) * a_rs + (pc + p) * a_cs] : 0.f;
              }
            }
          }
          packed_block = ib;
        }
        const int64_t jp_end = std::min(n_panels, (group + 1) * panels_per_group);
        for (int64_t jp = group * panels_per_group; jp < jp_end; ++jp) {
          const int64_t j0 = jp * kNR, nr = std::min(kNR, n - j0);
          // A whole panel of a B read in place: its rows, b_rs apart; otherwise the packed panel.
          const bool direct = in_place && nr == kNR;
          const float* panel = direct ? b + pc * b_rs + j0 : bp + (jp - first_packed) * kNR * kc;
          const int64_t ldb = direct ? b_rs : kNR;
          if (jp + 1 < jp_end && n - j0 >= 2 * kNR) {  // this panel and the next, both whole and alike
            const float* next = direct ? panel + kNR : panel + kNR * kc;
            for (int64_t ir = 0; ir < mc; ir += kMR) {
              tile_pair(kc, apack.data() + ir * kc, panel, next, ldb, c + (i0 + ir) * ldc + j0, ldc,
                        std::min(kMR, mc - ir), alpha, true);
            }
            ++jp;
            continue;
          }
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            tile(kc, apack.data() + ir * kc, panel, ldb, c + (i0 + ir) * ldc + j0, ldc, std::min(kMR, mc - ir), nr,
                 alpha, true);
          }
        }
      }
    };
    if (serial) {
      pack_b(first_packed, n_panels);
      tiles(0, m_blocks * n_groups);
    } else {
      if (first_packed < n_panels) extension::threadpool::parallel_for(first_packed, n_panels, 4, pack_b);
      extension::threadpool::parallel_for(0, m_blocks * n_groups, 1, tiles);
    }
  }
}

}  // namespace kernels
}  // namespace executorch
