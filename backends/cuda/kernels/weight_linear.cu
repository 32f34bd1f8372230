#include <executorch/backends/cuda/kernels/weight_linear.h>

#include <executorch/backends/cuda/kernels/convert.cuh>

#include <cstdint>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

// The weights dequantized and transposed, out [k, n] (the matrix product's operand is contiguous):
// a 32 x 32 tile read along the weight rows, written along the output's.
template <typename T, bool kInt4>
__global__ void dequantize_kernel(const uint8_t* w, const float* scales, int64_t group, T* out, int64_t n, int64_t k) {
  __shared__ float tile[32][33];
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * 32, k0 = static_cast<int64_t>(blockIdx.x) * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t c = c0 + i, col = k0 + threadIdx.x;
    if (c >= n || col >= k) continue;
    float v;
    if (kInt4) {
      const uint8_t byte = w[c * (k / 2) + col / 2];
      v = (static_cast<float>((col & 1) ? byte >> 4 : byte & 0x0F) - 8.f) * scales[c * (k / group) + col / group];
    } else {
      v = static_cast<float>(static_cast<int8_t>(w[c * k + col])) * scales[c];
    }
    tile[i][threadIdx.x] = v;
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t col = k0 + i, c = c0 + threadIdx.x;
    if (c < n && col < k) out[col * n + c] = st<T>(tile[threadIdx.x][i]);
  }
}

template <typename T, bool kInt4>
cudaError_t launch_dequantize(const uint8_t* w, const float* scales, int64_t group, T* out, int64_t n, int64_t k,
                              cudaStream_t stream) {
  if (n * k == 0) return cudaSuccess;
  if ((n + 31) / 32 > 65535) return cudaErrorInvalidValue;
  const dim3 blocks(static_cast<unsigned>((k + 31) / 32), static_cast<unsigned>((n + 31) / 32)), threads(32, 8);
  dequantize_kernel<T, kInt4><<<blocks, threads, 0, stream>>>(w, scales, group, out, n, k);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t launch_dequantize_int8(const int8_t* w, const float* scale, T* out, int64_t n, int64_t k,
                                   cudaStream_t stream) {
  return launch_dequantize<T, false>(reinterpret_cast<const uint8_t*>(w), scale, 1, out, n, k, stream);
}

template <typename T>
cudaError_t launch_dequantize_int4(const uint8_t* q, const float* scales, int64_t group, T* out, int64_t n, int64_t k,
                                   cudaStream_t stream) {
  return launch_dequantize<T, true>(q, scales, group, out, n, k, stream);
}

#define EXECUTORCH_WEIGHT_LINEAR_FOR(T)                                                                            \
  template cudaError_t launch_dequantize_int8<T>(const int8_t*, const float*, T*, int64_t, int64_t, cudaStream_t); \
  template cudaError_t launch_dequantize_int4<T>(const uint8_t*, const float*, int64_t, T*, int64_t, int64_t,      \
                                                 cudaStream_t);

EXECUTORCH_WEIGHT_LINEAR_FOR(float)
EXECUTORCH_WEIGHT_LINEAR_FOR(__half)
EXECUTORCH_WEIGHT_LINEAR_FOR(__nv_bfloat16)
#undef EXECUTORCH_WEIGHT_LINEAR_FOR

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
