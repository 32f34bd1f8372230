#include "kernels/gemm.h"

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

// acc[kMR][kNR] += a_panel (kc x kMR, column-major per k) * b_panel (kc x kNR). Written as plain
// loops over fixed sizes so the compiler keeps the tile in vector registers; cloned for AVX2+FMA
// with a run-time choice, so the same binary runs on any x86-64.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void micro_kernel(int64_t kc, const float* __restrict__ ap, const float* __restrict__ bp, float* __restrict__ c,
                  int64_t ldc, int64_t mr, int64_t nr, float alpha, bool accumulate) {
  float acc[kMR][kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* a = ap + p * kMR;
    const float* b = bp + p * kNR;
    for (int64_t i = 0; i < kMR; ++i) {
      const float ai = a[i];
      for (int64_t j = 0; j < kNR; ++j) acc[i][j] += ai * b[j];
    }
  }
  for (int64_t i = 0; i < mr; ++i) {
    float* ci = c + i * ldc;
    if (accumulate) {
      for (int64_t j = 0; j < nr; ++j) ci[j] += alpha * acc[i][j];
    } else {
      for (int64_t j = 0; j < nr; ++j) ci[j] = alpha * acc[i][j];
    }
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
  const int64_t n_panels = (n + kNR - 1) / kNR;
  std::vector<float> bpack(static_cast<size_t>(n_panels * kNR * std::min(k, kKC)));
  for (int64_t pc = 0; pc < k; pc += kKC) {
    const int64_t kc = std::min(kKC, k - pc);
    // Pack B[pc:pc+kc, :] into kc x kNR panels, zero-padded on the right.
    extension::threadpool::parallel_for(0, n_panels, 4, [&](int64_t p0, int64_t p1) {
      for (int64_t jp = p0; jp < p1; ++jp) {
        float* dst = bpack.data() + jp * kNR * kc;
        const int64_t j0 = jp * kNR, nr = std::min(kNR, n - j0);
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
    });
    // Each task packs its own block of A and sweeps every panel of B.
    const int64_t m_blocks = (m + kMC - 1) / kMC;
    extension::threadpool::parallel_for(0, m_blocks, 1, [&](int64_t b0, int64_t b1) {
      std::vector<float> apack(static_cast<size_t>(kMC * kc));
      for (int64_t ib = b0; ib < b1; ++ib) {
        const int64_t i0 = ib * kMC, mc = std::min(kMC, m - i0);
        for (int64_t ir = 0; ir < mc; ir += kMR) {
          float* dst = apack.data() + ir * kc;
          const int64_t mr = std::min(kMR, mc - ir);
          for (int64_t p = 0; p < kc; ++p) {
            for (int64_t i = 0; i < kMR; ++i) {
              dst[p * kMR + i] = i < mr ? a[(i0 + ir + i) * a_rs + (pc + p) * a_cs] : 0.f;
            }
          }
        }
        for (int64_t jp = 0; jp < n_panels; ++jp) {
          const int64_t j0 = jp * kNR, nr = std::min(kNR, n - j0);
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            micro_kernel(kc, apack.data() + ir * kc, bpack.data() + jp * kNR * kc, c + (i0 + ir) * ldc + j0, ldc,
                         std::min(kMR, mc - ir), nr, alpha, true);
          }
        }
      }
    });
  }
}

}  // namespace kernels
}  // namespace executorch
