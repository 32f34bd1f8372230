#include <executorch/backends/cuda/kernels/ops.h>

#include <executorch/backends/cuda/kernels/convert.cuh>
#include <executorch/backends/cuda/kernels/dependent_launch.cuh>
#include <executorch/backends/cuda/kernels/warp.cuh>

#include <mma.h>

#include <algorithm>
#include <type_traits>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__device__ float apply(Unary op, float x, float p0, float p1) {
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
    case Unary::Clamp: return x != x ? x : fminf(fmaxf(x, p0), p1);  // NaN stays NaN
    case Unary::HardSwish: return x * fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f;
    case Unary::HardSigmoid: return fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f;
    case Unary::LeakyRelu: return x > 0.f ? x : x * p0;
    case Unary::Pow: return p0 == 2.f ? x * x : p0 == 0.5f ? sqrtf(x) : powf(x, p0);
    case Unary::Sqrt: return sqrtf(x);
    case Unary::Abs: return fabsf(x);
    case Unary::Log: return logf(x);
    case Unary::Sin: return sinf(x);
    case Unary::Cos: return cosf(x);
    case Unary::Erf: return erff(x);
  }
  return x;
}

// Offsets into K operands of each element of a contiguous output, in 32-bit arithmetic where
// everything fits (64-bit division is a long software sequence on the GPU). Built on the host by
// make_offsets, which drops size-1 dimensions and merges dimensions every operand walks
// contiguously, so a same-shape or row-broadcast operand costs one or two divisions, shared by all K.
template <typename Index, int K>
struct Offsets {
  int dim;
  Index sizes[kMaxOpDims];
  Index strides[K][kMaxOpDims];
};

template <typename Index, int K>
__device__ __forceinline__ void offsets_of(Index i, const Offsets<Index, K>& s, Index* off) {
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = 0;
  if (s.dim == 1) {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] = i * s.strides[k][0];
    return;
  }
  for (int d = s.dim - 1; d > 0; --d) {
    const Index q = i / s.sizes[d], r = i - q * s.sizes[d];
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += r * s.strides[k][d];
    i = q;
  }
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] += i * s.strides[k][0];
}

// Elements per thread of the elementwise kernels (a block covers kThreads * kPerThread).
constexpr int kPerThread = 4;

unsigned elementwise_blocks(int64_t n) {
  return static_cast<unsigned>((n + kThreads * kPerThread - 1) / (kThreads * kPerThread));
}

// The collapsed walk of `dim` output sizes over K operands' strides; false where it needs 64 bits.
template <typename Index, int K>
bool make_offsets(int dim, const int64_t* sizes, const int64_t* const* strides, int64_t n, Offsets<Index, K>* out) {
  int64_t sz[kMaxOpDims], st[K][kMaxOpDims];
  int m = 0;
  for (int d = 0; d < dim; ++d) {
    if (sizes[d] == 1) continue;
    bool merge = m > 0;
    for (int k = 0; k < K && merge; ++k) merge = st[k][m - 1] == strides[k][d] * sizes[d];
    if (merge) {
      sz[m - 1] *= sizes[d];
      for (int k = 0; k < K; ++k) st[k][m - 1] = strides[k][d];
      continue;
    }
    sz[m] = sizes[d];
    for (int k = 0; k < K; ++k) st[k][m] = strides[k][d];
    ++m;
  }
  if (m == 0) {  // one element
    sz[0] = 1;
    for (int k = 0; k < K; ++k) st[k][0] = 0;
    m = 1;
  }
  constexpr int64_t kLimit = int64_t{1} << 31;
  if (sizeof(Index) == 4) {
    if (n >= kLimit) return false;
    for (int k = 0; k < K; ++k) {
      int64_t span = 0;
      for (int d = 0; d < m; ++d) {
        if (st[k][d] < 0) return false;  // unsigned offsets
        span += (sz[d] - 1) * st[k][d];
      }
      if (span >= kLimit) return false;
    }
  }
  out->dim = m;
  for (int d = 0; d < m; ++d) {
    out->sizes[d] = static_cast<Index>(sz[d]);
    for (int k = 0; k < K; ++k) out->strides[k][d] = static_cast<Index>(st[k][d]);
  }
  return true;
}

// out[i] = body.load(off) for each output element i, off[k] its offset in operand k. Every
// thread's loads are issued before its stores, so they overlap (the operands are not restrict).
template <typename Index, int K, typename Body>
__global__ void elementwise_kernel(Offsets<Index, K> s, int64_t n, Body body) {
  allow_dependents();  // as the norm and attention kernels: a weight GEMV that follows fetches its weights meanwhile
  const int64_t base = static_cast<int64_t>(blockIdx.x) * (kThreads * kPerThread) + threadIdx.x;
  typename Body::Value values[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int64_t i = base + j * kThreads;
    if (i < n) {
      Index off[K];
      offsets_of(static_cast<Index>(i), s, off);
      values[j] = body.load(off);
    }
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int64_t i = base + j * kThreads;
    if (i < n) body.out[i] = values[j];
  }
}

// Runs `body` over the n elements of a contiguous output of `dim` sizes, K operands at `strides`,
// with 32-bit offsets where they fit, else 64-bit.
template <int K, typename Body>
cudaError_t launch_elementwise(int dim, const int64_t* sizes, const int64_t* const* strides, int64_t n, Body body,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (dim > kMaxOpDims) return cudaErrorInvalidValue;
  Offsets<uint32_t, K> small;
  if (make_offsets(dim, sizes, strides, n, &small)) {
    elementwise_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(small, n, body);
  } else {
    Offsets<int64_t, K> large;
    make_offsets(dim, sizes, strides, n, &large);
    elementwise_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(large, n, body);
  }
  return cudaGetLastError();
}

// Reduces over a block of kThreads threads (all threads get it): within each warp by shuffles,
// then across the warps' partials; `shared` holds kThreads floats and is free again on return.
template <typename Combine>
__device__ __forceinline__ float block_reduce(float v, float* shared, float identity, Combine combine) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int o = 16; o > 0; o /= 2) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? shared[lane] : identity;
  for (int o = 16; o > 0; o /= 2) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  return v;
}

__device__ float block_sum(float v, float* shared) {
  return block_reduce(v, shared, 0.f, [](float a, float b) { return a + b; });
}

__device__ float block_max(float v, float* shared) {
  return block_reduce(v, shared, -INFINITY, [](float a, float b) { return fmaxf(a, b); });
}

template <typename T>
__global__ void unary_kernel(Unary op, float p0, float p1, const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * (kThreads * kPerThread) + threadIdx.x;
  float v[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int64_t i = base + j * kThreads;
    v[j] = i < n ? ld(x[i]) : 0.f;
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int64_t i = base + j * kThreads;
    if (i < n) y[i] = st<T>(apply(op, v[j], p0, p1));
  }
}

// V is float (every floating type computes in float32) or int64_t (integer tensors; Div is refused
// for those, as PyTorch's is true division).
template <typename V>
__device__ __forceinline__ V binary_apply(Binary op, V x, V y) {
  switch (op) {
    case Binary::Add: return x + y;
    case Binary::Sub: return x - y;
    case Binary::Mul: return x * y;
    case Binary::Div: return x / y;
    case Binary::Max: return (x > y || x != x) ? x : y;  // NaN wins, as in torch.maximum
    case Binary::Min: return (x < y || x != x) ? x : y;
  }
  return x;
}

// An element of T as V (float: ld, so half precision widens) and back.
template <typename V, typename T>
__device__ __forceinline__ V widen(T v) {
  if constexpr (std::is_same<V, float>::value) {
    return ld(v);
  } else {
    return static_cast<V>(v);
  }
}
template <typename T, typename V>
__device__ __forceinline__ T narrow(V v) {
  if constexpr (std::is_same<V, float>::value) {
    return st<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// out = a op (b or scalar) * alpha over elements of T, computed in V (binary_apply's).
template <typename T, typename V>
struct BinaryBody {
  using Value = T;
  Binary op;
  const T* a;
  const T* b;
  V scalar, alpha;
  T* out;
  template <typename Index>
  __device__ T load(const Index* off) const {
    const V y = b ? widen<V>(b[off[1]]) : scalar;
    return narrow<T>(binary_apply<V>(op, widen<V>(a[off[0]]), y * alpha));
  }
};

template <typename T, int K>
struct FusedBody {
  using Value = T;
  FusedProgram p;
  const T* in[K];
  T* out;
  template <typename Index>
  __device__ T load(const Index* off) const {
    float r[kMaxFusedInputs + kMaxFusedSteps];
#pragma unroll
    for (int k = 0; k < K; ++k) r[k] = ld(in[k][off[k]]);
    for (int s = 0; s < p.steps; ++s) {
      const FusedStep& f = p.step[s];
      r[K + s] = f.binary ? binary_apply(f.op, r[f.a], (f.b < 0 ? f.scalar : r[f.b]) * f.alpha)
                          : apply(f.unary, r[f.a], f.p0, f.p1);
    }
    return st<T>(r[K + p.steps - 1]);
  }
};

template <typename T>
struct WhereBody {
  using Value = T;
  const bool* c;
  const T* a;
  const T* b;
  T* out;
  template <typename Index>
  __device__ T load(const Index* off) const {
    return c[off[2]] ? a[off[0]] : b[off[1]];
  }
};

// -1, 0 or 1 as a is below, equal to or above b; 2 where they are unordered (NaN).
template <typename T>
__device__ int ordering(T a, T b) {
  return a < b ? -1 : a > b ? 1 : a == b ? 0 : 2;
}

__device__ bool holds(Compare op, int c) {
  switch (op) {
    case Compare::Eq: return c == 0;
    case Compare::Ne: return c != 0;
    case Compare::Lt: return c == -1;
    case Compare::Le: return c == -1 || c == 0;
    case Compare::Gt: return c == 1;
    case Compare::Ge: return c == 1 || c == 0;
  }
  return false;
}

template <typename T>
__global__ void compare_kernel(Compare op, const T* __restrict__ x, float v, bool* __restrict__ out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = holds(op, ordering(ld(x[i]), v));
}

__device__ bool integral(ElementType t) {
  return t == ElementType::Bool || t == ElementType::Int32 || t == ElementType::Int64;
}

__device__ float load_float(const void* p, ElementType type, int64_t i) {
  switch (type) {
    case ElementType::Float16: return ld(static_cast<const __half*>(p)[i]);
    case ElementType::BFloat16: return ld(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ int64_t load_integer(const void* p, ElementType type, int64_t i) {
  switch (type) {
    case ElementType::Bool: return static_cast<const bool*>(p)[i] ? 1 : 0;
    case ElementType::Int32: return static_cast<const int32_t*>(p)[i];
    default: return static_cast<const int64_t*>(p)[i];
  }
}

// Stores an element read as an integer (`integer`, exact) or as a float (`real`).
__device__ void store_converted(void* out, ElementType type, int64_t i, bool from_integer, int64_t integer,
                                float real) {
  const float f = from_integer ? static_cast<float>(integer) : real;
  switch (type) {
    case ElementType::Float32: static_cast<float*>(out)[i] = f; break;
    case ElementType::Float16: static_cast<__half*>(out)[i] = st<__half>(f); break;
    case ElementType::BFloat16: static_cast<__nv_bfloat16*>(out)[i] = st<__nv_bfloat16>(f); break;
    case ElementType::Bool: static_cast<bool*>(out)[i] = from_integer ? integer != 0 : real != 0.f; break;
    case ElementType::Int32:
      static_cast<int32_t*>(out)[i] = from_integer ? static_cast<int32_t>(integer) : __float2int_rz(real);
      break;
    case ElementType::Int64: static_cast<int64_t*>(out)[i] = from_integer ? integer : __float2ll_rz(real); break;
  }
}

__global__ void cast_kernel(const void* __restrict__ x, ElementType x_type, void* __restrict__ out,
                            ElementType out_type, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const bool from_integer = integral(x_type);
  store_converted(out, out_type, i, from_integer, from_integer ? load_integer(x, x_type, i) : 0,
                  from_integer ? 0.f : load_float(x, x_type, i));
}

// out = test(a, b) over two operands of type T, each broadcast: a bool out of an elementwise pass.
template <typename T, typename Test>
struct PredicateBody {
  using Value = bool;
  Test test;
  const T* a;
  const T* b;
  bool* out;
  template <typename Index>
  __device__ bool load(const Index* off) const {
    return test(a[off[0]], b[off[1]]);
  }
};

struct LogicTest {
  Logic op;
  __device__ bool operator()(bool x, bool y) const {
    return op == Logic::And ? x && y : op == Logic::Or ? x || y : x != y;
  }
};

// One thread per output element: its index tensors' entries pick the source element.
// Where element i of an indexed result [leading, index sizes..., inner] lies in self; false (and *bad set)
// where an index is out of range.
__device__ bool indexed_source(const IndexGather& g, int64_t i, int64_t* source, int* bad) {
  const int64_t outer = i / g.block;
  i -= outer * g.block;
  int64_t position = i / g.inner;
  *source = outer * g.outer_stride + i - position * g.inner;
  int64_t coord[kMaxOpDims];
  for (int d = g.index_dim - 1; d >= 0; --d) {
    coord[d] = position % g.index_sizes[d];
    position /= g.index_sizes[d];
  }
  for (int k = 0; k < g.count; ++k) {
    int64_t at = 0;
    for (int d = 0; d < g.index_dim; ++d) at += coord[d] * g.index_strides[k][d];
    int64_t v = g.int32[k] ? static_cast<const int32_t*>(g.index[k])[at] : static_cast<const int64_t*>(g.index[k])[at];
    if (v < 0) v += g.self_sizes[k];
    if (v < 0 || v >= g.self_sizes[k]) {
      *bad = 1;
      return false;
    }
    *source += v * g.self_strides[k];
  }
  return true;
}

template <typename E>
__global__ void index_kernel(const E* __restrict__ self, E* __restrict__ out, IndexGather g, int64_t n, int* bad) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t source;
  out[i] = indexed_source(g, i, &source, bad) ? self[source] : E{};
}

template <typename E>
__global__ void index_put_kernel(E* __restrict__ out, const E* __restrict__ values, IndexGather g, int64_t n,
                                 int* bad) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t target;
  if (indexed_source(g, i, &target, bad)) out[target] = values[i];
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

template <typename T>
__global__ void embedding_kernel(const T* __restrict__ w, const void* __restrict__ indices, bool int32_indices,
                                 T* __restrict__ out, int64_t n, int64_t rows, int64_t width, int* bad) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * width) return;
  const int64_t k = i / width;
  const int64_t r = int32_indices ? static_cast<const int32_t*>(indices)[k] : static_cast<const int64_t*>(indices)[k];
  if (r < 0 || r >= rows) {
    out[i] = st<T>(0.f);
    *bad = 1;
    return;
  }
  out[i] = w[r * width + i % width];
}

// One block per row: max, sum of exponentials, then the normalized values.
template <typename T>
__global__ void softmax_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t cols, bool log) {
  __shared__ float shared[kThreads];
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  T* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, ld(xr[j]));
  mx = block_max(mx, shared);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(ld(xr[j]) - mx);
  sum = block_sum(sum, shared);
  const float lse = mx + logf(sum);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float v = ld(xr[j]) - lse;
    yr[j] = st<T>(log ? v : expf(v));
  }
}

