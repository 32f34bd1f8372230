#include <executorch/backends/cuda/kernels/gemv.h>

#include <executorch/backends/cuda/kernels/convert.cuh>
#include <executorch/backends/cuda/kernels/dependent_launch.cuh>
#include <executorch/backends/cuda/kernels/warp.cuh>

#include <cstdint>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

constexpr int kWarps = 8;                  // per block, each on its own features
constexpr int kBatch = 8;                  // 16-byte weight loads a lane has in flight per feature
constexpr int64_t kWide = 8192;            // features from which a warp takes two (fewer, longer warps)
constexpr size_t kMaxShared = 100 * 1024;  // x (and the norm's weight) in shared memory

size_t shared_bytes(int64_t rows, int64_t k, int element_size, GemvPrologue prologue) {
  return static_cast<size_t>(rows * k + (prologue == GemvPrologue::RmsNorm ? k : 0)) * element_size;
}

// Features a warp takes: a gate and its up feature (SiluMul), two adjacent ones in wide layers, else one.
int features_per_warp(int64_t n, GemvEpilogue epilogue) {
  return epilogue == GemvEpilogue::SiluMul || n >= kWide ? 2 : 1;
}

// The warps' feature groups: gate/up pairs (SiluMul), else runs of `features`.
__host__ __device__ inline int64_t feature_groups(int64_t n, int features, GemvEpilogue epilogue) {
  return epilogue == GemvEpilogue::SiluMul ? n / 2 : (n + features - 1) / features;
}

// k's elements per 16-byte load of weights.
template <typename T, GemvWeights kWeights>
constexpr int per_load() {
  return kWeights == GemvWeights::Int4 ? 32 : kWeights == GemvWeights::Int8 ? 16 : static_cast<int>(16 / sizeof(T));
}
int per_load(int element_size, GemvWeights weights) {
  return weights == GemvWeights::Int4 ? 32 : weights == GemvWeights::Int8 ? 16 : 16 / element_size;
}

// 2^23 plus byte k of `word`, as a float: the byte placed in the low mantissa bits of 2^23 (one byte
// permute). Quantized weights become floats this way, exactly, at the integer units' rate rather
// than the conversion units' (a quarter of the FMA rate, too slow to keep up with int4 weights).
constexpr float kTwo23 = 8388608.f;
__device__ __forceinline__ float byte_as_float(uint32_t word, int k) {
  return __int_as_float(static_cast<int>(__byte_perm(word, 0x4B000000u, 0x7650u | static_cast<unsigned>(k))));
}

// The dot product of one 16-byte load of weights with the matching x (in shared memory).
template <typename T, GemvWeights kWeights>
__device__ __forceinline__ float dot(const uint4& bits, const T* x) {
  constexpr int kPer = per_load<T, kWeights>();
  float xv[kPer];
#pragma unroll
  for (int i = 0; i < kPer; i += static_cast<int>(16 / sizeof(T))) {
    const uint4 xb = *reinterpret_cast<const uint4*>(x + i);
    const T* e = reinterpret_cast<const T*>(&xb);
#pragma unroll
    for (int v = 0; v < static_cast<int>(16 / sizeof(T)); ++v) xv[i + v] = ld(e[v]);
  }
  float sum = 0.f;
  if constexpr (kWeights == GemvWeights::Dense) {
    const T* e = reinterpret_cast<const T*>(&bits);
#pragma unroll
    for (int v = 0; v < kPer; ++v) sum += xv[v] * ld(e[v]);
  } else {
    const uint32_t* words = reinterpret_cast<const uint32_t*>(&bits);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      if constexpr (kWeights == GemvWeights::Int4) {  // byte k: columns 2k (low nibble) and 2k + 1
        const uint32_t low = words[m] & 0x0F0F0F0Fu, high = (words[m] >> 4) & 0x0F0F0F0Fu;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          sum += xv[8 * m + 2 * k] * (byte_as_float(low, k) - (kTwo23 + 8.f)) +
                 xv[8 * m + 2 * k + 1] * (byte_as_float(high, k) - (kTwo23 + 8.f));
        }
      } else {  // int8, biased to 0..255
        const uint32_t biased = words[m] ^ 0x80808080u;
#pragma unroll
        for (int k = 0; k < 4; ++k) sum += xv[4 * m + k] * (byte_as_float(biased, k) - (kTwo23 + 128.f));
      }
    }
  }
  return sum;
}

