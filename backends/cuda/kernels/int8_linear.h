#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace executorch {
namespace backends {
namespace cuda {

// y[n] = w_scale[n] * x_scale * sum_k w[n, k] * x[k], for int8 weights `w` (row-major, n x k) and
// int8 activations `x`; accumulates in int32 with __dp4a. Device pointers; k must be a multiple of 4
// and `w`, `x` 4-byte aligned. Launches on `stream` and returns the launch status.
cudaError_t launch_int8_linear(const int8_t* w, const float* w_scale, const int8_t* x, float x_scale,
                               float* y, int n, int k, cudaStream_t stream);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
