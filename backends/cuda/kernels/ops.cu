#include <executorch/backends/cuda/kernels/ops.h>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__device__ float apply(Unary op, float x) {
  switch (op) {
    case Unary::Relu: return x > 0.f ? x : 0.f;
    case Unary::Silu: return x / (1.f + expf(-x));
    case Unary::Gelu: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case Unary::GeluTanh: return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case Unary::Sigmoid: return 1.f / (1.f + expf(-x));
    case Unary::Tanh: return tanhf(x);
    case Unary::Neg: return -x;
    case Unary::Exp: return expf(x);
    case Unary::Rsqrt: return rsqrtf(x);
  }
  return x;
}

__global__ void unary_kernel(Unary op, const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = apply(op, x[i]);
}

__global__ void binary_kernel(Binary op, const float* __restrict__ a, const float* __restrict__ b, float scalar,
                              float alpha, float* __restrict__ out, int64_t n, Broadcast s) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t rem = i, ia = 0, ib = 0;
  for (int d = s.dim - 1; d >= 0; --d) {
    const int64_t idx = rem % s.out_sizes[d];
    rem /= s.out_sizes[d];
    ia += idx * s.a_strides[d];
    ib += idx * s.b_strides[d];
  }
  const float x = a[ia], y = (b ? b[ib] : scalar) * alpha;
  float r = 0.f;
  switch (op) {
    case Binary::Add: r = x + y; break;
    case Binary::Sub: r = x - y; break;
    case Binary::Mul: r = x * y; break;
    case Binary::Div: r = x / y; break;
  }
  out[i] = r;
}

// One block per row: max, sum of exponentials, then the normalized values.
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols, bool log) {
  __shared__ float shared[kThreads];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, xr[j]);
  shared[threadIdx.x] = mx;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) shared[threadIdx.x] = fmaxf(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  mx = shared[0];
  __syncthreads();
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(xr[j] - mx);
  shared[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  sum = shared[0];
  const float lse = mx + logf(sum);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = log ? xr[j] - lse : expf(xr[j] - lse);
}

__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                  float eps, float* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd,
                                  int64_t cols) {
  __shared__ float s1[kThreads], s2[kThreads];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float sum = 0.f, sq = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += xr[j];
  s1[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) s1[threadIdx.x] += s1[threadIdx.x + s];
    __syncthreads();
  }
  const float mu = s1[0] / static_cast<float>(cols);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sq += (xr[j] - mu) * (xr[j] - mu);
  s2[threadIdx.x] = sq;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) s2[threadIdx.x] += s2[threadIdx.x + s];
    __syncthreads();
  }
  const float rs = rsqrtf(s2[0] / static_cast<float>(cols) + eps);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float v = (xr[j] - mu) * rs;
    if (w) v *= w[j];
    if (b) v += b[j];
    y[row * cols + j] = v;
  }
  if (threadIdx.x == 0) {
    if (mean) mean[row] = mu;
    if (rstd) rstd[row] = rs;
  }
}

struct CopyShape {
  int dim;
  int64_t sizes[kMaxOpDims];
  int64_t strides[kMaxOpDims];
};

template <typename T>
__global__ void strided_copy_kernel(const T* __restrict__ in, T* __restrict__ out, CopyShape s, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t rem = i, off = 0;
  for (int d = s.dim - 1; d >= 0; --d) {
    off += (rem % s.sizes[d]) * s.strides[d];
    rem /= s.sizes[d];
  }
  out[i] = in[off];
}

}  // namespace

cudaError_t launch_unary(Unary op, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  unary_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, x, y, n);
  return cudaGetLastError();
}

cudaError_t launch_binary(Binary op, const float* a, const float* b, float scalar, float alpha, float* out, int64_t n,
                          const Broadcast& shape, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  binary_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, a, b, scalar, alpha, out, n, shape);
  return cudaGetLastError();
}

cudaError_t launch_softmax(const float* x, float* y, int64_t rows, int64_t cols, bool log, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols, log);
  return cudaGetLastError();
}

cudaError_t launch_layer_norm(const float* x, const float* weight, const float* bias, float eps, float* y, float* mean,
                              float* rstd, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  layer_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, bias, eps, y, mean, rstd, cols);
  return cudaGetLastError();
}

cudaError_t launch_strided_copy(const void* in, void* out, int dim, const int64_t* out_sizes, const int64_t* in_strides,
                                int64_t n, int element_size, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (dim > kMaxOpDims) return cudaErrorInvalidValue;
  CopyShape s{dim, {}, {}};
  for (int d = 0; d < dim; ++d) s.sizes[d] = out_sizes[d], s.strides[d] = in_strides[d];
  switch (element_size) {
    case 1: strided_copy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), s, n); break;
    case 2: strided_copy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), s, n); break;
    case 4: strided_copy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out), s, n); break;
    case 8: strided_copy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const uint64_t*>(in), static_cast<uint64_t*>(out), s, n); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