// Attention: a block takes kAttentionRowsPerBlock query rows of one head, a warp one row. Keys and
// values pass through shared memory kAttentionKeys at a time; each lane scores one key of a tile,
// and the row keeps a running maximum, sum and output (online softmax), so scores never reach
// global memory.
constexpr int kAttentionKeys = 32;
constexpr int kAttentionSlots = kMaxAttentionHeadDim / 32;  // output elements per lane

// `score` after the attention mask's element `at`: removed (-inf) where a bool mask is false, plus
// an additive mask's value; unchanged without a mask.
template <typename T>
__device__ float masked(float score, const void* __restrict__ mask, AttentionMask kind, int64_t at) {
  if (kind == AttentionMask::Bool && !static_cast<const bool*>(mask)[at]) return -INFINITY;
  if (kind == AttentionMask::Additive) return score + ld(static_cast<const T*>(mask)[at]);
  return score;
}

template <typename T>
__global__ void attention_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                 const void* __restrict__ mask, T* __restrict__ out, AttentionShape s) {
  allow_dependents();
  extern __shared__ float smem[];
  const int e_dim = static_cast<int>(s.head_dim), v_dim = static_cast<int>(s.value_dim);
  float* keys = smem;                                   // [kAttentionKeys][e_dim + 1]: no bank conflicts
  float* values = keys + kAttentionKeys * (e_dim + 1);  // [kAttentionKeys][v_dim]
  float* queries = values + kAttentionKeys * v_dim;     // [kAttentionRowsPerBlock][e_dim], scaled
  const int64_t bh = blockIdx.x, b = bh / s.q_heads, h = bh % s.q_heads;
  const int64_t hk = h / (s.q_heads / s.kv_heads);
  const T* kb = k + b * s.k_strides[0] + hk * s.k_strides[1];
  const T* vb = v + b * s.v_strides[0] + hk * s.v_strides[1];
  const int64_t k_row = s.k_strides[2], v_row = s.v_strides[2];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kAttentionRowsPerBlock, i = row0 + warp;
  const bool active = i < s.q_len;
  float* qi = queries + warp * e_dim;
  if (active) {
    const T* qrow = q + b * s.q_strides[0] + h * s.q_strides[1] + i * s.q_strides[2];
    for (int e = lane; e < e_dim; e += 32) qi[e] = ld(qrow[e]) * s.scale;
  }
  const int64_t mask_row = b * s.mask_strides[0] + h * s.mask_strides[1] + i * s.mask_strides[2];
  float m = -INFINITY, l = 0.f, acc[kAttentionSlots] = {};
  const int64_t last = s.causal ? min(s.kv_len, row0 + kAttentionRowsPerBlock) : s.kv_len;
  for (int64_t j0 = 0; j0 < last; j0 += kAttentionKeys) {
    const int n = static_cast<int>(min(static_cast<int64_t>(kAttentionKeys), last - j0));
    __syncthreads();  // the previous tile is consumed
    for (int t = threadIdx.x; t < n * e_dim; t += blockDim.x) {
      keys[(t / e_dim) * (e_dim + 1) + t % e_dim] = ld(kb[(j0 + t / e_dim) * k_row + t % e_dim]);
    }
    for (int t = threadIdx.x; t < n * v_dim; t += blockDim.x) {
      values[t] = ld(vb[(j0 + t / v_dim) * v_row + t % v_dim]);
    }
    __syncthreads();
    if (!active) continue;
    const int64_t j = j0 + lane;
    float score = -INFINITY;
    if (lane < n && (!s.causal || j <= i)) {
      const float* kj = keys + lane * (e_dim + 1);
      float dot = 0.f;
      for (int e = 0; e < e_dim; ++e) dot += qi[e] * kj[e];
      score = masked<T>(dot, mask, s.mask, mask_row + j * s.mask_strides[3]);
    }
    const float next = fmaxf(m, warp_max(score));
    if (next == -INFINITY) continue;    // nothing attended yet (the same for the whole warp)
    const float keep = expf(m - next);  // 0 while m is -inf
    const float p = score == -INFINITY ? 0.f : expf(score - next);
    l = l * keep + warp_sum(p);
#pragma unroll
    for (int t = 0; t < kAttentionSlots; ++t) acc[t] *= keep;
    for (int jj = 0; jj < n; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
      for (int t = 0; t < kAttentionSlots; ++t) {
        const int e = lane + 32 * t;
        if (e < v_dim) acc[t] += pj * values[jj * v_dim + e];
      }
    }
    m = next;
  }
  if (!active) return;
#pragma unroll
  for (int t = 0; t < kAttentionSlots; ++t) {
    const int e = lane + 32 * t;
    if (e < v_dim) {
      out[b * s.out_strides[0] + h * s.out_strides[1] + i * s.out_strides[2] + e] = st<T>(l > 0.f ? acc[t] / l : 0.f);
    }
  }
}

// Split-key attention: a block takes keys [split * chunk, (split + 1) * chunk) of one query row,
// a warp 32 keys at a time, a lane one key: the lane's dot product with the query (in shared
// memory) reads its key's row whole, so a warp has 32 rows in flight rather than one, and keys the
// mask removes (a static cache's unused positions) are never read. Each warp keeps its own online
// softmax; the block's warps are merged in shared memory into one partial (maximum, sum, weighted
// values) per split, which the last split of the row to finish merges (combine_partials).
constexpr int kSplitWarps = 4;
constexpr int64_t kSplitMinKeys = 128;  // keys a split takes at least
constexpr int kSplitMaxSplits = 64;
constexpr int64_t kSplitTargetBlocks = 2048;  // enough blocks in flight to hide the key rows' latency
constexpr int64_t kSplitDecodeQueries = 8;    // query rows per head that count as decode
constexpr int64_t kSplitLongRows = 256;       // from this many query rows on, only decode shapes split

int attention_splits(const AttentionShape& s) {
  const int64_t rows = s.batch * s.q_heads * s.q_len;
  if (rows == 0 || s.kv_len < 2 * kSplitMinKeys || s.q_len > 65535) return 1;
  // Decode shapes (a few queries per head over a long cache) stay split at any batch: the split kernel skips
  // masked cache positions, the generic one reads every key.
  if (rows >= kSplitLongRows && s.q_len > kSplitDecodeQueries) return 1;
  const int64_t splits =
      std::min<int64_t>({(kSplitTargetBlocks + rows - 1) / rows, s.kv_len / kSplitMinKeys, kSplitMaxSplits});
  return static_cast<int>(std::max<int64_t>(splits, 2));
}

// One element of executorch::rope: x * cos + partner * sin, each product and the sum rounded to T
// as torch computes the pattern (partner: -x[d + half] in the first half, x[d - half] in the second).
template <typename T>
__device__ __forceinline__ T rotated(float x, float partner, float cos, float sin) {
  return st<T>(ld(st<T>(x * cos)) + ld(st<T>(partner * sin)));
}

// Element e of the rotary embedding of the contiguous row x of `dim` elements.
template <typename T>
__device__ float rotated_row(const T* x, const T* cos, const T* sin, int e, int dim) {
  const int half = dim / 2;
  return ld(rotated<T>(ld(x[e]), e < half ? -ld(x[e + half]) : ld(x[e - half]), ld(cos[e]), ld(sin[e])));
}

// The dot product of the (scaled, float) query `qs` with key row `kj`: 16-byte loads where `vector`,
// eight issued before any is used (the row's loads in flight together, not one latency each).
template <typename T>
__device__ float key_dot(const float* qs, const T* __restrict__ kj, int e_dim, bool vector) {
  float dot = 0.f;
  if (vector) {
    constexpr int kVec = 16 / sizeof(T), kBatch = 8;
    for (int e0 = 0; e0 < e_dim; e0 += kVec * kBatch) {
      uint4 bits[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (e0 + u * kVec < e_dim) bits[u] = *reinterpret_cast<const uint4*>(kj + e0 + u * kVec);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (e0 + u * kVec >= e_dim) break;
        const T* x = reinterpret_cast<const T*>(&bits[u]);
#pragma unroll
        for (int t = 0; t < kVec; ++t) dot += qs[e0 + u * kVec + t] * ld(x[t]);
      }
    }
    return dot;
  }
  for (int e = 0; e < e_dim; ++e) dot += qs[e] * ld(kj[e]);
  return dot;
}

// The splits' partials of query row (bh, i) merged into its output, by the block that finishes the
// row last. Warp 0 reads every split's maximum and sum at once (lane p: splits p, p + 32) and leaves
// each split's weight in `weights`; then each thread sums one value column over the splits.
template <typename T>
__device__ void combine_partials(const float* part, float* weights, T* __restrict__ out, const AttentionShape& s,
                                 int64_t bh, int64_t i, int splits) {
  static_assert(kSplitMaxSplits <= 64, "a lane reads two splits' maxima");
  const int v_dim = static_cast<int>(s.value_dim), stride = v_dim + 2;
  const int64_t b = bh / s.q_heads, h = bh % s.q_heads;
  __shared__ float total;
  if (threadIdx.x < 32) {
    const int p0 = threadIdx.x, p1 = threadIdx.x + 32;
    const float m0 = p0 < splits ? __ldcg(part + p0 * stride) : -INFINITY;
    const float m1 = p1 < splits ? __ldcg(part + p1 * stride) : -INFINITY;
    const float l0 = p0 < splits ? __ldcg(part + p0 * stride + 1) : 0.f;
    const float l1 = p1 < splits ? __ldcg(part + p1 * stride + 1) : 0.f;
    const float top = warp_max(fmaxf(m0, m1));
    const float w0 = m0 == -INFINITY ? 0.f : expf(m0 - top), w1 = m1 == -INFINITY ? 0.f : expf(m1 - top);
    if (p0 < splits) weights[p0] = w0;
    if (p1 < splits) weights[p1] = w1;
    const float l = warp_sum(l0 * w0 + l1 * w1);
    if (threadIdx.x == 0) total = l;
  }
  __syncthreads();
  const float l = total;
  for (int e = threadIdx.x; e < v_dim; e += blockDim.x) {
    float sum = 0.f;
#pragma unroll 8
    for (int p = 0; p < splits; ++p) {
      if (weights[p] != 0.f) sum += __ldcg(part + p * stride + 2 + e) * weights[p];
    }
    out[b * s.out_strides[0] + h * s.out_strides[1] + i * s.out_strides[2] + e] = st<T>(l > 0.f ? sum / l : 0.f);
  }
}

