#include <executorch/backends/cuda/kernels/int8_linear.h>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kQuantThreads = 256;

__global__ void quantize_rows_kernel(const float* __restrict__ x, int8_t* __restrict__ q, float* __restrict__ scale,
                                     int64_t k) {
  __shared__ float partial[kQuantThreads];
  const float* row = x + blockIdx.x * k;
  float amax = 0.f;
  for (int64_t i = threadIdx.x; i < k; i += kQuantThreads) amax = fmaxf(amax, fabsf(row[i]));
  partial[threadIdx.x] = amax;
  __syncthreads();
  for (int s = kQuantThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
    __syncthreads();
  }
  amax = partial[0];
  // An all-zero row quantizes to zeros with scale 0 (its products are 0 either way).
  const float inv = amax > 0.f ? 127.f / amax : 0.f;
  int8_t* out = q + blockIdx.x * k;
  for (int64_t i = threadIdx.x; i < k; i += kQuantThreads) {
    const int v = __float2int_rn(__fmul_rn(row[i], inv));  // no contraction: the CPU kernel rounds alike
    out[i] = static_cast<int8_t>(max(-127, min(127, v)));
  }
  if (threadIdx.x == 0) scale[blockIdx.x] = amax / 127.f;
}

__device__ __forceinline__ float finish(int acc, float xs, float ws, const float* bias, int64_t col) {
  const float y = __fmul_rn(__fmul_rn(static_cast<float>(acc), xs), ws);
  return bias ? __fadd_rn(y, bias[col]) : y;
}

// Few rows (batch-1 decoding and the like): one warp per output element; lanes stride over packed
// groups of four int8 values and a shuffle reduction sums them. Weight rows stream through once per
// activation row, from L2 after the first.
constexpr int kRowsPerBlock = 8;

__global__ void int8_gemv_kernel(const int* __restrict__ q, const float* __restrict__ xs, const int* __restrict__ w,
                                 const float* __restrict__ ws, const float* __restrict__ bias, float* __restrict__ y,
                                 int64_t n, int64_t k4) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  const int64_t row = blockIdx.y;
  if (col >= n) return;
  const int* w_row = w + col * k4;
  const int* q_row = q + row * k4;
  int acc = 0;
  for (int64_t i = threadIdx.x; i < k4; i += kWarp) acc = __dp4a(w_row[i], q_row[i], acc);
  for (int offset = kWarp / 2; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if (threadIdx.x == 0) y[row * n + col] = finish(acc, xs[row], ws[col], bias, col);
}

// Many rows: 64 x 64 output tiles, 256 threads with 4 x 4 outputs each, k in steps of 8 packed
// words (32 int8 values) staged in shared memory. Out-of-range rows and words load as zeros.
constexpr int kTile = 64, kStep = 8, kThreads = 256;

__global__ void int8_gemm_kernel(const int* __restrict__ q, const float* __restrict__ xs, const int* __restrict__ w,
                                 const float* __restrict__ ws, const float* __restrict__ bias, float* __restrict__ y,
                                 int64_t m, int64_t n, int64_t k4) {
  __shared__ int a_tile[kStep][kTile + 1];
  __shared__ int b_tile[kStep][kTile + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile, col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  int acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k4; k0 += kStep) {
    // 64 rows x 8 words per operand: two words per thread each.
    for (int e = threadIdx.x; e < kTile * kStep; e += kThreads) {
      const int r = e / kStep, c = e % kStep;
      const int64_t kk = k0 + c;
      a_tile[c][r] = (row0 + r < m && kk < k4) ? q[(row0 + r) * k4 + kk] : 0;
      b_tile[c][r] = (col0 + r < n && kk < k4) ? w[(col0 + r) * k4 + kk] : 0;
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kStep; ++c) {
      int a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = a_tile[c][ty + 16 * i], b[i] = b_tile[c][tx + 16 * i];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = row0 + ty + 16 * i;
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t col = col0 + tx + 16 * j;
      if (col < n) y[row * n + col] = finish(acc[i][j], xs[row], ws[col], bias, col);
    }
  }
}

// Up to this many rows the warp-per-output kernel wins (it reads each weight row once per row
// from L2; the tiled kernel pays for 64-row tiles mostly empty).
constexpr int64_t kGemvRows = 8;

}  // namespace

cudaError_t launch_quantize_rows(const float* x, int8_t* q, float* scale, int64_t rows, int64_t k,
                                 cudaStream_t stream) {
  if (rows < 0 || k <= 0 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  quantize_rows_kernel<<<static_cast<unsigned>(rows), kQuantThreads, 0, stream>>>(x, q, scale, k);
  return cudaGetLastError();
}

cudaError_t launch_int8_linear(const int8_t* q, const float* x_scale, const int8_t* w, const float* w_scale,
                               const float* bias, float* y, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  if (m < 0 || n <= 0 || k <= 0 || k % 4 != 0) return cudaErrorInvalidValue;
  if (m == 0) return cudaSuccess;
  const int* qp = reinterpret_cast<const int*>(q);
  const int* wp = reinterpret_cast<const int*>(w);
  if (m <= kGemvRows) {
    const dim3 grid(static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock), static_cast<unsigned>(m));
    int8_gemv_kernel<<<grid, dim3(kWarp, kRowsPerBlock), 0, stream>>>(qp, x_scale, wp, w_scale, bias, y, n, k / 4);
  } else {
    const int64_t gy = (m + kTile - 1) / kTile;
    if (gy > 65535) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>(gy));
    int8_gemm_kernel<<<grid, kThreads, 0, stream>>>(qp, x_scale, wp, w_scale, bias, y, m, n, k / 4);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
