#include <executorch/backends/cuda/kernels/gemm.h>

#include <climits>

#include <executorch/backends/cuda/kernels/convert.cuh>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

constexpr int kTile = 32;
constexpr int kRows = 8;  // each thread computes kTile / kRows outputs of a column

// Shared-memory tiled SGEMM: a 32 x 32 tile of C per block, 32 x 8 threads.
__global__ void sgemm_kernel(int64_t m, int64_t n, int64_t k, float alpha, const float* __restrict__ a,
                             const float* __restrict__ b, float beta, float* __restrict__ c, int64_t stride_a,
                             int64_t stride_b, int64_t stride_c) {
  a += blockIdx.z * stride_a, b += blockIdx.z * stride_b, c += blockIdx.z * stride_c;
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile,
                col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  float acc[kTile / kRows] = {};
  for (int64_t p0 = 0; p0 < k; p0 += kTile) {
    for (int r = threadIdx.y; r < kTile; r += kRows) {
      const int64_t ar = row0 + r, ac = p0 + threadIdx.x;
      as[r][threadIdx.x] = (ar < m && ac < k) ? a[ar * k + ac] : 0.f;
      const int64_t br = p0 + r;
      bs[r][threadIdx.x] = (br < k && col < n) ? b[br * n + col] : 0.f;
    }
    __syncthreads();
    for (int p = 0; p < kTile; ++p) {
      const float bv = bs[p][threadIdx.x];
      for (int i = 0; i < kTile / kRows; ++i) acc[i] += as[threadIdx.y + i * kRows][p] * bv;
    }
    __syncthreads();
  }
  if (col >= n) return;
  for (int i = 0; i < kTile / kRows; ++i) {
    const int64_t row = row0 + threadIdx.y + i * kRows;
    if (row < m) c[row * n + col] = alpha * acc[i] + (beta == 0.f ? 0.f : beta * c[row * n + col]);
  }
}

// The column of element i of a row-major [m, n] matrix, with 32-bit remainders where they fit:
// 64-bit division is a long sequence on the GPU.
__device__ __forceinline__ int64_t column(int64_t i, int64_t m, int64_t n) {
  return m * n <= INT32_MAX ? static_cast<uint32_t>(i) % static_cast<uint32_t>(n) : i % n;
}

template <typename T>
__global__ void broadcast_rows_kernel(int64_t m, int64_t n, const T* __restrict__ bias, int64_t bias_numel,
                                      T* __restrict__ c) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * n) return;
  c[i] = bias[bias_numel != n ? i : column(i, m, n)];
}

template <typename T>
__global__ void add_rows_kernel(int64_t m, int64_t n, const T* __restrict__ bias, T* __restrict__ c) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * n) return;
  c[i] = st<T>(ld(c[i]) + ld(bias[column(i, m, n)]));
}

}  // namespace

cudaError_t launch_add_rows(int64_t m, int64_t n, const void* bias, void* c, cudaDataType type, cudaStream_t stream) {
  const int64_t total = m * n;
  if (total == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((total + 255) / 256);
  switch (type) {
    case CUDA_R_32F:
      add_rows_kernel<<<blocks, 256, 0, stream>>>(m, n, static_cast<const float*>(bias), static_cast<float*>(c));
      break;
    case CUDA_R_16F:
      add_rows_kernel<<<blocks, 256, 0, stream>>>(m, n, static_cast<const __half*>(bias), static_cast<__half*>(c));
      break;
    case CUDA_R_16BF:
      add_rows_kernel<<<blocks, 256, 0, stream>>>(m, n, static_cast<const __nv_bfloat16*>(bias),
                                                  static_cast<__nv_bfloat16*>(c));
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b, float beta,
                         float* c, cudaStream_t stream, int64_t batch, int64_t stride_a, int64_t stride_b,
                         int64_t stride_c) {
  if (m <= 0 || n <= 0 || batch <= 0) return cudaSuccess;
  if (batch > 65535) return cudaErrorInvalidValue;  // gridDim.z
  const dim3 block(kTile, kRows), grid(static_cast<unsigned>((n + kTile - 1) / kTile),
                                       static_cast<unsigned>((m + kTile - 1) / kTile), static_cast<unsigned>(batch));
  sgemm_kernel<<<grid, block, 0, stream>>>(m, n, k, alpha, a, b, beta, c, stride_a, stride_b, stride_c);
  return cudaGetLastError();
}

cudaError_t launch_broadcast_rows(int64_t m, int64_t n, const void* bias, int64_t bias_numel, void* c, int element_size,
                                  cudaStream_t stream) {
  if (bias_numel != n && bias_numel != m * n) return cudaErrorInvalidValue;
  const int64_t total = m * n;
  if (total == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((total + 255) / 256);
  if (element_size == 4) {
    broadcast_rows_kernel<<<blocks, 256, 0, stream>>>(m, n, static_cast<const uint32_t*>(bias), bias_numel,
                                                      static_cast<uint32_t*>(c));
  } else if (element_size == 2) {
    broadcast_rows_kernel<<<blocks, 256, 0, stream>>>(m, n, static_cast<const uint16_t*>(bias), bias_numel,
                                                      static_cast<uint16_t*>(c));
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
