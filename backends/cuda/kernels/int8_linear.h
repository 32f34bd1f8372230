#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace executorch {
namespace backends {
namespace cuda {

// The int8 linear layer (operator executorch::int8_linear; docs/program_format.md states the
// arithmetic, which the CPU kernel shares):
//   scale[r] = max_k |x[r, k]| / 127, q[r, k] = clamp(round_half_even(x[r, k] * 127 / max_k |x[r, k]|), -127, 127)
//   y[r, n]  = float(sum_k q[r, k] * w[n, k]) * scale[r] * w_scale[n] (+ bias[n])
// All pointers are device memory; k must be a multiple of 4 (rows of q and w are read as packed
// int32 for __dp4a) and w, q 4-byte aligned. Each launches on `stream` and returns the launch status.

// Dynamic per-row quantization of float32 activations `x` (rows x k) into `q` and `scale`.
cudaError_t launch_quantize_rows(const float* x, int8_t* q, float* scale, int64_t rows, int64_t k, cudaStream_t stream);

// y (m x n, float32) from quantized activations `q` (m x k, per-row `x_scale`) and int8 weights
// `w` (n x k, per-row `w_scale`); `bias` (n) may be null. int32 accumulation through __dp4a.
cudaError_t launch_int8_linear(const int8_t* q, const float* x_scale, const int8_t* w, const float* w_scale,
                               const float* bias, float* y, int64_t m, int64_t n, int64_t k, cudaStream_t stream);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