// Warp w of block b takes kFeatures features: f consecutive ones from (b * kWarps + w) * kFeatures, or
// (SiluMul) gate g = b * kWarps + w and up g + n / 2. A lane reads every 32nd 16-byte load of each
// feature's row (and, Int4, the scale of its group), kBatch at a time; its first batch is requested
// before waiting for the kernel that writes x: the weights are no earlier kernel's output, so their
// fetch overlaps that kernel's tail (launch_dependent). x (every row; the RMS norm's where folded in)
// is staged in shared memory as T (exact: its values are T's), where consecutive lanes read
// consecutive bytes; the lanes' sums meet by shuffles.
template <typename T, GemvWeights kWeights, int kRows, int kFeatures>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(GemvArgs<T> p) {
  constexpr int kVec = 16 / sizeof(T), kPer = per_load<T, kWeights>();
  constexpr bool kInt4 = kWeights == GemvWeights::Int4;
  allow_dependents();
  extern __shared__ uint4 shared[];  // x [rows][k], then the norm's weight [k]
  __shared__ float rs[kRows];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rows = static_cast<int>(p.rows);
  const int64_t n = p.n, k = p.k, loads = k / kPer, row_bytes = loads * 16;
  const int64_t groups_per_row = kInt4 ? k / p.group : 0;
  const bool paired = p.epilogue == GemvEpilogue::SiluMul;
  const int64_t group = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const bool live = group < feature_groups(n, kFeatures, p.epilogue);
  int64_t feature[kFeatures];
#pragma unroll
  for (int f = 0; f < kFeatures; ++f) {
    const int64_t c = paired ? group + f * (n / 2) : group * kFeatures + f;
    feature[f] = live && c < n ? c : -1;
  }
  uint4 bits[kFeatures][kBatch];
  float scale[kFeatures][kBatch];
  auto load = [&](int64_t first) {
#pragma unroll
    for (int f = 0; f < kFeatures; ++f) {
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t at = first + lane + 32 * u;
        const bool in = feature[f] >= 0 && at < loads;
        const uint4* row = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.w) + feature[f] * row_bytes);
        bits[f][u] = in ? __ldcs(row + at) : make_uint4(0, 0, 0, 0);
        if constexpr (kInt4)
          scale[f][u] = in ? __ldg(p.scales + feature[f] * groups_per_row + at * kPer / p.group) : 0.f;
      }
    }
  };
  load(0);
  wait_for_prerequisites();
  const bool norm = p.prologue == GemvPrologue::RmsNorm;
  const T* src = norm ? p.a : p.x;
  T* xs = reinterpret_cast<T*>(shared);
  T* gamma = xs + rows * k;
  if (reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    for (int64_t i = threadIdx.x; i < rows * k / kVec; i += blockDim.x)
      shared[i] = reinterpret_cast<const uint4*>(src)[i];
  } else {
    for (int64_t i = threadIdx.x; i < rows * k; i += blockDim.x) xs[i] = src[i];
  }
  if (norm) {
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x) gamma[i] = p.b[i];
  }
  __syncthreads();
  if (norm) {  // rounded as executorch::rms_norm's kernel rounds
    if (warp < rows) {
      float ss = 0.f;
      for (int64_t j = lane; j < k; j += 32) ss += ld(xs[warp * k + j]) * ld(xs[warp * k + j]);
      ss = warp_sum(ss);
      if (lane == 0) rs[warp] = rsqrtf(ss / static_cast<float>(k) + p.eps);
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < rows * k; i += blockDim.x) {
      xs[i] = st<T>(ld(gamma[i % k]) * ld(st<T>(ld(xs[i]) * rs[i / k])));
    }
    __syncthreads();
  }
  if (!live) return;
  float acc[kRows][kFeatures] = {};
  for (int64_t first = 0; first < loads; first += 32 * kBatch) {
    if (first > 0) load(first);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t at = first + lane + 32 * u;
      if (at >= loads) break;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows) break;
