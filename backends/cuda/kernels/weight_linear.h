#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace executorch {
namespace backends {
namespace cuda {

// Weight-only quantized linear layers (operators executorch::int8_weight_linear and
// executorch::int4_linear; docs/program_format.md states the arithmetic, which the CPU kernels
// share): activations x [rows, k] and y [rows, n] of type T (float, __half or __nv_bfloat16),
// computed in float32.
//   int8: y[r, c] = sum_k x[r, k] * w[c, k] * scale[c] (+ bias[c]); w int8 [n, k], scale float32 [n]
//   int4: y[r, c] = sum_k x[r, k] * (q[c, k] - 8) * scales[c, k / group] (+ bias[c]); q packed two to
//         a byte [n, k / 2] (column 2i in the low nibble), scales float32 [n, k / group]
// k is a multiple of 32 and group a multiple of 32; the weights 16-byte aligned (x may be
// anywhere). All pointers are device memory; each launches on `stream` and returns the launch
// status.

// Up to this many rows (decode steps), one pass reads each weight once for every row.
constexpr int64_t kWeightGemvMaxRows = 8;

// y for rows <= kWeightGemvMaxRows: each warp reads one output feature's weights. Where residual is
// given (y's shape; it may be y itself), y = residual + the product, rounded once.
template <typename T>
cudaError_t launch_int8_weight_gemv(const T* x, const int8_t* w, const float* scale, const T* bias, const T* residual,
                                    T* y, int64_t rows, int64_t n, int64_t k, cudaStream_t stream);
template <typename T>
cudaError_t launch_int4_gemv(const T* x, const uint8_t* q, const float* scales, int64_t group, const T* bias,
                             const T* residual, T* y, int64_t rows, int64_t n, int64_t k, cudaStream_t stream);

// The weights transposed as T [k, n] (each value rounded to T), for a matrix product on more rows.
template <typename T>
cudaError_t launch_dequantize_int8(const int8_t* w, const float* scale, T* out, int64_t n, int64_t k,
                                   cudaStream_t stream);
template <typename T>
cudaError_t launch_dequantize_int4(const uint8_t* q, const float* scales, int64_t group, T* out, int64_t n, int64_t k,
                                   cudaStream_t stream);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
