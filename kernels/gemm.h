#pragma once

#include <cstdint>

// Hot loops cloned for x86-64-v3 (AVX2 + FMA) with a run-time choice, so one binary runs on any
// x86-64 and uses the wider vectors where the CPU has them.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define EXECUTORCH_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define EXECUTORCH_VECTOR_CLONES
#endif

namespace executorch {
namespace kernels {

// Eight floats as one vector value (GCC/Clang vector extension): one AVX register where the CPU
// has AVX, two SSE registers where it has not.
typedef float v8f __attribute__((vector_size(32)));
// Eight lanes of 32-bit integers, signed and unsigned (unsigned arithmetic wraps, for bit work).
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));

// Eight partial sums (a float[8] or a v8f) added pairwise: the order every float32 dot product
// here ends in.
template <typename Lanes>
inline float lane_sum(const Lanes& l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// C[m, n] = alpha * sum_k A[m, k] * B[k, n] + beta * C[m, n], float32, row-major.
// A is read as A[m, k] = a[m * a_rs + k * a_cs] (so transposes are strides), likewise B.
// beta == 0 ignores C's previous contents. Blocked and packed for the cache, parallel over rows.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
           int64_t b_rs, int64_t b_cs, float beta, float* c, int64_t ldc);

// sum_p a[p] * b[p] over k elements, b float32 or an integer type read as float: eight independent
// sums the compiler keeps in one vector register, then the tail.
template <typename B>
inline float dot(const float* a, const B* b, int64_t k) {
  float lanes[8] = {};
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += a[p + l] * static_cast<float>(b[p + l]);
  }
  float sum = lane_sum(lanes);
  for (; p < k; ++p) sum += a[p] * static_cast<float>(b[p]);
  return sum;
}

}  // namespace kernels
}  // namespace executorch
