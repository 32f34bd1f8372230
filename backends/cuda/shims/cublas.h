#pragma once

// cuBLAS, loaded on first use from the environment (libcublas.so.13: pip's nvidia-cublas next to
// executorch in site-packages, LD_LIBRARY_PATH, or a copy another library already loaded, such as
// PyTorch's), as PyTorch does; it is not bundled. Only the few entry points the shims call are
// declared, with cuBLAS's C ABI.
#include <cstdint>

#include <cuda_runtime_api.h>
#include <library_types.h>

namespace executorch {
namespace backends {
namespace cuda {

// Whether cuBLAS could be loaded (loads it on the first call). EXECUTORCH_CUDA_GEMM=builtin makes
// this false, so the built-in float32 kernel is used instead.
bool cublas_available();

// Why cublas_available() is false: the loader's message.
const char* cublas_unavailable_reason();

// Row-major C[m, n] = alpha * A[m, k] @ B[k, n] + beta * C, all of `type` (CUDA_R_32F, CUDA_R_16F,
// CUDA_R_16BF), accumulated in float32, on `stream`; `batch` such products, matrix i at element
// offset i * stride_a of a (and so on). Returns a message on failure, nullptr on success.
const char* cublas_gemm(cudaDataType type, int64_t m, int64_t n, int64_t k, float alpha, const void* a, const void* b,
                        float beta, void* c, cudaStream_t stream, int64_t batch = 1, int64_t stride_a = 0,
                        int64_t stride_b = 0, int64_t stride_c = 0);

// Row-major C[m, n] = A[m, k] @ B[k, n] (+ bias[n]) (+ residual[m, n]), each where given, in one cuBLASLt
// call (the bias added by its epilogue, the residual read as its C matrix; residual may be c itself),
// all of `type`, accumulated in float32, on `stream`. Returns a message where cuBLASLt is absent or
// refuses the shape (the caller falls back), nullptr on success.
const char* cublaslt_gemm_bias(cudaDataType type, int64_t m, int64_t n, int64_t k, const void* a, const void* b,
                               const void* bias, void* c, cudaStream_t stream, const void* residual = nullptr);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