#pragma unroll
        for (int f = 0; f < kFeatures; ++f) {
          const float d = dot<T, kWeights>(bits[f][u], xs + r * k + at * kPer);
          acc[r][f] += kInt4 ? d * scale[f][u] : d;
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
    float sum[kFeatures];
#pragma unroll
    for (int f = 0; f < kFeatures; ++f) {
      sum[f] = warp_sum(acc[r][f]);
      if (kWeights == GemvWeights::Int8 && feature[f] >= 0) sum[f] *= __ldg(p.scales + feature[f]);
    }
    if (lane != 0) continue;
    if constexpr (kFeatures == 2) {
      if (paired) {
        const float g = ld(st<T>(sum[0])), u = ld(st<T>(sum[1]));
        p.y[r * (n / 2) + group] = st<T>(ld(st<T>(g / (1.f + expf(-g)))) * u);
        continue;
      }
    }
#pragma unroll
    for (int f = 0; f < kFeatures; ++f) {
      const int64_t c = feature[f];
      if (c < 0) continue;
      float total = sum[f];
      if (p.bias != nullptr) total += ld(p.bias[c]);
      if (p.residual != nullptr) total += ld(p.residual[r * n + c]);
      p.y[r * n + c] = st<T>(total);
    }
  }
}

template <typename T, GemvWeights kWeights, int kRows, int kFeatures>
cudaError_t launch_shape(const GemvArgs<T>& p, cudaStream_t stream) {
  const size_t shared = shared_bytes(p.rows, p.k, static_cast<int>(sizeof(T)), p.prologue);
  if (shared > 48 * 1024) {
    static const cudaError_t raised =
        cudaFuncSetAttribute(gemv_kernel<T, kWeights, kRows, kFeatures>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kMaxShared));
    if (raised != cudaSuccess) return raised;
  }
  const dim3 grid(static_cast<unsigned>((feature_groups(p.n, kFeatures, p.epilogue) + kWarps - 1) / kWarps));
  return launch_dependent(gemv_kernel<T, kWeights, kRows, kFeatures>, grid, dim3(kWarps * 32), shared, stream, p);
}

template <typename T, GemvWeights kWeights, int kRows>
cudaError_t launch_rows(const GemvArgs<T>& p, cudaStream_t stream) {
  return features_per_warp(p.n, p.epilogue) == 2 ? launch_shape<T, kWeights, kRows, 2>(p, stream)
                                                 : launch_shape<T, kWeights, kRows, 1>(p, stream);
}

// One row (a decode step) has a kernel of its own; more share one for up to kGemvMaxRows.
template <typename T, GemvWeights kWeights>
cudaError_t launch_weights(const GemvArgs<T>& p, cudaStream_t stream) {
  return p.rows == 1 ? launch_rows<T, kWeights, 1>(p, stream)
                     : launch_rows<T, kWeights, static_cast<int>(kGemvMaxRows)>(p, stream);
}

}  // namespace

bool gemv_supported(int64_t rows, int64_t n, int64_t k, int element_size, GemvWeights weights, int64_t group,
                    GemvPrologue prologue, GemvEpilogue epilogue) {
  if (rows < 1 || rows > kGemvMaxRows || n < 1 || k < 1 || (element_size != 2 && element_size != 4) ||
      k % per_load(element_size, weights) != 0 || (epilogue == GemvEpilogue::SiluMul && n % 2 != 0) ||
      (weights == GemvWeights::Int4 && (group <= 0 || group % 32 != 0 || k % group != 0))) {
    return false;
  }
  return shared_bytes(rows, k, element_size, prologue) <= kMaxShared &&
         (feature_groups(n, 1, epilogue) + kWarps - 1) / kWarps <= INT32_MAX;
}

template <typename T>
cudaError_t launch_gemv(const GemvArgs<T>& p, cudaStream_t stream) {
  const bool paired = p.epilogue == GemvEpilogue::SiluMul;
  if (!gemv_supported(p.rows, p.n, p.k, static_cast<int>(sizeof(T)), p.weights, p.group, p.prologue, p.epilogue) ||
      (p.prologue == GemvPrologue::None ? p.x == nullptr : p.a == nullptr || p.b == nullptr) || p.y == nullptr ||
      (paired && (p.bias != nullptr || p.residual != nullptr)) || reinterpret_cast<uintptr_t>(p.w) % 16 != 0 ||
      (p.weights != GemvWeights::Dense && p.scales == nullptr)) {
    return cudaErrorInvalidValue;
  }
  switch (p.weights) {
    case GemvWeights::Int8: return launch_weights<T, GemvWeights::Int8>(p, stream);
    case GemvWeights::Int4: return launch_weights<T, GemvWeights::Int4>(p, stream);
    default: return launch_weights<T, GemvWeights::Dense>(p, stream);
  }
}

template cudaError_t launch_gemv<float>(const GemvArgs<float>&, cudaStream_t);
template cudaError_t launch_gemv<__half>(const GemvArgs<__half>&, cudaStream_t);
template cudaError_t launch_gemv<__nv_bfloat16>(const GemvArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
