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

// Element offset of output element i in an operand with `strides` (0 where broadcast).
__device__ int64_t broadcast_offset(int64_t i, const Broadcast& s, const int64_t* strides) {
  int64_t off = 0;
  for (int d = s.dim - 1; d >= 0; --d) {
    off += (i % s.out_sizes[d]) * strides[d];
    i /= s.out_sizes[d];
  }
  return off;
}

__global__ void where_kernel(const bool* __restrict__ c, const float* __restrict__ a, const float* __restrict__ b,
                             float* __restrict__ out, int64_t n, Broadcast s) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = c[broadcast_offset(i, s, s.c_strides)] ? a[broadcast_offset(i, s, s.a_strides)]
                                                   : b[broadcast_offset(i, s, s.b_strides)];
}

__global__ void compare_kernel(Compare op, const float* __restrict__ x, float v, bool* __restrict__ out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float a = x[i];
  bool r = false;
  switch (op) {
    case Compare::Eq: r = a == v; break;
    case Compare::Ne: r = a != v; break;
    case Compare::Lt: r = a < v; break;
    case Compare::Le: r = a <= v; break;
    case Compare::Gt: r = a > v; break;
    case Compare::Ge: r = a >= v; break;
  }
  out[i] = r;
}

__global__ void logical_not_kernel(const bool* __restrict__ x, bool* __restrict__ out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = !x[i];
}

// One warp per row.
__global__ void row_any_kernel(const bool* __restrict__ x, bool* __restrict__ y, int64_t rows, int64_t cols) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  bool any = false;
  for (int64_t j = threadIdx.x % 32; j < cols; j += 32) any |= x[row * cols + j];
  any = __any_sync(0xffffffffu, any);
  if (threadIdx.x % 32 == 0) y[row] = any;
}

__global__ void embedding_kernel(const float* __restrict__ w, const void* __restrict__ indices, bool int32_indices,
                                 float* __restrict__ out, int64_t n, int64_t rows, int64_t width, int* bad) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * width) return;
  const int64_t k = i / width;
  const int64_t r = int32_indices ? static_cast<const int32_t*>(indices)[k] : static_cast<const int64_t*>(indices)[k];
  if (r < 0 || r >= rows) {
    out[i] = 0.f;
    *bad = 1;
    return;
  }
  out[i] = w[r * width + i % width];
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

__global__ void im2col_kernel(const float* __restrict__ x, float* __restrict__ col, int64_t images, int64_t image_stride,
                              int64_t channels, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                              int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t oh, int64_t ow) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t cols = oh * ow, per_image = channels * kh * kw * cols;
  if (j >= images * per_image) return;
  const int64_t i = j % per_image;
  x += (j / per_image) * image_stride;
  col += (j / per_image) * per_image;
  const int64_t r = i / cols, pix = i % cols;
  const int64_t c = r / (kh * kw), ky = (r / kw) % kh, kx = r % kw;
  const int64_t iy = (pix / ow) * sh - ph + ky * dh, ix = (pix % ow) * sw - pw + kx * dw;
  col[i] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[(c * h + iy) * w + ix] : 0.f;
}

__global__ void channel_affine_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                      const float* __restrict__ shift, float* __restrict__ y, int64_t c, int64_t inner,
                                      int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t ch = (i / inner) % c;
  y[i] = x[i] * scale[ch] + shift[ch];
}

__global__ void add_planes_kernel(const float* __restrict__ bias, float* __restrict__ y, int64_t channels,
                                  int64_t inner, int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) y[i] += bias[(i / inner) % channels];
}

__global__ void pool2d_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t* __restrict__ indices,
                              bool is_max, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t kh, int64_t kw,
                              int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                              bool include_pad, int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t plane = i / (oh * ow), oy = (i / ow) % oh, ox = i % ow;
  const float* xp = x + plane * h * w;
  if (is_max) {
    float best = -INFINITY;
    int64_t best_i = -1;
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * sh - ph + ky * dh;
      if (iy < 0 || iy >= h) continue;
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int64_t ix = ox * sw - pw + kx * dw;
        if (ix < 0 || ix >= w) continue;
        const float v = xp[iy * w + ix];
        if (best_i < 0 || v > best || v != v) best = v, best_i = iy * w + ix;
      }
    }
    y[i] = best;
    if (indices) indices[i] = best_i;
    return;
  }
  const int64_t y0 = oy * sh - ph, x0 = ox * sw - pw;
  const int64_t y1 = min(y0 + kh, h + ph), x1 = min(x0 + kw, w + pw);
  const int64_t padded = (y1 - y0) * (x1 - x0);
  const int64_t ya = max(y0, int64_t{0}), xa = max(x0, int64_t{0}), yb = min(y1, h), xb = min(x1, w);
  float sum = 0.f;
  for (int64_t iy = ya; iy < yb; ++iy)
    for (int64_t ix = xa; ix < xb; ++ix) sum += xp[iy * w + ix];
  const int64_t count = include_pad ? padded : (yb - ya) * (xb - xa);
  y[i] = count > 0 ? sum / static_cast<float>(count) : 0.f;
}

