#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>
#include <library_types.h>

namespace executorch {
namespace backends {
namespace cuda {

// C[m, n] = alpha * A[m, k] @ B[k, n] + beta * C, float32, row-major, device pointers; `batch`
// such products, matrix i at a + i * stride_a (and so on; a stride of 0 reuses one matrix).
cudaError_t launch_sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b, float beta,
                         float* c, cudaStream_t stream, int64_t batch = 1, int64_t stride_a = 0, int64_t stride_b = 0,
                         int64_t stride_c = 0);

// C[m, n] = bias broadcast: bias has n elements (per column) or m * n, of `element_size` bytes (2 or 4).
cudaError_t launch_broadcast_rows(int64_t m, int64_t n, const void* bias, int64_t bias_numel, void* c, int element_size,
                                  cudaStream_t stream);

// C[m, n] += bias[n] for each row, C and bias of `type` (CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF).
cudaError_t launch_add_rows(int64_t m, int64_t n, const void* bias, void* c, cudaDataType type, cudaStream_t stream);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
