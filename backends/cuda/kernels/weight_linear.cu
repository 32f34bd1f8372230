#include <executorch/backends/cuda/kernels/weight_linear.h>

#include <executorch/backends/cuda/kernels/convert.cuh>
#include <executorch/backends/cuda/kernels/dependent_launch.cuh>
#include <executorch/backends/cuda/kernels/warp.cuh>

#include <algorithm>
#include <cstdint>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

constexpr int kFeaturesPerBlock = 8;  // output features per block of the GEMV kernels
constexpr int64_t kWideLayer = 8192;  // output features from which a GEMV warp takes two

// Eight consecutive elements of x as float32 (16-byte loads: x's rows are 16-byte aligned).
__device__ __forceinline__ void load8(const float* p, float* v) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
template <typename H>
__device__ __forceinline__ void load8(const H* p, float* v) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const H* h = reinterpret_cast<const H*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = ld(h[i]);
}
// ... or element by element, where x does not start 16-byte aligned (a caller's tensor at an offset).
template <typename T>
__device__ __forceinline__ void load8(const T* p, float* v, bool aligned) {
  if (aligned) return load8(p, v);
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = ld(p[i]);
}

// Each warp computes kFeatures consecutive output features of every row. A lane takes every 32nd
// 16-byte chunk of a feature's weights (16 int8 or 32 int4 values: one int4 group or a part of one)
// and the matching x of each row: a chunk's x is read once for all the warp's features, and the
// features' weight loads are issued before any is used. Chunk and group indices are 32-bit (a row
// has k / 16 chunks at most); the rows' sums are reduced across the warp at the end.
template <typename T, bool kInt4, int kFeatures>
__global__ void weight_gemv_kernel(const T* x, bool x_aligned, const uint8_t* w, const float* scales, int group,
                                   const T* bias, const T* residual, T* y, int rows, int64_t n, int64_t k) {
  constexpr int kPerLoad = kInt4 ? 32 : 16;  // weights per 16-byte load
  const int lane = threadIdx.x & 31;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)) * kFeatures;
  if (c0 >= n) return;
  const int chunks = static_cast<int>(k / kPerLoad), chunks_per_group = kInt4 ? group / kPerLoad : 1;
  const int groups = kInt4 ? static_cast<int>(k / group) : 0;
  const uint4* wf[kFeatures];
  const float* sf[kFeatures];
#pragma unroll
  for (int f = 0; f < kFeatures; ++f) {
    const int64_t c = c0 + f < n ? c0 + f : n - 1;  // a last warp's missing features repeat its last one
    wf[f] = reinterpret_cast<const uint4*>(w + c * (kInt4 ? k / 2 : k));
    sf[f] = scales + c * groups;
  }
  // The weights are no earlier kernel's output: they are fetched into L2 while the kernel that
  // writes x finishes (launch_dependent), and x is read only after it has.
  const int lines = static_cast<int>((kInt4 ? k / 2 : k) / 128);
#pragma unroll
  for (int f = 0; f < kFeatures; ++f) {
    for (int line = lane; line < lines; line += 32)
      prefetch_l2(reinterpret_cast<const char*>(wf[f]) + static_cast<size_t>(line) * 128);
  }
  wait_for_prerequisites();
  float acc[kWeightGemvMaxRows][kFeatures] = {};
  for (int ch = lane; ch < chunks; ch += 32) {
    uint4 raw[kFeatures];
    float s[kFeatures];
#pragma unroll
    for (int f = 0; f < kFeatures; ++f) {
      raw[f] = __ldcs(wf[f] + ch);  // streamed: the weights are read once per step
      s[f] = kInt4 ? __ldg(sf[f] + ch / chunks_per_group) : 1.f;
    }
#pragma unroll
    for (int r = 0; r < kWeightGemvMaxRows; ++r) {
      if (r >= rows) break;
      float xv[kPerLoad];
#pragma unroll
      for (int j = 0; j < kPerLoad; j += 8)
        load8(x + r * k + static_cast<int64_t>(ch) * kPerLoad + j, xv + j, x_aligned);
#pragma unroll
      for (int f = 0; f < kFeatures; ++f) {
        const uint8_t* bytes = reinterpret_cast<const uint8_t*>(&raw[f]);
        float sum = 0.f;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          if (kInt4) {
            sum += xv[2 * i] * (static_cast<float>(bytes[i] & 0x0F) - 8.f) +
                   xv[2 * i + 1] * (static_cast<float>(bytes[i] >> 4) - 8.f);
          } else {
            sum += xv[i] * static_cast<float>(static_cast<int8_t>(bytes[i]));
          }
        }
        acc[r][f] += kInt4 ? sum * s[f] : sum;
      }
    }
  }