// `done` counts, per query row, the splits that have written their partial; the block that brings
// it to `splits` merges them (one launch, not a second kernel's) and sets it back to 0 for the next.
// With a step (step.cos set; one query row), q is rotated as it is read and key/value position p
// is the step's new row, read from shared memory; the block whose keys hold it, of the first query
// head of its key/value head, writes the row into the caches (no block reads it there).
template <typename T>
__global__ void attention_split_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                       const void* __restrict__ mask, float* __restrict__ partials,
                                       unsigned* __restrict__ done, T* __restrict__ out, AttentionShape s, int splits,
                                       AttentionStep<T> step, T* k_cache, T* v_cache) {
  allow_dependents();
  wait_for_prerequisites();  // everything it reads is an earlier kernel's output
  __shared__ float qs[kMaxAttentionHeadDim];
  __shared__ float merged[kSplitWarps][kMaxAttentionHeadDim + 2];  // per warp: m, l, weighted values
  __shared__ float fresh[2][kMaxAttentionHeadDim];                 // a step's new key and value rows
  const int e_dim = static_cast<int>(s.head_dim), v_dim = static_cast<int>(s.value_dim);
  const int64_t bh = blockIdx.x, b = bh / s.q_heads, h = bh % s.q_heads;
  const int64_t hk = h / (s.q_heads / s.kv_heads), i = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t last = s.causal ? min(s.kv_len, i + 1) : s.kv_len;
  const int64_t chunk = (s.kv_len + splits - 1) / splits, begin = blockIdx.z * chunk;
  const int64_t end = min(begin + chunk, last);
  const T* qrow = q + b * s.q_strides[0] + h * s.q_strides[1] + i * s.q_strides[2];
  const T* kb = k + b * s.k_strides[0] + hk * s.k_strides[1];
  const T* vb = v + b * s.v_strides[0] + hk * s.v_strides[1];
  int64_t fresh_at = -1;  // the step's position (none: -1, which no key has)
  if (step.cos != nullptr) {
    fresh_at = step.position_int32 ? static_cast<const int32_t*>(step.position)[0]
                                   : static_cast<const int64_t*>(step.position)[0];
    if (fresh_at < 0) fresh_at += s.kv_len;
    if (fresh_at < 0 || fresh_at >= s.kv_len) {
      if (threadIdx.x == 0 && bh == 0 && blockIdx.z == 0) *step.bad = 1;
      fresh_at = -1;
    }
    const T* krow = step.k + b * step.k_strides[0] + hk * step.k_strides[1];
    const T* vrow = step.v + b * step.v_strides[0] + hk * step.v_strides[1];
    for (int e = threadIdx.x; e < e_dim; e += blockDim.x) {
      qs[e] = rotated_row(qrow, step.cos, step.sin, e, e_dim) * s.scale;
      fresh[0][e] = rotated_row(krow, step.cos, step.sin, e, e_dim);
    }
    for (int e = threadIdx.x; e < v_dim; e += blockDim.x) fresh[1][e] = ld(vrow[e]);
    __syncthreads();
    if (fresh_at >= 0 && fresh_at / chunk == blockIdx.z && h % (s.q_heads / s.kv_heads) == 0) {
      for (int e = threadIdx.x; e < e_dim; e += blockDim.x) {
        k_cache[b * s.k_strides[0] + hk * s.k_strides[1] + fresh_at * s.k_strides[2] + e] = st<T>(fresh[0][e]);
      }
      for (int e = threadIdx.x; e < v_dim; e += blockDim.x) {
        v_cache[b * s.v_strides[0] + hk * s.v_strides[1] + fresh_at * s.v_strides[2] + e] = st<T>(fresh[1][e]);
      }
    }
  }
  const int64_t mask_row = b * s.mask_strides[0] + h * s.mask_strides[1] + i * s.mask_strides[2];
  constexpr int kVec = 16 / sizeof(T);
  const bool vector = reinterpret_cast<uintptr_t>(kb) % 16 == 0 && s.k_strides[2] % kVec == 0 && e_dim % kVec == 0;
  // Values as 16-byte vectors where rows allow: a row's vectors go to `per_row` adjacent lanes (a
  // power of two), so that each lane has its loads from several of the 32 rows in flight at once
  // rather than one element of one row at a time.
  const int per_row = v_dim / kVec;
  const bool v_vector = reinterpret_cast<uintptr_t>(vb) % 16 == 0 && s.v_strides[2] % kVec == 0 && v_dim % kVec == 0 &&
                        per_row > 0 && per_row <= 32 && (per_row & (per_row - 1)) == 0;
  const int col = lane % max(per_row, 1), group = lane / max(per_row, 1), groups = 32 / max(per_row, 1);
  if (step.cos == nullptr) {
    for (int e = threadIdx.x; e < e_dim; e += blockDim.x) qs[e] = ld(qrow[e]) * s.scale;
  }
  __syncthreads();
  constexpr int kAcc = kAttentionSlots > kVec ? kAttentionSlots : kVec;
  float m = -INFINITY, l = 0.f, acc[kAcc] = {};
  // A lane's value vectors of 32 keys are requested with the keys (once the mask has said which
  // rows count) where they fit in registers, rather than after the softmax has weighed them.
  constexpr int kAhead = 16;
  const bool ahead = v_vector && per_row <= kAhead;
  for (int64_t j0 = begin + warp * 32; j0 < end; j0 += kSplitWarps * 32) {
    const int64_t j = j0 + lane;
    const float bias = j < end ? masked<T>(0.f, mask, s.mask, mask_row + j * s.mask_strides[3]) : -INFINITY;
    const unsigned attended = __ballot_sync(0xffffffffu, bias != -INFINITY);
    if (attended == 0) continue;  // the same for the whole warp: the running softmax stays as it is
    uint4 values[kAhead];
    if (ahead) {
#pragma unroll
      for (int t = 0; t < kAhead; ++t) {
        const int r = group + t * groups;
        if (t < per_row && (attended >> r & 1u) && j0 + r != fresh_at) {
          values[t] = *reinterpret_cast<const uint4*>(vb + (j0 + r) * s.v_strides[2] + col * kVec);
        }
      }
    }
    float score = -INFINITY;
    if (bias != -INFINITY) {
      if (j == fresh_at) {
        score = bias;
        for (int e = 0; e < e_dim; ++e) score += qs[e] * fresh[0][e];
      } else {
        score = key_dot(qs, kb + j * s.k_strides[2], e_dim, vector) + bias;
      }
    }
    const float next = fmaxf(m, warp_max(score));
    if (next == -INFINITY) continue;    // nothing attended yet (the same for the whole warp)
    const float keep = expf(m - next);  // 0 while m is -inf
    const float p = score == -INFINITY ? 0.f : expf(score - next);
    l = l * keep + warp_sum(p);
#pragma unroll
    for (int t = 0; t < kAcc; ++t) acc[t] *= keep;
    const int n = static_cast<int>(min(static_cast<int64_t>(32), end - j0));
    if (ahead) {
#pragma unroll
      for (int t = 0; t < kAhead; ++t) {
        const int r = group + t * groups;
        const float pj = t < per_row ? __shfl_sync(0xffffffffu, p, r) : 0.f;
        if (pj == 0.f) continue;
        if (j0 + r == fresh_at) {
#pragma unroll
          for (int u = 0; u < kVec; ++u) acc[u] += pj * fresh[1][col * kVec + u];
        } else {
          const T* x = reinterpret_cast<const T*>(&values[t]);
#pragma unroll
          for (int u = 0; u < kVec; ++u) acc[u] += pj * ld(x[u]);
        }
      }
    } else if (v_vector) {
#pragma unroll 8
      for (int t = 0; t < per_row; ++t) {
        const int r = group + t * groups;
        const float pj = __shfl_sync(0xffffffffu, p, r);
        if (r < n && pj != 0.f && j0 + r == fresh_at) {
#pragma unroll
          for (int u = 0; u < kVec; ++u) acc[u] += pj * fresh[1][col * kVec + u];
        } else if (r < n && pj != 0.f) {
          const uint4 bits = *reinterpret_cast<const uint4*>(vb + (j0 + r) * s.v_strides[2] + col * kVec);
          const T* x = reinterpret_cast<const T*>(&bits);
#pragma unroll
          for (int u = 0; u < kVec; ++u) acc[u] += pj * ld(x[u]);
        }
      }
    } else {
#pragma unroll 4
      for (int jj = 0; jj < n; ++jj) {
        const float pj = __shfl_sync(0xffffffffu, p, jj);
        if (pj == 0.f) continue;  // masked: the same for the whole warp
        const T* vj = vb + (j0 + jj) * s.v_strides[2];
        const bool new_row = j0 + jj == fresh_at;
#pragma unroll
        for (int t = 0; t < kAttentionSlots; ++t) {
          const int e = lane + 32 * t;
          if (e < v_dim) acc[t] += pj * (new_row ? fresh[1][e] : ld(vj[e]));
        }
      }
    }
    m = next;
  }
  if (lane == 0) merged[warp][0] = m, merged[warp][1] = l;
  if (v_vector) {  // the groups' sums of each column, into the lanes of group 0
#pragma unroll
    for (int u = 0; u < kVec; ++u) {
      for (int o = per_row; o < 32; o *= 2) acc[u] += __shfl_xor_sync(0xffffffffu, acc[u], o);
      if (group == 0) merged[warp][2 + col * kVec + u] = acc[u];
    }
  } else {
#pragma unroll
    for (int t = 0; t < kAttentionSlots; ++t) {
      const int e = lane + 32 * t;
      if (e < v_dim) merged[warp][2 + e] = acc[t];
    }
  }
  __syncthreads();
  float top = -INFINITY;
  for (int w = 0; w < kSplitWarps; ++w) top = fmaxf(top, merged[w][0]);
  float* part = partials + ((bh * s.q_len + i) * splits + blockIdx.z) * (v_dim + 2);
  for (int e = threadIdx.x; e < v_dim + 2; e += blockDim.x) {
    float sum = 0.f;
    for (int w = 0; w < kSplitWarps; ++w) {
      if (merged[w][0] != -INFINITY) sum += merged[w][e] * expf(merged[w][0] - top);
    }
    part[e] = e == 0 ? top : sum;  // the maximum, then the sum of weights and the weighted values
  }
  // Publish the partial, then count it; the last block of the row sees every other's (fenced before
  // they counted) and reads them from L2 (__ldcg: not this block's L1).
  __shared__ bool finishes;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* counter = done + bh * s.q_len + i;
    finishes = atomicAdd(counter, 1u) == static_cast<unsigned>(splits - 1);
    if (finishes) *counter = 0;  // no other block of this launch touches it again
  }
  __syncthreads();
  if (!finishes) return;
  __threadfence();
  __shared__ float weights[kSplitMaxSplits];
  combine_partials(partials + (bh * s.q_len + i) * splits * (v_dim + 2), weights, out, s, bh, i, splits);
}

// Attention on tensor cores (float16, and bfloat16 from sm_80), for head and value sizes that are
// multiples of 16: a block takes kTcRows query rows of one head, a warp 16 of them. Per tile of
// kTcKeys keys, each warp multiplies its queries by the keys (WMMA, float accumulators), applies the
// scale, masks and online softmax in float32 (two lanes a row), and multiplies the probabilities,
// rounded to T, by the values into its output rows, which stay in shared memory in float32.
constexpr int kTcRows = 64, kTcKeys = 32, kTcWarps = kTcRows / 16;
constexpr int kTcPad = 8;  // elements added to each shared row: spreads rows over the banks

