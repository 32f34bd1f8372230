#include <executorch/kernels/vector_math.h>

#include <cstring>
#include <limits>

#include <executorch/kernels/gemm.h>

namespace executorch {
namespace kernels {
namespace {

constexpr float kExpLow = -87.33654f;  // e^x below this is under float's smallest normal: 0
constexpr float kExpHigh = 88.37626f;  // above this, 2^n would pass 2^127: +inf

// e^x = 2^n e^r with n = round(x / ln 2) and |r| <= ln(2) / 2, e^r by a degree-7 polynomial
// (Cephes' expf coefficients), 2^n assembled in the exponent bits. Inlined into each caller, whose
// target sets the vector instructions. x is taken and returned in place (a vector argument's ABI
// depends on the target).
__attribute__((always_inline)) inline void exp8(v8f& x) {
  const v8i below = x < kExpLow;
  const v8i above = x > kExpHigh;
  x = below ? kExpLow : x;
  x = above ? kExpHigh : x;
  // Adding 1.5 * 2^23 rounds x / ln 2 to an integer held in the sum's low mantissa bits.
  constexpr float kRound = 12582912.f;
  const v8f t = x * 1.44269504088896341f + kRound;
  const v8f n = t - kRound;
  v8f r = x - n * 0.693359375f;  // ln 2 in two parts, the first exact in float
  r = r - n * -2.12194440e-4f;
  v8f p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const v8f y = (p * r) * r + r + 1.f;
  // t's bits less kRound's (0x4B400000) are n; n + 127 in the exponent field is 2^n.
  const v8u scale = ((v8u)t - 0x4B400000u + 127u) << 23;
  v8f out = y * (v8f)scale;
  out = below ? 0.f : out;
  x = above ? std::numeric_limits<float>::infinity() : out;
}

// v = eight floats from x, or the first `count` of them and `fill` after (an array's tail).
__attribute__((always_inline)) inline void load(const float* x, int64_t count, float fill, v8f& v) {
  if (count >= 8) {
    std::memcpy(&v, x, sizeof(v));
    return;
  }
  for (int l = 0; l < 8; ++l) v[l] = l < count ? x[l] : fill;
}

__attribute__((always_inline)) inline void store(float* out, const v8f& v, int64_t count) {
  std::memcpy(out, &v, sizeof(float) * static_cast<size_t>(count < 8 ? count : 8));
}

}  // namespace

EXECUTORCH_VECTOR_CLONES
float exp_shifted(const float* x, float shift, float* out, int64_t n) {
  v8f sum = {};
  for (int64_t i = 0; i < n; i += 8) {
    // The tail's missing lanes are -inf: e^-inf adds 0 to the sum.
    v8f e;
    load(x + i, n - i, -std::numeric_limits<float>::infinity(), e);
    e -= shift;
    exp8(e);
    sum += e;
    store(out + i, e, n - i);
  }
  return lane_sum(sum);
}

EXECUTORCH_VECTOR_CLONES
void silu(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    v8f v;
    load(x + i, n - i, 0.f, v);
    v8f e = -v;
    exp8(e);
    store(out + i, v / (1.f + e), n - i);
  }
}

EXECUTORCH_VECTOR_CLONES
void gelu_erf(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    v8f v;
    load(x + i, n - i, 0.f, v);
    const v8f z = v * 0.7071067811865476f;
    const v8f az = z < 0.f ? -z : z;
    const v8f t = 1.f / (1.f + 0.3275911f * az);
    const v8f poly =
        t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    v8f e = -az * az;
    exp8(e);
    const v8f y = 1.f - poly * e;
    store(out + i, 0.5f * v * (1.f + (z < 0.f ? -y : y)), n - i);
  }
}

EXECUTORCH_VECTOR_CLONES
void logistic(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    v8f e;
    load(x + i, n - i, 0.f, e);
    e = -e;
    exp8(e);
    store(out + i, 1.f / (1.f + e), n - i);
  }
}

}  // namespace kernels
}  // namespace executorch