#pragma unroll
  for (int f = 0; f < kFeatures; ++f) {
    const int64_t c = c0 + f;
    if (c >= n) break;
    const float s = kInt4 ? 1.f : scales[c];
    const float b = bias != nullptr ? ld(bias[c]) : 0.f;
#pragma unroll
    for (int r = 0; r < kWeightGemvMaxRows; ++r) {
      if (r >= rows) break;
      const float total = warp_sum(acc[r][f]);
      if (lane == 0) y[r * n + c] = st<T>(total * s + b + (residual != nullptr ? ld(residual[r * n + c]) : 0.f));
    }
  }
}

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
cudaError_t launch_gemv(const T* x, const uint8_t* w, const float* scales, int64_t group, const T* bias,
                        const T* residual, T* y, int64_t rows, int64_t n, int64_t k, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;  // an empty batch or layer
  if (rows < 0 || rows > kWeightGemvMaxRows || k % 32 != 0 || k / 16 > INT32_MAX ||
      (kInt4 && (group <= 0 || group > INT32_MAX || group % 32 != 0 || k % group != 0)) ||
      reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  const bool x_aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;  // then so is every row: k % 32 == 0
  // A block computes kFeaturesPerBlock features: two per warp where there are features enough to
  // fill the GPU twice over with such blocks (the widest layers: joined gate|up, the vocabulary),
  // else one, for more warps in flight.
  const unsigned blocks = static_cast<unsigned>((n + kFeaturesPerBlock - 1) / kFeaturesPerBlock);
  const int g = static_cast<int>(group), r = static_cast<int>(rows);
  if (n >= kWideLayer) {
    return launch_dependent(weight_gemv_kernel<T, kInt4, 2>, blocks, kFeaturesPerBlock / 2 * 32, 0, stream, x,
                            x_aligned, w, scales, g, bias, residual, y, r, n, k);
  }
  return launch_dependent(weight_gemv_kernel<T, kInt4, 1>, blocks, kFeaturesPerBlock * 32, 0, stream, x, x_aligned, w,
                          scales, g, bias, residual, y, r, n, k);
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
cudaError_t launch_int8_weight_gemv(const T* x, const int8_t* w, const float* scale, const T* bias, const T* residual,
                                    T* y, int64_t rows, int64_t n, int64_t k, cudaStream_t stream) {
  return launch_gemv<T, false>(x, reinterpret_cast<const uint8_t*>(w), scale, 1, bias, residual, y, rows, n, k, stream);
}

template <typename T>
cudaError_t launch_int4_gemv(const T* x, const uint8_t* q, const float* scales, int64_t group, const T* bias,
                             const T* residual, T* y, int64_t rows, int64_t n, int64_t k, cudaStream_t stream) {
  return launch_gemv<T, true>(x, q, scales, group, bias, residual, y, rows, n, k, stream);
}

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

#define EXECUTORCH_WEIGHT_LINEAR_FOR(T)                                                                             \
  template cudaError_t launch_int8_weight_gemv<T>(const T*, const int8_t*, const float*, const T*, const T*, T*,    \
                                                  int64_t, int64_t, int64_t, cudaStream_t);                         \
  template cudaError_t launch_int4_gemv<T>(const T*, const uint8_t*, const float*, int64_t, const T*, const T*, T*, \
                                           int64_t, int64_t, int64_t, cudaStream_t);                                \
  template cudaError_t launch_dequantize_int8<T>(const int8_t*, const float*, T*, int64_t, int64_t, cudaStream_t);  \
  template cudaError_t launch_dequantize_int4<T>(const uint8_t*, const float*, int64_t, T*, int64_t, int64_t,       \
                                                 cudaStream_t);

EXECUTORCH_WEIGHT_LINEAR_FOR(float)
EXECUTORCH_WEIGHT_LINEAR_FOR(__half)
EXECUTORCH_WEIGHT_LINEAR_FOR(__nv_bfloat16)
#undef EXECUTORCH_WEIGHT_LINEAR_FOR

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