struct TcLayout {
  int q_ld, kv_ld, v_ld, s_ld, o_ld;  // leading dimensions, elements
  size_t q, k, v, s, o, bytes;        // byte offsets into shared memory, and its size
};

__host__ __device__ inline TcLayout tc_layout(int e_dim, int v_dim, int element_size) {
  TcLayout l;
  l.q_ld = e_dim + kTcPad, l.kv_ld = e_dim + kTcPad, l.v_ld = v_dim + kTcPad;
  l.s_ld = kTcKeys + 4, l.o_ld = v_dim + 4;  // float rows: 16-byte multiples, as WMMA requires
  l.q = 0;
  l.k = l.q + size_t(kTcRows) * l.q_ld * element_size;
  l.v = l.k + size_t(kTcKeys) * l.kv_ld * element_size;
  l.s = l.v + size_t(kTcKeys) * l.v_ld * element_size;
  l.o = l.s + size_t(kTcWarps) * 16 * l.s_ld * sizeof(float);
  l.bytes = l.o + size_t(kTcWarps) * 16 * l.o_ld * sizeof(float);
  return l;
}

// rows x cols elements from src (row stride `stride`) into dst (row stride `ld`), rows at and past
// `valid` zero: whole 16-byte vectors where src allows, else element by element.
template <typename T>
__device__ void tc_load_rows(T* dst, int ld, const T* src, int64_t stride, int rows, int64_t valid, int cols) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vector = (reinterpret_cast<uintptr_t>(src) % 16 == 0) && stride % kVec == 0 && cols % kVec == 0;
  if (vector) {
    const int per_row = cols / kVec;
    for (int t = threadIdx.x; t < rows * per_row; t += blockDim.x) {
      const int r = t / per_row, c = (t % per_row) * kVec;
      uint4 bits = make_uint4(0, 0, 0, 0);
      if (r < valid) bits = *reinterpret_cast<const uint4*>(src + r * stride + c);
      *reinterpret_cast<uint4*>(dst + r * ld + c) = bits;
    }
    return;
  }
  for (int t = threadIdx.x; t < rows * cols; t += blockDim.x) {
    const int r = t / cols, c = t % cols;
    dst[r * ld + c] = r < valid ? src[r * stride + c] : st<T>(0.f);
  }
}

// Whether the mask keeps any key of tile [row0, row0 + kTcRows) x [j0, j0 + kTcKeys) of head (b, h); this
// thread's share of the tile.
template <typename T>
__device__ bool tc_tile_kept(const void* __restrict__ mask, const AttentionShape& s, int64_t b, int64_t h, int64_t row0,
                             int64_t j0) {
  for (int t = threadIdx.x; t < kTcRows * kTcKeys; t += blockDim.x) {
    const int64_t i = row0 + t / kTcKeys, j = j0 + t % kTcKeys;
    if (i >= s.q_len || j >= s.kv_len || (s.causal && j > i)) continue;
    const int64_t at = b * s.mask_strides[0] + h * s.mask_strides[1] + i * s.mask_strides[2] + j * s.mask_strides[3];
    if (masked<T>(0.f, mask, s.mask, at) != -INFINITY) return true;
  }
  return false;
}

template <typename T>
__device__ void attention_tc(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                             const void* __restrict__ mask, T* __restrict__ out, const AttentionShape& s) {
  namespace wmma = nvcuda::wmma;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  const int e_dim = static_cast<int>(s.head_dim), v_dim = static_cast<int>(s.value_dim);
  const TcLayout L = tc_layout(e_dim, v_dim, sizeof(T));
  T* qs = reinterpret_cast<T*>(tc_smem + L.q);
  T* ks = reinterpret_cast<T*>(tc_smem + L.k);
  T* vs = reinterpret_cast<T*>(tc_smem + L.v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* ss = reinterpret_cast<float*>(tc_smem + L.s) + warp * 16 * L.s_ld;
  T* ps = reinterpret_cast<T*>(ss);  // the probabilities overwrite the scores they come from
  const int p_ld = 2 * L.s_ld;       // T elements of a score row
  float* os = reinterpret_cast<float*>(tc_smem + L.o) + warp * 16 * L.o_ld;

  const int64_t bh = blockIdx.x, b = bh / s.q_heads, h = bh % s.q_heads;
  const int64_t hk = h / (s.q_heads / s.kv_heads);
  const T* kb = k + b * s.k_strides[0] + hk * s.k_strides[1];
  const T* vb = v + b * s.v_strides[0] + hk * s.v_strides[1];
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTcRows;
  tc_load_rows(qs, L.q_ld, q + b * s.q_strides[0] + h * s.q_strides[1] + row0 * s.q_strides[2], s.q_strides[2], kTcRows,
               s.q_len - row0, e_dim);
  for (int t = lane; t < 16 * L.o_ld; t += 32) os[t] = 0.f;

  // Two lanes a row: lane / 2 is the row, lane % 2 the half of the tile's keys (and of the output).
  const int r = lane / 2, half = lane % 2;
  const int64_t i = row0 + warp * 16 + r;
  const bool row_valid = i < s.q_len;
  const int64_t mask_row = b * s.mask_strides[0] + h * s.mask_strides[1] + i * s.mask_strides[2];
  float m = -INFINITY, l = 0.f;
  const int64_t last = s.causal ? min(s.kv_len, row0 + kTcRows) : s.kv_len;
  for (int64_t j0 = 0; j0 < last; j0 += kTcKeys) {
    // A tile the mask removes for every row of the block changes nothing: skipped unread (a static
    // cache's unused positions, the keys after a causal chunk).
    if (s.mask != AttentionMask::None && !__syncthreads_or(tc_tile_kept<T>(mask, s, b, h, row0, j0))) continue;
    __syncthreads();  // the previous tile is consumed (and, the first time, the queries are in)
    tc_load_rows(ks, L.kv_ld, kb + j0 * s.k_strides[2], s.k_strides[2], kTcKeys, s.kv_len - j0, e_dim);
    tc_load_rows(vs, L.v_ld, vb + j0 * s.v_strides[2], s.v_strides[2], kTcKeys, s.kv_len - j0, v_dim);
    __syncthreads();
    // scores = queries (16 x e_dim) x keys^T (e_dim x kTcKeys)
    for (int n = 0; n < kTcKeys / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
      for (int e = 0; e < e_dim; e += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> bt;
        wmma::load_matrix_sync(a, qs + warp * 16 * L.q_ld + e, L.q_ld);
        wmma::load_matrix_sync(bt, ks + n * 16 * L.kv_ld + e, L.kv_ld);
        wmma::mma_sync(acc, a, bt, acc);
      }
      wmma::store_matrix_sync(ss + n * 16, acc, L.s_ld, wmma::mem_row_major);
    }
    __syncwarp();
    constexpr int kHalf = kTcKeys / 2;
    float p[kHalf];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kHalf; ++c) {
      const int64_t j = j0 + half * kHalf + c;
      float score = ss[r * L.s_ld + half * kHalf + c] * s.scale;
      if (!row_valid || j >= s.kv_len || (s.causal && j > i)) {
        score = -INFINITY;
      } else {
        score = masked<T>(score, mask, s.mask, mask_row + j * s.mask_strides[3]);
      }
      p[c] = score;
      tile_max = fmaxf(tile_max, score);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float next = fmaxf(m, tile_max);
    const float keep = next == -INFINITY ? 1.f : expf(m - next);  // 0 while m is -inf
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < kHalf; ++c) {
      p[c] = p[c] == -INFINITY ? 0.f : expf(p[c] - next);
      sum += p[c];
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * keep + sum;
    m = next;
    __syncwarp();  // every score is read before the probabilities overwrite them
#pragma unroll
    for (int c = 0; c < kHalf; ++c) ps[r * p_ld + half * kHalf + c] = st<T>(p[c]);
    for (int c = half; c < v_dim; c += 2) os[r * L.o_ld + c] *= keep;
    __syncwarp();
    // output rows += probabilities (16 x kTcKeys) x values (kTcKeys x v_dim)
    for (int n = 0; n < v_dim; n += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, os + n, L.o_ld, wmma::mem_row_major);
      for (int kk = 0; kk < kTcKeys; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bv;
        wmma::load_matrix_sync(a, ps + kk, p_ld);
        wmma::load_matrix_sync(bv, vs + kk * L.v_ld + n, L.v_ld);
        wmma::mma_sync(acc, a, bv, acc);
      }
      wmma::store_matrix_sync(os + n, acc, L.o_ld, wmma::mem_row_major);
    }
    __syncwarp();
  }
  if (!row_valid) return;
  T* orow = out + b * s.out_strides[0] + h * s.out_strides[1] + i * s.out_strides[2];
  for (int c = half; c < v_dim; c += 2) orow[c] = st<T>(l > 0.f ? os[r * L.o_ld + c] / l : 0.f);
}

template <typename T>
__global__ void __launch_bounds__(kTcWarps * 32)
    attention_tc_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                        const void* __restrict__ mask, T* __restrict__ out, AttentionShape s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    __trap();  // bfloat16 tensor cores start at sm_80; launch_attention does not launch this here
  } else
#endif
  {
    attention_tc(q, k, v, mask, out, s);
  }
}

// Rows of up to kThreads * kNormCached elements stay in registers between the passes.
constexpr int kNormCached = 8;

// One row of a block-per-row normalization: loaded once (into registers where it fits), then
// walked by each pass in the same order, so every norm sums alike.
template <typename T>
struct NormRow {
  const T* x;
  int64_t cols;
  bool cached;
  float cache[kNormCached];

  __device__ NormRow(const T* row, int64_t n) : x(row), cols(n), cached(n <= int64_t{kNormCached} * blockDim.x) {
    if (!cached) return;
#pragma unroll
    for (int t = 0; t < kNormCached; ++t) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(t) * blockDim.x;
      cache[t] = j < cols ? ld(x[j]) : 0.f;
    }
  }

  // f(j, x[j]) for each of this thread's columns j.
  template <typename F>
  __device__ void each(F f) const {
    if (cached) {
#pragma unroll
      for (int t = 0; t < kNormCached; ++t) {
        const int64_t j = threadIdx.x + static_cast<int64_t>(t) * blockDim.x;
        if (j < cols) f(j, cache[t]);
      }
    } else {
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) f(j, ld(x[j]));
    }
  }
};

template <typename T>
__global__ void layer_norm_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, float eps,
                                  T* __restrict__ y, T* __restrict__ mean, T* __restrict__ rstd, int64_t cols) {
  __shared__ float shared[kThreads];
  const int64_t row = blockIdx.x;
  const NormRow<T> r(x + row * cols, cols);
  float sum = 0.f, sq = 0.f;
  r.each([&](int64_t, float v) { sum += v; });
  const float mu = block_sum(sum, shared) / static_cast<float>(cols);
  r.each([&](int64_t, float v) { sq += (v - mu) * (v - mu); });
  const float rs = rsqrtf(block_sum(sq, shared) / static_cast<float>(cols) + eps);
  r.each([&](int64_t j, float xv) {
    float v = (xv - mu) * rs;
    if (w) v *= ld(w[j]);
    if (b) v += ld(b[j]);
    y[row * cols + j] = st<T>(v);
  });
  if (threadIdx.x == 0) {
    if (mean) mean[row] = st<T>(mu);
    if (rstd) rstd[row] = st<T>(rs);
  }
}

// RMS norm (executorch::rms_norm): a block per row, the row in registers where it fits.
template <typename T>
__global__ void rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ w, float eps, T* __restrict__ y,
                                int64_t cols) {
  allow_dependents();
  __shared__ float shared[kThreads];
  const int64_t row = blockIdx.x;
  const NormRow<T> r(x + row * cols, cols);
  float sq = 0.f;
  r.each([&](int64_t, float v) { sq += v * v; });
  const float rs = rsqrtf(block_sum(sq, shared) / static_cast<float>(cols) + eps);
  // The normalized value rounded to T, then times the weight in T's arithmetic (as torch's).
  r.each([&](int64_t j, float xv) { y[row * cols + j] = st<T>(ld(w[j]) * ld(st<T>(xv * rs))); });
}

template <typename T>
struct CopyBody {
  using Value = T;
  const T* in;
  T* out;
  template <typename Index>
  __device__ T load(const Index* off) const {
    return in[off[0]];
  }
};

