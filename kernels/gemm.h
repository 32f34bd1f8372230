#pragma once

#include <cstdint>

namespace executorch {
namespace kernels {

// C[m, n] = alpha * sum_k A[m, k] * B[k, n] + beta * C[m, n], float32, row-major.
// A is read as A[m, k] = a[m * a_rs + k * a_cs] (so transposes are strides), likewise B.
// beta == 0 ignores C's previous contents. Blocked and packed for the cache, parallel over rows.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
           int64_t b_rs, int64_t b_cs, float beta, float* c, int64_t ldc);

}  // namespace kernels
}  // namespace executorch