__global__ void row_reduce_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols, bool mean) {
  __shared__ float shared[kThreads];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += xr[j];
  shared[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = mean ? shared[0] / static_cast<float>(cols) : shared[0];
}

}  // namespace

cudaError_t launch_im2col(const float* x, float* col, int64_t images, int64_t image_stride, int64_t channels, int64_t h,
                          int64_t w, int64_t kh, int64_t kw, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                          int64_t pad_w, int64_t dil_h, int64_t dil_w, int64_t oh, int64_t ow, cudaStream_t stream) {
  const int64_t total = images * channels * kh * kw * oh * ow;
  if (total == 0) return cudaSuccess;
  im2col_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, col, images, image_stride, channels, h, w, kh, kw, stride_h,
                                                             stride_w, pad_h, pad_w, dil_h, dil_w, oh, ow);
  return cudaGetLastError();
}

cudaError_t launch_channel_affine(const float* x, const float* scale, const float* shift, float* y, int64_t n,
                                  int64_t c, int64_t inner, cudaStream_t stream) {
  const int64_t total = n * c * inner;
  if (total == 0) return cudaSuccess;
  channel_affine_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, scale, shift, y, c, inner, total);
  return cudaGetLastError();
}

cudaError_t launch_add_planes(const float* bias, float* y, int64_t planes, int64_t channels, int64_t inner,
                              cudaStream_t stream) {
  const int64_t total = planes * inner;
  if (total == 0) return cudaSuccess;
  add_planes_kernel<<<blocks_for(total), kThreads, 0, stream>>>(bias, y, channels, inner, total);
  return cudaGetLastError();
}

cudaError_t launch_pool2d(const float* x, float* y, int64_t* indices, bool max, int64_t planes, int64_t h, int64_t w,
                          int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                          int64_t pw, int64_t dh, int64_t dw, bool count_include_pad, cudaStream_t stream) {
  const int64_t total = planes * oh * ow;
  if (total == 0) return cudaSuccess;
  pool2d_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, indices, max, h, w, oh, ow, kh, kw, sh, sw, ph, pw,
                                                             dh, dw, count_include_pad, total);
  return cudaGetLastError();
}

cudaError_t launch_row_reduce(const float* x, float* y, int64_t rows, int64_t cols, bool mean, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  row_reduce_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols, mean);
  return cudaGetLastError();
}

cudaError_t kernels_loadable() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, unary_kernel);
}

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

cudaError_t launch_where(const bool* cond, const float* a, const float* b, float* out, int64_t n,
                         const Broadcast& shape, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  where_kernel<<<blocks_for(n), kThreads, 0, stream>>>(cond, a, b, out, n, shape);
  return cudaGetLastError();
}

cudaError_t launch_compare_scalar(Compare op, const float* x, float scalar, bool* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  compare_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, x, scalar, out, n);
  return cudaGetLastError();
}

cudaError_t launch_logical_not(const bool* x, bool* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  logical_not_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}

cudaError_t launch_row_any(const bool* x, bool* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  row_any_kernel<<<blocks_for(rows * 32), kThreads, 0, stream>>>(x, y, rows, cols);
  return cudaGetLastError();
}

cudaError_t launch_embedding(const float* weight, const void* indices, bool int32_indices, float* out, int64_t n,
                             int64_t rows, int64_t width, int* bad, cudaStream_t stream) {
  if (n * width == 0) return cudaSuccess;
  embedding_kernel<<<blocks_for(n * width), kThreads, 0, stream>>>(weight, indices, int32_indices, out, n, rows, width,
                                                                   bad);
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