// Rotary embedding (executorch::rope): operands x, cos, sin and the element's position in the last
// dimension (an operand of stride 1 there, 0 elsewhere); the partner of element d is d + half
// (negated) or d - half, `step` elements of x apart per position.
template <typename T>
struct RopeBody {
  using Value = T;
  const T* x;
  const T* cos;
  const T* sin;
  T* out;
  int64_t half, step;
  template <typename Index>
  __device__ T load(const Index* off) const {
    const int64_t d = static_cast<int64_t>(off[3]);
    const float partner = d < half ? -ld(x[off[0] + half * step]) : ld(x[off[0] - half * step]);
    return rotated<T>(ld(x[off[0]]), partner, ld(cos[off[1]]), ld(sin[off[2]]));
  }
};

// Rope whose output only an index_put reads (a key written into a static cache): each element goes
// straight to the cache position the indices name.
template <typename T, typename Index>
__global__ void rope_put_kernel(Offsets<Index, 4> s, int64_t n, RopeBody<T> body, IndexGather g, int* bad) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Index off[4];
  offsets_of(static_cast<Index>(i), s, off);
  int64_t target;
  if (indexed_source(g, i, &target, bad)) body.out[target] = body.load(off);
}

// 16 bytes moved as one element.
struct alignas(16) Bytes16 {
  uint4 v;
};

template <typename T>
cudaError_t copy_as(const void* in, void* out, int dim, const int64_t* sizes, const int64_t* const* strides, int64_t n,
                    cudaStream_t stream) {
  return launch_elementwise<1>(dim, sizes, strides, n, CopyBody<T>{static_cast<const T*>(in), static_cast<T*>(out)},
                               stream);
}

struct PadShape {
  int dim;
  int64_t out_sizes[kMaxOpDims], in_sizes[kMaxOpDims], in_strides[kMaxOpDims], before[kMaxOpDims];
};

// out[i] = the input element at out's coordinates less `before`, or `value` outside the input.
template <typename T>
__global__ void constant_pad_kernel(const T* __restrict__ in, T* __restrict__ out, PadShape s, float value, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t rem = i, off = 0;
  bool inside = true;
  for (int d = s.dim - 1; d >= 0; --d) {
    const int64_t c = rem % s.out_sizes[d] - s.before[d];
    rem /= s.out_sizes[d];
    inside = inside && c >= 0 && c < s.in_sizes[d];
    off += c * s.in_strides[d];
  }
  out[i] = inside ? in[off] : st<T>(value);
}

template <typename T>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ col, int64_t images, int64_t image_stride,
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
  col[i] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[(c * h + iy) * w + ix] : st<T>(0.f);
}

// Convolution result i of output channel `channel`, finished as Epilogue says.
template <typename T>
__device__ __forceinline__ float finish(float v, int64_t i, int64_t channel, const Epilogue<T>& e) {
  if (e.bias) v += ld(e.bias[channel]);
  if (e.residual) v += ld(e.residual[i]);
  return e.activate ? apply(e.activation, v, e.p0, e.p1) : v;
}

// One output element of a depthwise convolution (one input channel per group, `mult` outputs per
// channel): the kh x kw stencil over its input plane, then the epilogue; float32 accumulation.
template <typename T>
__global__ void depthwise_conv_kernel(const T* __restrict__ x, const T* __restrict__ wt, T* y, ConvShape s,
                                      Epilogue<T> e, int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  // Output channel o of pixel (oy, ox) of image b; its input channel's pixels lie `step` apart.
  const int64_t o = s.channels_last ? i % s.oc : i / (s.ow * s.oh) % s.oc;
  const int64_t pixel = s.channels_last ? i / s.oc : i % (s.ow * s.oh) + i / (s.ow * s.oh * s.oc) * s.ow * s.oh;
  const int64_t ox = pixel % s.ow, oy = pixel / s.ow % s.oh, b = pixel / (s.ow * s.oh);
  const int64_t ci = o / (s.oc / s.c), step = s.channels_last ? s.c : 1;
  const T* xp = s.channels_last ? x + b * s.h * s.w * s.c + ci : x + (b * s.c + ci) * s.h * s.w;
  const T* wp = wt + o * s.kh * s.kw;
  float acc = 0.f;
  for (int64_t ky = 0; ky < s.kh; ++ky) {
    const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
    if (iy < 0 || iy >= s.h) continue;
    for (int64_t kx = 0; kx < s.kw; ++kx) {
      const int64_t ix = ox * s.sw - s.pw + kx * s.dw;
      if (ix >= 0 && ix < s.w) acc += ld(xp[(iy * s.w + ix) * step]) * ld(wp[ky * s.kw + kx]);
    }
  }
  y[i] = st<T>(finish(acc, i, o, e));
}

// floor(v) (v >= 0) as an index below `size`.
__device__ __forceinline__ int64_t clip_index(float v, int64_t size) {
  const int64_t i = static_cast<int64_t>(v);
  return i < size ? i : size - 1;
}

// Bilinear (or nearest) resampling of planes of h x w into oh x ow; source coordinates per output
// row and column: src = scale * (o + offset) - offset, clipped at 0 (offset 0.5 unless align_corners).
template <typename T>
__global__ void upsample2d_kernel(const T* __restrict__ x, T* __restrict__ y, Upsample s, int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t ox = i % s.ow, oy = i / s.ow % s.oh, plane = i / (s.ow * s.oh);
  const T* xp = x + plane * s.h * s.w;
  if (!s.bilinear) {
    const int64_t iy = clip_index(floorf(oy * s.scale_h), s.h), ix = clip_index(floorf(ox * s.scale_w), s.w);
    y[i] = xp[iy * s.w + ix];
    return;
  }
  const float off = s.align_corners ? 0.f : 0.5f;
  const float sy = fmaxf(s.scale_h * (oy + off) - off, 0.f), sx = fmaxf(s.scale_w * (ox + off) - off, 0.f);
  const int64_t y0 = clip_index(sy, s.h), x0 = clip_index(sx, s.w);
  const int64_t y1 = y0 + 1 < s.h ? y0 + 1 : y0, x1 = x0 + 1 < s.w ? x0 + 1 : x0;
  const float ly = sy - y0, lx = sx - x0;
  y[i] = st<T>((1.f - ly) * ((1.f - lx) * ld(xp[y0 * s.w + x0]) + lx * ld(xp[y0 * s.w + x1])) +
               ly * ((1.f - lx) * ld(xp[y1 * s.w + x0]) + lx * ld(xp[y1 * s.w + x1])));
}

template <typename T>
__global__ void channel_affine_kernel(const T* __restrict__ x, const float* __restrict__ scale,
                                      const float* __restrict__ shift, T* __restrict__ y, int64_t c, int64_t inner,
                                      int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t ch = (i / inner) % c;
  y[i] = st<T>(ld(x[i]) * scale[ch] + shift[ch]);
}

// x and y may be the same tensor: each element is read, then written, by one thread.
template <typename T>
__global__ void epilogue_kernel(const T* x, T* y, int64_t channels, int64_t inner, Epilogue<T> e, int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) y[i] = st<T>(finish(ld(x[i]), i, (i / inner) % channels, e));
}

template <typename T>
__global__ void pool2d_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t* __restrict__ indices, bool is_max,
                              int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t sh,
                              int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, bool include_pad,
                              int64_t channels_last, int64_t total, bool adaptive) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  // y[i] is output pixel (oy, ox) of `plane` (NCHW: an image's channel; NHWC: an image, channel
  // i % c); the input pixels it reads lie `step` elements apart from xp.
  const int64_t c = channels_last ? channels_last : 1, pixel = i / c;
  const int64_t plane = pixel / (oh * ow), oy = (pixel / ow) % oh, ox = pixel % ow;
  const T* xp = channels_last ? x + plane * h * w * c + i % c : x + plane * h * w;
  const int64_t step = c;
  if (is_max) {
    float best = -INFINITY;
    int64_t best_i = -1;
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * sh - ph + ky * dh;
      if (iy < 0 || iy >= h) continue;
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int64_t ix = ox * sw - pw + kx * dw;
        if (ix < 0 || ix >= w) continue;
        const float v = ld(xp[(iy * w + ix) * step]);
        if (best_i < 0 || v > best || v != v) best = v, best_i = iy * w + ix;
      }
    }
    y[i] = st<T>(best);
    if (indices) indices[i] = best_i;
    return;
  }
  // Adaptive windows: [floor(o * in / out), ceil((o + 1) * in / out)), as torch's.
  const int64_t y0 = adaptive ? oy * h / oh : oy * sh - ph, x0 = adaptive ? ox * w / ow : ox * sw - pw;
  const int64_t y1 = adaptive ? ((oy + 1) * h + oh - 1) / oh : min(y0 + kh, h + ph);
  const int64_t x1 = adaptive ? ((ox + 1) * w + ow - 1) / ow : min(x0 + kw, w + pw);
  const int64_t padded = (y1 - y0) * (x1 - x0);
  const int64_t ya = max(y0, int64_t{0}), xa = max(x0, int64_t{0}), yb = min(y1, h), xb = min(x1, w);
  float sum = 0.f;
  for (int64_t iy = ya; iy < yb; ++iy)
    for (int64_t ix = xa; ix < xb; ++ix) sum += ld(xp[(iy * w + ix) * step]);
  const int64_t count = include_pad ? padded : (yb - ya) * (xb - xa);
  y[i] = st<T>(count > 0 ? sum / static_cast<float>(count) : 0.f);
}

template <typename T>
__global__ void row_reduce_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t cols, bool mean) {
  __shared__ float shared[kThreads];
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += ld(xr[j]);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) y[blockIdx.x] = st<T>(mean ? sum / static_cast<float>(cols) : sum);
}

// Channel sums of NHWC images over their pixels, in two passes: each block sums kSegmentPixels
// pixels of 32 channels of one image into `partial` (float, [image][segment][channel]), then one
// thread per (image, channel) adds its segments. Every pass reads 32 adjacent channels at once.
constexpr int64_t kSegmentPixels = 256;
constexpr int kPixelLanes = 8;

template <typename T>
__global__ void pixel_partial_kernel(const T* __restrict__ x, float* __restrict__ partial, int64_t hw, int64_t c,
                                     int64_t segments) {
  __shared__ float sums[kPixelLanes][32];
  const int64_t ch = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x, seg = blockIdx.y, image = blockIdx.z;
  float sum = 0.f;
  if (ch < c) {
    const T* base = x + image * hw * c + ch;
    const int64_t end = min(hw, (seg + 1) * kSegmentPixels);
    for (int64_t p = seg * kSegmentPixels + threadIdx.y; p < end; p += kPixelLanes) sum += ld(base[p * c]);
  }
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || ch >= c) return;
  for (int k = 1; k < kPixelLanes; ++k) sum += sums[k][threadIdx.x];
  partial[(image * segments + seg) * c + ch] = sum;
}

template <typename T>
__global__ void pixel_total_kernel(const float* __restrict__ partial, T* __restrict__ y, int64_t c, int64_t segments,
                                   float scale, int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t image = i / c, ch = i % c;
  float sum = 0.f;
  for (int64_t seg = 0; seg < segments; ++seg) sum += partial[(image * segments + seg) * c + ch];
  y[i] = st<T>(sum * scale);
}

}  // namespace

int64_t pixel_reduce_partials(int64_t images, int64_t hw, int64_t c) {
  return images * ((hw + kSegmentPixels - 1) / kSegmentPixels) * c;
}

template <typename T>
cudaError_t launch_pixel_reduce(const T* x, T* y, float* partial, int64_t images, int64_t hw, int64_t c, bool mean,
                                cudaStream_t stream) {
  const int64_t segments = (hw + kSegmentPixels - 1) / kSegmentPixels, total = images * c;
  if (total == 0) return cudaSuccess;
  if (hw == 0 || segments > 65535 || images > 65535) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>((c + 31) / 32), static_cast<unsigned>(segments), static_cast<unsigned>(images));
  pixel_partial_kernel<<<grid, dim3(32, kPixelLanes), 0, stream>>>(x, partial, hw, c, segments);
  pixel_total_kernel<<<blocks_for(total), kThreads, 0, stream>>>(partial, y, c, segments,
                                                                 mean ? 1.f / static_cast<float>(hw) : 1.f, total);
  return cudaGetLastError();
}

