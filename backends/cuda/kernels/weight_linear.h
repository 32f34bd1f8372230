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
// k is a multiple of 32 and group a multiple of 32; the weights 16-byte aligned. All pointers are
// device memory; each launches on `stream` and returns the launch status. Up to kGemvMaxRows rows
// (decode steps) the GEMV of gemv.h computes such a layer; on more, its weights are dequantized
// for one matrix product.

// The weights transposed as T [k, n] (each value rounded to T), for a matrix product.
template <typename T>
cudaError_t launch_dequantize_int8(const int8_t* w, const float* scale, T* out, int64_t n, int64_t k,
                                   cudaStream_t stream);
template <typename T>
cudaError_t launch_dequantize_int4(const uint8_t* q, const float* scales, int64_t group, T* out, int64_t n, int64_t k,
                                   cudaStream_t stream);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
