#include <executorch/backends/cuda/kernels/int8_linear.h>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;  // one warp per output row

// Each warp reduces one row: lanes stride over packed groups of four int8 values, __dp4a multiplies
// and adds four pairs at once into an int32 accumulator, then a shuffle reduction sums the lanes.
__global__ void int8_linear_kernel(const int* __restrict__ w, const float* __restrict__ w_scale,
                                   const int* __restrict__ x, float x_scale, float* __restrict__ y,
                                   int n, int k4) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.y;
  if (row >= n) return;
  const int* w_row = w + static_cast<long long>(row) * k4;
  int acc = 0;
  for (int i = threadIdx.x; i < k4; i += kWarp) {
    acc = __dp4a(w_row[i], x[i], acc);
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    acc += __shfl_down_sync(0xffffffffu, acc, offset);
  }
  if (threadIdx.x == 0) {
    y[row] = static_cast<float>(acc) * w_scale[row] * x_scale;
  }
}

}  // namespace

cudaError_t launch_int8_linear(const int8_t* w, const float* w_scale, const int8_t* x, float x_scale,
                               float* y, int n, int k, cudaStream_t stream) {
  if (n <= 0 || k <= 0 || k % 4 != 0) return cudaErrorInvalidValue;
  const dim3 block(kWarp, kRowsPerBlock);
  const dim3 grid((n + kRowsPerBlock - 1) / kRowsPerBlock);
  int8_linear_kernel<<<grid, block, 0, stream>>>(reinterpret_cast<const int*>(w), w_scale,
                                                 reinterpret_cast<const int*>(x), x_scale, y, n,
                                                 k / 4);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