namespace {

// Integer compares, elementwise ops, running sums, argmax and gather.
__global__ void compare_integer_kernel(Compare op, const void* __restrict__ x, ElementType type, bool integral_scalar,
                                       int64_t integer, double real, bool* __restrict__ out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t a = load_integer(x, type, i);
  // Against a fractional number, as doubles (exact for every integer of up to 53 bits).
  out[i] = holds(op, integral_scalar ? ordering(a, integer) : ordering(static_cast<double>(a), real));
}

// Tensor against tensor, in the operands' own type (exact for int64), halves compared as floats.
template <typename T>
__device__ T comparable(T v) {
  return v;
}
__device__ float comparable(__half v) { return ld(v); }
__device__ float comparable(__nv_bfloat16 v) { return ld(v); }

struct CompareTest {
  Compare op;
  template <typename T>
  __device__ bool operator()(T x, T y) const {
    return holds(op, ordering(comparable(x), comparable(y)));
  }
};

__global__ void cumsum_kernel(const void* __restrict__ x, ElementType x_type, void* __restrict__ out,
                              ElementType out_type, int64_t size, int64_t inner, int64_t lines) {
  const int64_t line = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (line >= lines) return;
  const int64_t base = line / inner * size * inner + line % inner;
  const bool from_integer = integral(x_type), to_integer = integral(out_type);
  int64_t whole = 0;
  float real = 0.f;
  for (int64_t k = 0; k < size; ++k) {
    const int64_t i = base + k * inner;
    if (to_integer) {
      whole += from_integer ? load_integer(x, x_type, i) : static_cast<int64_t>(load_float(x, x_type, i));
    } else {
      real += from_integer ? static_cast<float>(load_integer(x, x_type, i)) : load_float(x, x_type, i);
    }
    store_converted(out, out_type, i, to_integer, whole, real);
  }
}

// Whether value v at index i beats the best so far (NaN first, then larger, then the lower index).
template <typename V>
__device__ bool beats(V v, long long i, V best, long long at) {
  if (at < 0) return true;
  if (v != v) return !(best != best) || i < at;
  if (best != best) return false;
  return v > best || (v == best && i < at);
}

template <typename V>
__global__ void row_argmax_kernel(const void* __restrict__ x, ElementType type, int64_t* __restrict__ out, int64_t rows,
                                  int64_t cols) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps: every lane of a warp has the same row
  V best = 0;
  long long at = -1;
  for (int64_t c = lane; c < cols; c += 32) {
    const V v = integral(type) ? static_cast<V>(load_integer(x, type, row * cols + c))
                               : static_cast<V>(load_float(x, type, row * cols + c));
    if (beats(v, c, best, at)) best = v, at = c;
  }
  for (int o = 16; o > 0; o /= 2) {
    const V v = __shfl_down_sync(0xffffffffu, best, o);
    const long long i = __shfl_down_sync(0xffffffffu, at, o);
    if (i >= 0 && beats(v, i, best, at)) best = v, at = i;
  }
  if (lane == 0) out[row] = at < 0 ? 0 : at;
}

template <typename E>
__global__ void gather_kernel(const E* __restrict__ self, const void* __restrict__ index, bool int32_index,
                              E* __restrict__ out, GatherShape g, int64_t n, int* bad) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t k = int32_index ? static_cast<const int32_t*>(index)[i] : static_cast<const int64_t*>(index)[i];
  if (k < 0 || k >= g.self_size) {
    out[i] = E{};
    atomicExch(bad, 1);
    return;
  }
  int64_t rest = i, offset = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t c = rest % g.sizes[d];
    rest /= g.sizes[d];
    offset += (d == g.dim ? k : c) * g.self_strides[d];
  }
  out[i] = self[offset];
}

// The cell arithmetic of one unit (docs/program_format.md), in float32, from its input and hidden
// gate pre-activations xg and hg (i, f, g, o or r, z, n): returns the new hidden state. `state` is
// an LSTM's previous cell (its new one goes to *cell) or a GRU's previous hidden state.
__device__ __forceinline__ float recurrent_unit(bool lstm, const float* xg, const float* hg, float state, float* cell) {
  auto sigmoid = [](float v) { return 1.f / (1.f + expf(-v)); };
  if (lstm) {
    const float c = sigmoid(xg[1] + hg[1]) * state + sigmoid(xg[0] + hg[0]) * tanhf(xg[2] + hg[2]);
    *cell = c;
    return sigmoid(xg[3] + hg[3]) * tanhf(c);
  }
  const float z = sigmoid(xg[1] + hg[1]), n = tanhf(xg[2] + sigmoid(xg[0] + hg[0]) * hg[2]);
  return (1.f - z) * n + z * state;
}

// One thread per (row, unit) of a recurrent cell; gate pre-activations summed in float32.
template <typename T>
__global__ void recurrent_cell_kernel(bool lstm, const T* xg, const T* hg, const T* state, T* h_out, T* c_out,
                                      int64_t width, int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t b = i / width, j = i - b * width;
  const int gates = lstm ? 4 : 3;
  float x[4] = {}, y[4] = {}, c = 0.f;
  for (int g = 0; g < gates; ++g) {
    x[g] = ld(xg[(b * gates + g) * width + j]);
    y[g] = ld(hg[(b * gates + g) * width + j]);
  }
  h_out[i] = st<T>(recurrent_unit(lstm, x, y, ld(state[i]), &c));
  if (lstm) c_out[i] = st<T>(c);
}

// Every step of a small recurrent layer in one block: a thread per (row, unit) keeps its cell in a
// register, W_hh sits in shared memory transposed ([k][G * units]: a warp's units read adjacent
// words), and the hidden state in two shared buffers, one read and one written per step.
template <typename T>
__global__ void __launch_bounds__(1024) recurrent_small_kernel(RecurrentLayer<T> p) {
  extern __shared__ float shared[];
  const int gates = p.lstm ? 4 : 3;
  const int units = static_cast<int>(p.units), items = static_cast<int>(p.rows * p.units), width = gates * units;
  float* wt = shared;                     // [units][width]
  float* h_buf = shared + units * width;  // [2][items]
  for (int i = threadIdx.x; i < width * units; i += blockDim.x) {
    const int row = i / units, k = i - row * units;
    wt[k * width + row] = ld(p.weight[i]);
  }
  for (int i = threadIdx.x; i < items; i += blockDim.x) h_buf[i] = ld(p.h0[i]);
  const int item = threadIdx.x;
  const bool active = item < items;
  const int b = active ? item / units : 0, j = active ? item - b * units : 0;
  float c = active && p.lstm ? ld(p.c0[item]) : 0.f, bias[4] = {};
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    if (g < gates && active && p.bias != nullptr) bias[g] = ld(p.bias[g * units + j]);
  }
  T out = st<T>(0.f);
  __syncthreads();
  for (int64_t s = 0; s < p.steps; ++s) {
    const int64_t t = p.reverse ? p.steps - 1 - s : s;
    const float* h = h_buf + (s & 1) * items;
    if (active) {
      const T* x = p.gates + (t * p.rows + b) * width + j;
      float xg[4], acc[4] = {};
#pragma unroll
      for (int g = 0; g < 4; ++g) xg[g] = g < gates ? ld(x[g * units]) : 0.f;
      const float* hb = h + b * units;
      for (int k = 0; k < units; ++k) {
        const float hk = hb[k];
        const float* w = wt + k * width + j;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
          if (g < gates) acc[g] += hk * w[g * units];
        }
      }
      float hg[4], next = 0.f;
#pragma unroll
      for (int g = 0; g < 4; ++g) hg[g] = ld(st<T>(acc[g] + bias[g]));  // rounded as a matrix product's output
      out = st<T>(recurrent_unit(p.lstm, xg, hg, p.lstm ? c : hb[j], &next));
      if (p.lstm) c = ld(st<T>(next));  // the cell is kept as the tensors' dtype holds it
      h_buf[((s + 1) & 1) * items + item] = ld(out);
      p.y[t * items + item] = out;
    }
    __syncthreads();
  }
  if (active) {
    p.h_n[item] = out;
    if (p.lstm) p.c_n[item] = st<T>(c);
  }
}

// Steps [first, first + count) of a recurrent layer: one warp per (row, unit), its lanes splitting
// the hidden gates' dot products; lane 0 applies the cell. Between steps (count > 1: one block
// runs them all) a block barrier makes each step's hidden state visible to the next.
template <typename T>
__global__ void __launch_bounds__(1024) recurrent_layer_kernel(RecurrentLayer<T> p, int64_t first, int64_t count) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  const int gates = p.lstm ? 4 : 3;
  const int64_t units = p.units, items = p.rows * units;
  for (int64_t s = first; s < first + count; ++s) {
    const int64_t t = p.reverse ? p.steps - 1 - s : s;
    const T* prev = s == 0 ? p.h0 : p.y + (p.reverse ? t + 1 : t - 1) * items;
    const T* c_prev = s == 0 ? p.c0 : p.c_n;
    for (int64_t item = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; item < items;
         item += warps) {
      const int64_t b = item / units, j = item - b * units;
      const T* h = prev + b * units;
      float acc[4] = {};
      for (int64_t k = lane; k < units; k += 32) {
        const float hk = ld(h[k]);
#pragma unroll
        for (int g = 0; g < 4; ++g) {
          if (g < gates) acc[g] += hk * ld(p.weight[(g * units + j) * units + k]);
        }
      }
#pragma unroll
      for (int g = 0; g < 4; ++g) acc[g] = warp_sum(acc[g]);
      if (lane != 0) continue;
      const T* x = p.gates + (t * p.rows + b) * gates * units + j;
      float xg[4] = {}, hg[4] = {}, c = 0.f;
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        if (g >= gates) continue;
        hg[g] = ld(st<T>(acc[g] + (p.bias != nullptr ? ld(p.bias[g * units + j]) : 0.f)));
        xg[g] = ld(x[g * units]);
      }
      const T out = st<T>(recurrent_unit(p.lstm, xg, hg, p.lstm ? ld(c_prev[item]) : ld(h[j]), &c));
      if (p.lstm) p.c_n[item] = st<T>(c);
      p.y[t * items + item] = out;
      if (s == p.steps - 1) p.h_n[item] = out;
    }
    if (count > 1) __syncthreads();
  }
}

}  // namespace

cudaError_t launch_compare_integer(Compare op, const void* x, ElementType type, bool integral_scalar, int64_t integer,
                                   double real, bool* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  compare_integer_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, x, type, integral_scalar, integer, real, out, n);
  return cudaGetLastError();
}

template <typename I>
cudaError_t binary_integer_as(Binary op, const void* a, const void* b, int64_t scalar, int64_t alpha, void* out,
                              int64_t n, const Broadcast& shape, cudaStream_t stream) {
  const int64_t* strides[] = {shape.a_strides, shape.b_strides};
  const BinaryBody<I, int64_t> body{op,    static_cast<const I*>(a), static_cast<const I*>(b), scalar,
                                    alpha, static_cast<I*>(out)};
  return launch_elementwise<2>(shape.dim, shape.out_sizes, strides, n, body, stream);
}

