#pragma once

#include <cstdint>

// Transcendental functions over float32 arrays, eight lanes at a time: the exponential that softmax
// and SiLU spend their time in, computed by a polynomial the compiler keeps in vector registers
// (std::exp is a call per element).
namespace executorch {
namespace kernels {

// out[i] = e^(x[i] - shift) for i < n (x and out may be the same array); returns the sum of out.
// Within 2 ulp of std::exp; an argument below -87.3 (-inf included) gives 0.
float exp_shifted(const float* x, float shift, float* out, int64_t n);

// out[i] = x[i] / (1 + e^-x[i]) for i < n (x and out may be the same array).
void silu(const float* x, float* out, int64_t n);

// out[i] = x[i] / 2 * (1 + erf(x[i] / sqrt(2))), GELU, with erf as Abramowitz & Stegun 7.1.26
// (within 1.5e-7), the form PyTorch's vectorized CPU GELU also takes.
void gelu_erf(const float* x, float* out, int64_t n);

// out[i] = 1 / (1 + e^-x[i]) for i < n, the sigmoid (x and out may be the same array).
void logistic(const float* x, float* out, int64_t n);

}  // namespace kernels
}  // namespace executorch