cudaError_t launch_binary_integer(Binary op, const void* a, const void* b, int64_t scalar, int64_t alpha, void* out,
                                  ElementType type, int64_t n, const Broadcast& shape, cudaStream_t stream) {
  if (op == Binary::Div) return cudaErrorInvalidValue;
  switch (type) {
    case ElementType::Int32: return binary_integer_as<int32_t>(op, a, b, scalar, alpha, out, n, shape, stream);
    case ElementType::Int64: return binary_integer_as<int64_t>(op, a, b, scalar, alpha, out, n, shape, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_cumsum(const void* x, ElementType x_type, void* out, ElementType out_type, int64_t outer,
                          int64_t size, int64_t inner, cudaStream_t stream) {
  const int64_t lines = outer * inner;
  if (lines == 0 || size == 0) return cudaSuccess;
  cumsum_kernel<<<blocks_for(lines), kThreads, 0, stream>>>(x, x_type, out, out_type, size, inner, lines);
  return cudaGetLastError();
}

cudaError_t launch_row_argmax(const void* x, ElementType type, int64_t* out, int64_t rows, int64_t cols,
                              cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const bool integer = type == ElementType::Bool || type == ElementType::Int32 || type == ElementType::Int64;
  if (integer) {
    row_argmax_kernel<long long><<<blocks_for(rows * 32), kThreads, 0, stream>>>(x, type, out, rows, cols);
  } else {
    row_argmax_kernel<float><<<blocks_for(rows * 32), kThreads, 0, stream>>>(x, type, out, rows, cols);
  }
  return cudaGetLastError();
}

// Gathers and scatters move whole elements: their kernels are instantiated per element size, not per
// dtype. `launch` is called with a value of the unsigned type of that size.
template <typename Launch>
cudaError_t by_element_size(int element_size, Launch launch) {
  switch (element_size) {
    case 1: return launch(uint8_t{});
    case 2: return launch(uint16_t{});
    case 4: return launch(uint32_t{});
    case 8: return launch(uint64_t{});
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_gather(const void* self, const void* index, bool int32_index, void* out, const GatherShape& g,
                          int64_t n, int element_size, int* bad, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return by_element_size(element_size, [&](auto element) {
    using E = decltype(element);
    gather_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const E*>(self), index, int32_index,
                                                          static_cast<E*>(out), g, n, bad);
    return cudaGetLastError();
  });
}

template <typename T>
cudaError_t launch_recurrent_cell(bool lstm, const T* input_gates, const T* hidden_gates, const T* state, T* hidden,
                                  T* cell, int64_t rows, int64_t width, cudaStream_t stream) {
  const int64_t total = rows * width;
  if (total == 0) return cudaSuccess;
  recurrent_cell_kernel<<<blocks_for(total), kThreads, 0, stream>>>(lstm, input_gates, hidden_gates, state, hidden,
                                                                    cell, width, total);
  return cudaGetLastError();
}

// Multiply-adds per step up to which one block of 1024 threads runs every step: above it a step's
// kernel spread over the device finishes sooner than one block, launch included.
constexpr int64_t kOneBlockRecurrentWork = int64_t{1} << 18;

// The shared memory a block may opt in to (227 KiB on H100), granted to recurrent_small_kernel<T>
// once, before its first launch (a graph capture then only launches it).
template <typename T>
size_t recurrent_small_shared_limit() {
  static const size_t limit = [] {
    int device = 0, bytes = 48 << 10;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess &&
        cudaFuncSetAttribute(recurrent_small_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) ==
            cudaSuccess) {
      return static_cast<size_t>(bytes);
    }
    cudaGetLastError();
    return size_t{48} << 10;
  }();
  return limit;
}

template <typename T>
cudaError_t launch_recurrent_layer(const RecurrentLayer<T>& p, cudaStream_t stream) {
  const int64_t items = p.rows * p.units;
  if (p.steps <= 0 || items == 0) return p.steps < 0 ? cudaErrorInvalidValue : cudaSuccess;
  const int64_t width = (p.lstm ? 4 : 3) * p.units;
  const size_t shared = static_cast<size_t>(width * p.units + 2 * items) * sizeof(float);
  if (items <= 1024 && shared <= recurrent_small_shared_limit<T>()) {
    const unsigned threads = static_cast<unsigned>((items + 31) / 32 * 32);
    recurrent_small_kernel<<<1, threads, shared, stream>>>(p);
    return cudaGetLastError();
  }
  if (items * width <= kOneBlockRecurrentWork) {
    recurrent_layer_kernel<<<1, 1024, 0, stream>>>(p, 0, p.steps);
    return cudaGetLastError();
  }
  const int64_t warps = kThreads / 32;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((items + warps - 1) / warps, 8192));
  for (int64_t s = 0; s < p.steps; ++s) {
    recurrent_layer_kernel<<<blocks, kThreads, 0, stream>>>(p, s, 1);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t kernels_loadable() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, unary_kernel<float>);
}

template <typename T>
cudaError_t launch_unary(Unary op, float p0, float p1, const T* x, T* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  unary_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(op, p0, p1, x, y, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_binary(Binary op, const T* a, const T* b, float scalar, float alpha, T* out, int64_t n,
                          const Broadcast& shape, cudaStream_t stream) {
  const int64_t* strides[] = {shape.a_strides, shape.b_strides};
  return launch_elementwise<2>(shape.dim, shape.out_sizes, strides, n,
                               BinaryBody<T, float>{op, a, b, scalar, alpha, out}, stream);
}

template <typename T>
cudaError_t launch_rope(const T* x, const T* cos, const T* sin, T* out, int64_t n, const Broadcast& shape,
                        cudaStream_t stream) {
  if (shape.dim < 1 || shape.out_sizes[shape.dim - 1] % 2) return cudaErrorInvalidValue;
  int64_t position[kMaxOpDims] = {};
  position[shape.dim - 1] = 1;
  const int64_t* strides[] = {shape.a_strides, shape.b_strides, shape.c_strides, position};
  const RopeBody<T> body{x, cos, sin, out, shape.out_sizes[shape.dim - 1] / 2, shape.a_strides[shape.dim - 1]};
  return launch_elementwise<4>(shape.dim, shape.out_sizes, strides, n, body, stream);
}

template <typename T>
cudaError_t launch_rope_put(const T* x, const T* cos, const T* sin, T* out, int64_t n, const Broadcast& shape,
                            const IndexGather& g, int* bad, cudaStream_t stream) {
  if (shape.dim < 1 || shape.dim > kMaxOpDims || shape.out_sizes[shape.dim - 1] % 2) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  int64_t position[kMaxOpDims] = {};
  position[shape.dim - 1] = 1;
  const int64_t* strides[] = {shape.a_strides, shape.b_strides, shape.c_strides, position};
  const RopeBody<T> body{x, cos, sin, out, shape.out_sizes[shape.dim - 1] / 2, shape.a_strides[shape.dim - 1]};
  Offsets<uint32_t, 4> small;
  if (make_offsets(shape.dim, shape.out_sizes, strides, n, &small)) {
    rope_put_kernel<<<blocks_for(n), kThreads, 0, stream>>>(small, n, body, g, bad);
  } else {
    Offsets<int64_t, 4> large;
    make_offsets(shape.dim, shape.out_sizes, strides, n, &large);
    rope_put_kernel<<<blocks_for(n), kThreads, 0, stream>>>(large, n, body, g, bad);
  }
  return cudaGetLastError();
}

template <typename T, int K>
cudaError_t fused_with(const FusedProgram& p, const T* const* inputs, const int64_t* const* strides, int dim,
                       const int64_t* sizes, T* out, int64_t n, cudaStream_t stream) {
  FusedBody<T, K> body{p, {}, out};
  for (int k = 0; k < K; ++k) body.in[k] = inputs[k];
  return launch_elementwise<K>(dim, sizes, strides, n, body, stream);
}

template <typename T>
cudaError_t launch_fused(const FusedProgram& p, const T* const* inputs, const int64_t* const* strides, int dim,
                         const int64_t* sizes, T* out, int64_t n, cudaStream_t stream) {
  if (p.steps < 1 || p.steps > kMaxFusedSteps) return cudaErrorInvalidValue;
  switch (p.inputs) {
    case 1: return fused_with<T, 1>(p, inputs, strides, dim, sizes, out, n, stream);
    case 2: return fused_with<T, 2>(p, inputs, strides, dim, sizes, out, n, stream);
    case 3: return fused_with<T, 3>(p, inputs, strides, dim, sizes, out, n, stream);
    case 4: return fused_with<T, 4>(p, inputs, strides, dim, sizes, out, n, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t launch_where(const bool* cond, const T* a, const T* b, T* out, int64_t n, const Broadcast& shape,
                         cudaStream_t stream) {
  const int64_t* strides[] = {shape.a_strides, shape.b_strides, shape.c_strides};
  return launch_elementwise<3>(shape.dim, shape.out_sizes, strides, n, WhereBody<T>{cond, a, b, out}, stream);
}

template <typename T>
cudaError_t launch_compare_scalar(Compare op, const T* x, float scalar, bool* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  compare_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, x, scalar, out, n);
  return cudaGetLastError();
}

cudaError_t launch_compare_tensors(Compare op, const void* a, const void* b, ElementType type, bool* out, int64_t n,
                                   const Broadcast& shape, cudaStream_t stream) {
  const int64_t* strides[] = {shape.a_strides, shape.b_strides};
  auto launch = [&](auto element) {
    using T = decltype(element);
    const PredicateBody<T, CompareTest> body{{op}, static_cast<const T*>(a), static_cast<const T*>(b), out};
    return launch_elementwise<2>(shape.dim, shape.out_sizes, strides, n, body, stream);
  };
  switch (type) {
    case ElementType::Float32: return launch(float{});
    case ElementType::Float16: return launch(__half{});
    case ElementType::BFloat16: return launch(__nv_bfloat16{});
    case ElementType::Bool: return launch(bool{});
    case ElementType::Int32: return launch(int32_t{});
    case ElementType::Int64: return launch(int64_t{});
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_logic(Logic op, const bool* a, const bool* b, bool* out, int64_t n, const Broadcast& shape,
                         cudaStream_t stream) {
  const int64_t* strides[] = {shape.a_strides, shape.b_strides};
  return launch_elementwise<2>(shape.dim, shape.out_sizes, strides, n, PredicateBody<bool, LogicTest>{{op}, a, b, out},
                               stream);
}

cudaError_t launch_index(const void* self, void* out, const IndexGather& g, int64_t n, int element_size, int* bad,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return by_element_size(element_size, [&](auto element) {
    using E = decltype(element);
    index_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const E*>(self), static_cast<E*>(out), g, n, bad);
    return cudaGetLastError();
  });
}

cudaError_t launch_index_put(void* out, const void* values, const IndexGather& g, int64_t n, int element_size, int* bad,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return by_element_size(element_size, [&](auto element) {
    using E = decltype(element);
    index_put_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<E*>(out), static_cast<const E*>(values), g, n,
                                                             bad);
    return cudaGetLastError();
  });
}

cudaError_t launch_cast(const void* x, ElementType x_type, void* out, ElementType out_type, int64_t n,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  cast_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, x_type, out, out_type, n);
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

template <typename T>
cudaError_t launch_embedding(const T* weight, const void* indices, bool int32_indices, T* out, int64_t n, int64_t rows,
                             int64_t width, int* bad, cudaStream_t stream) {
  if (n * width == 0) return cudaSuccess;
  embedding_kernel<<<blocks_for(n * width), kThreads, 0, stream>>>(weight, indices, int32_indices, out, n, rows, width,
                                                                   bad);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_softmax(const T* x, T* y, int64_t rows, int64_t cols, bool log, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols, log);
  return cudaGetLastError();
}

namespace {
// Whether attention of this shape runs on tensor cores: half precision, sizes WMMA tiles, and
// bfloat16 only from sm_80. Below kTcRows queries a block would compute mostly padding, and the
// scalar kernel's blocks of kAttentionRowsPerBlock rows are faster (GPT-2's 16-token prompts).
bool tensor_core_attention(const AttentionShape& s, const __half*) {
  return s.head_dim % 16 == 0 && s.value_dim % 16 == 0 && s.q_len >= kTcRows;
}
bool tensor_core_attention(const AttentionShape& s, const __nv_bfloat16*) {
  int device = 0, major = 0;
  return tensor_core_attention(s, static_cast<const __half*>(nullptr)) && cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 8;
}

// Launches attention_tc_kernel where tensor_core_attention allows and the GPU has the shared memory
// it needs; false where the scalar kernel is to run instead.
template <typename T>
bool launch_tensor_core_attention(const T* q, const T* k, const T* v, const void* mask, T* out, const AttentionShape& s,
                                  cudaStream_t stream, cudaError_t* status) {
  if constexpr (std::is_same<T, float>::value) {
    return false;
  } else {
    if (!tensor_core_attention(s, static_cast<const T*>(nullptr))) return false;
    const size_t bytes = tc_layout(static_cast<int>(s.head_dim), static_cast<int>(s.value_dim), sizeof(T)).bytes;
    if (bytes > 48 * 1024 && cudaFuncSetAttribute(attention_tc_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(bytes)) != cudaSuccess) {
      cudaGetLastError();  // more than this GPU has: the scalar kernel needs less
      return false;
    }
    const dim3 grid(static_cast<unsigned>(s.batch * s.q_heads),
                    static_cast<unsigned>((s.q_len + kTcRows - 1) / kTcRows));
    attention_tc_kernel<<<grid, kTcWarps * 32, bytes, stream>>>(q, k, v, mask, out, s);
    *status = cudaGetLastError();
    return true;
  }
}
}  // namespace

void contiguous_attention_strides(AttentionShape* s) {
  const int64_t q[3] = {s->q_heads * s->q_len * s->head_dim, s->q_len * s->head_dim, s->head_dim};
  const int64_t k[3] = {s->kv_heads * s->kv_len * s->head_dim, s->kv_len * s->head_dim, s->head_dim};
  const int64_t v[3] = {s->kv_heads * s->kv_len * s->value_dim, s->kv_len * s->value_dim, s->value_dim};
  const int64_t o[3] = {s->q_heads * s->q_len * s->value_dim, s->q_len * s->value_dim, s->value_dim};
  for (int d = 0; d < 3; ++d)
    s->q_strides[d] = q[d], s->k_strides[d] = k[d], s->v_strides[d] = v[d], s->out_strides[d] = o[d];
}

bool attention_takes_step(const AttentionShape& s) {
  return s.q_len == 1 && s.head_dim % 2 == 0 && s.head_dim <= kMaxAttentionHeadDim &&
         s.value_dim <= kMaxAttentionHeadDim && s.kv_heads > 0 && s.q_heads % s.kv_heads == 0 &&
         attention_splits(s) > 1;
}

int64_t attention_partial_floats(const AttentionShape& s) {
  const int splits = attention_splits(s);
  // The partials, then a counter per query row (attention_split_kernel's `done`).
  return splits > 1 ? s.batch * s.q_heads * s.q_len * (splits * (s.value_dim + 2) + 1) : 0;
}

template <typename T>
cudaError_t launch_attention(const T* q, const T* k, const T* v, const void* mask, T* out, const AttentionShape& s,
                             float* partials, cudaStream_t stream, const AttentionStep<T>* step) {
  if (step != nullptr && (!attention_takes_step(s) || step->cos == nullptr)) return cudaErrorInvalidValue;
  const int64_t heads = s.batch * s.q_heads;
  if (heads == 0 || s.q_len == 0 || s.value_dim == 0) return cudaSuccess;
  if (s.head_dim > kMaxAttentionHeadDim || s.value_dim > kMaxAttentionHeadDim || s.q_len > kMaxAttentionQueries ||
      s.kv_heads <= 0 || s.q_heads % s.kv_heads != 0 || heads > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (const int splits = attention_splits(s); splits > 1) {
    if (partials == nullptr) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(heads), static_cast<unsigned>(s.q_len), static_cast<unsigned>(splits));
    unsigned* done = reinterpret_cast<unsigned*>(partials + heads * s.q_len * splits * (s.value_dim + 2));
    // The caches a step writes are k and v, read elsewhere in the launch (never at its row).
    return launch_dependent(attention_split_kernel<T>, grid, dim3(kSplitWarps * 32), 0, stream, q, k, v, mask, partials,
                            done, out, s, splits, step ? *step : AttentionStep<T>{}, const_cast<T*>(k),
                            const_cast<T*>(v));
  }
  cudaError_t launched = cudaSuccess;
  if (launch_tensor_core_attention(q, k, v, mask, out, s, stream, &launched)) return launched;
  const dim3 grid(static_cast<unsigned>(heads),
                  static_cast<unsigned>((s.q_len + kAttentionRowsPerBlock - 1) / kAttentionRowsPerBlock));
  const size_t shared =
      sizeof(float) * static_cast<size_t>(kAttentionKeys * (s.head_dim + 1) + kAttentionKeys * s.value_dim +
                                          kAttentionRowsPerBlock * s.head_dim);
  attention_kernel<<<grid, kAttentionRowsPerBlock * 32, shared, stream>>>(q, k, v, mask, out, s);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_layer_norm(const T* x, const T* weight, const T* bias, float eps, T* y, T* mean, T* rstd,
                              int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  layer_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, bias, eps, y, mean, rstd, cols);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_rms_norm(const T* x, const T* weight, float eps, T* y, int64_t rows, int64_t cols,
                            cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, eps, y, cols);
  return cudaGetLastError();
}

cudaError_t launch_strided_copy(const void* in, void* out, int dim, const int64_t* out_sizes, const int64_t* in_strides,
                                int64_t n, int element_size, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (dim > kMaxOpDims) return cudaErrorInvalidValue;
  // Runs of contiguous elements move as wider ones (up to 16 bytes): where the innermost
  // dimension is read contiguously and every size and stride allows, `group` elements are one.
  int64_t sizes[kMaxOpDims], st[kMaxOpDims];
  for (int d = 0; d < dim; ++d) sizes[d] = out_sizes[d], st[d] = in_strides[d];
  int last = dim - 1;
  while (last > 0 && sizes[last] == 1) --last;
  int group = 1;
  if (dim > 0 && st[last] == 1) {
    const auto aligned = [&](int bytes) {
      if (reinterpret_cast<uintptr_t>(in) % bytes || reinterpret_cast<uintptr_t>(out) % bytes) return false;
      const int64_t g = bytes / element_size;
      if (sizes[last] % g) return false;
      for (int d = 0; d < last; ++d) {
        if (sizes[d] != 1 && st[d] % g) return false;
      }
      return true;
    };
    for (int bytes = 16; bytes > element_size; bytes /= 2) {
      if (bytes % element_size == 0 && aligned(bytes)) {
        group = bytes / element_size;
        break;
      }
    }
  }
  if (group > 1) {
    sizes[last] /= group;
    for (int d = 0; d < last; ++d) st[d] /= group;
    n /= group;
    element_size *= group;
  }
  const int64_t* strides[] = {st};
  switch (element_size) {
    case 1: return copy_as<uint8_t>(in, out, dim, sizes, strides, n, stream);
    case 2: return copy_as<uint16_t>(in, out, dim, sizes, strides, n, stream);
    case 4: return copy_as<uint32_t>(in, out, dim, sizes, strides, n, stream);
    case 8: return copy_as<uint64_t>(in, out, dim, sizes, strides, n, stream);
    case 16: return copy_as<Bytes16>(in, out, dim, sizes, strides, n, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t launch_im2col(const T* x, T* col, int64_t images, int64_t image_stride, int64_t channels, int64_t h,
                          int64_t w, int64_t kh, int64_t kw, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                          int64_t pad_w, int64_t dil_h, int64_t dil_w, int64_t oh, int64_t ow, cudaStream_t stream) {
  const int64_t total = images * channels * kh * kw * oh * ow;
  if (total == 0) return cudaSuccess;
  im2col_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, col, images, image_stride, channels, h, w, kh, kw,
                                                            stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, oh, ow);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_channel_affine(const T* x, const float* scale, const float* shift, T* y, int64_t n, int64_t c,
                                  int64_t inner, cudaStream_t stream) {
  const int64_t total = n * c * inner;
  if (total == 0) return cudaSuccess;
  channel_affine_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, scale, shift, y, c, inner, total);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_epilogue(const T* x, T* y, int64_t planes, int64_t channels, int64_t inner, const Epilogue<T>& e,
                            cudaStream_t stream) {
  const int64_t total = planes * inner;
  if (total == 0) return cudaSuccess;
  epilogue_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, channels, inner, e, total);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_pool2d(const T* x, T* y, int64_t* indices, bool max, int64_t planes, int64_t h, int64_t w,
                          int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                          int64_t pw, int64_t dh, int64_t dw, bool count_include_pad, int64_t channels_last,
                          cudaStream_t stream, bool adaptive) {
  const int64_t total = planes * oh * ow;
  if (total == 0) return cudaSuccess;
  if (adaptive && (max || oh <= 0 || ow <= 0)) return cudaErrorInvalidValue;
  pool2d_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, indices, max, h, w, oh, ow, kh, kw, sh, sw, ph, pw,
                                                            dh, dw, count_include_pad, channels_last, total, adaptive);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_constant_pad(const T* in, T* out, int dim, const int64_t* in_sizes, const int64_t* out_sizes,
                                const int64_t* before, float value, cudaStream_t stream) {
  if (dim > kMaxOpDims) return cudaErrorInvalidValue;
  PadShape s{dim, {}, {}, {}, {}};
  int64_t n = 1, stride = 1;
  for (int d = dim - 1; d >= 0; --d) {
    s.out_sizes[d] = out_sizes[d], s.in_sizes[d] = in_sizes[d], s.before[d] = before[d], s.in_strides[d] = stride;
    stride *= in_sizes[d], n *= out_sizes[d];
  }
  if (n == 0) return cudaSuccess;
  constant_pad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, s, value, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_depthwise_conv(const T* x, const T* weight, T* y, const ConvShape& s, const Epilogue<T>& e,
                                  cudaStream_t stream) {
  const int64_t total = s.n * s.oc * s.oh * s.ow;
  if (total == 0) return cudaSuccess;
  depthwise_conv_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, weight, y, s, e, total);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_upsample2d(const T* x, T* y, const Upsample& s, cudaStream_t stream) {
  const int64_t total = s.planes * s.oh * s.ow;
  if (total == 0) return cudaSuccess;
  upsample2d_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, s, total);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_row_reduce(const T* x, T* y, int64_t rows, int64_t cols, bool mean, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  row_reduce_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols, mean);
  return cudaGetLastError();
}

// The three element types of every templated launcher.
#define EXECUTORCH_CUDA_OPS_FOR(T)                                                                                    \
  template cudaError_t launch_unary<T>(Unary, float, float, const T*, T*, int64_t, cudaStream_t);                     \
  template cudaError_t launch_binary<T>(Binary, const T*, const T*, float, float, T*, int64_t, const Broadcast&,      \
                                        cudaStream_t);                                                                \
  template cudaError_t launch_fused<T>(const FusedProgram&, const T* const*, const int64_t* const*, int,              \
                                       const int64_t*, T*, int64_t, cudaStream_t);                                    \
  template cudaError_t launch_where<T>(const bool*, const T*, const T*, T*, int64_t, const Broadcast&, cudaStream_t); \
  template cudaError_t launch_compare_scalar<T>(Compare, const T*, float, bool*, int64_t, cudaStream_t);              \
  template cudaError_t launch_embedding<T>(const T*, const void*, bool, T*, int64_t, int64_t, int64_t, int*,          \
                                           cudaStream_t);                                                             \
  template cudaError_t launch_softmax<T>(const T*, T*, int64_t, int64_t, bool, cudaStream_t);                         \
  template cudaError_t launch_attention<T>(const T*, const T*, const T*, const void*, T*, const AttentionShape&,      \
                                           float*, cudaStream_t, const AttentionStep<T>*);                            \
  template cudaError_t launch_layer_norm<T>(const T*, const T*, const T*, float, T*, T*, T*, int64_t, int64_t,        \
                                            cudaStream_t);                                                            \
  template cudaError_t launch_rope<T>(const T*, const T*, const T*, T*, int64_t, const Broadcast&, cudaStream_t);     \
  template cudaError_t launch_rope_put<T>(const T*, const T*, const T*, T*, int64_t, const Broadcast&,                \
                                          const IndexGather&, int*, cudaStream_t);                                    \
  template cudaError_t launch_rms_norm<T>(const T*, const T*, float, T*, int64_t, int64_t, cudaStream_t);             \
  template cudaError_t launch_im2col<T>(const T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,  \
                                        int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,       \
                                        cudaStream_t);                                                                \
  template cudaError_t launch_channel_affine<T>(const T*, const float*, const float*, T*, int64_t, int64_t, int64_t,  \
                                                cudaStream_t);                                                        \
  template cudaError_t launch_epilogue<T>(const T*, T*, int64_t, int64_t, int64_t, const Epilogue<T>&, cudaStream_t); \
  template cudaError_t launch_pool2d<T>(const T*, T*, int64_t*, bool, int64_t, int64_t, int64_t, int64_t, int64_t,    \
                                        int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, \
                                        int64_t, cudaStream_t, bool);                                                 \
  template cudaError_t launch_row_reduce<T>(const T*, T*, int64_t, int64_t, bool, cudaStream_t);                      \
  template cudaError_t launch_recurrent_cell<T>(bool, const T*, const T*, const T*, T*, T*, int64_t, int64_t,         \
                                                cudaStream_t);                                                        \
  template cudaError_t launch_recurrent_layer<T>(const RecurrentLayer<T>&, cudaStream_t);                             \
  template cudaError_t launch_pixel_reduce<T>(const T*, T*, float*, int64_t, int64_t, int64_t, bool, cudaStream_t);   \
  template cudaError_t launch_upsample2d<T>(const T*, T*, const Upsample&, cudaStream_t);                             \
  template cudaError_t launch_depthwise_conv<T>(const T*, const T*, T*, const ConvShape&, const Epilogue<T>&,         \
                                                cudaStream_t);                                                        \
  template cudaError_t launch_constant_pad<T>(const T*, T*, int, const int64_t*, const int64_t*, const int64_t*,      \
                                              float, cudaStream_t);

EXECUTORCH_CUDA_OPS_FOR(float)
EXECUTORCH_CUDA_OPS_FOR(__half)
EXECUTORCH_CUDA_OPS_FOR(__nv_bfloat16)
#undef EXECUTORCH_CUDA_OPS_FOR

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
