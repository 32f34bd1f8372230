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

// Warp w of block b takes kFeatures features: f consecutive ones from (b * kWarps + w) * kFeatures, or
// (SiluMul) gate g = b * kWarps + w and up g + n / 2. A lane reads every 32nd 16-byte chunk of each
// feature's row, kBatch at a time; its first batch is requested before waiting for the kernel that
// writes x: the weights are no earlier kernel's output, so their fetch overlaps that kernel's tail
// (launch_dependent). x (every row; the RMS norm's where folded in) is staged in shared memory as T
// (exact: its values are T's), where consecutive lanes read consecutive 16 bytes; the lanes' sums
// meet by shuffles.
template <typename T, int kRows, int kFeatures>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(GemvArgs<T> p) {
  constexpr int kVec = 16 / sizeof(T);
  allow_dependents();
  extern __shared__ uint4 shared[];  // x [rows][k], then the norm's weight [k]
  __shared__ float rs[kRows];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rows = static_cast<int>(p.rows);
  const int64_t n = p.n, k = p.k, chunks = k / kVec;
  const bool paired = p.epilogue == GemvEpilogue::SiluMul;
  const int64_t group = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const bool live = group < feature_groups(n, kFeatures, p.epilogue);
  int64_t feature[kFeatures];
#pragma unroll
  for (int f = 0; f < kFeatures; ++f) {
    const int64_t c = paired ? group + f * (n / 2) : group * kFeatures + f;
    feature[f] = live && c < n ? c : -1;
  }
  auto load = [&](uint4(&bits)[kFeatures][kBatch], int64_t first) {
#pragma unroll
    for (int f = 0; f < kFeatures; ++f) {
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t ch = first + lane + 32 * u;
        bits[f][u] = feature[f] >= 0 && ch < chunks ? __ldcs(reinterpret_cast<const uint4*>(p.w + feature[f] * k) + ch)
                                                    : make_uint4(0, 0, 0, 0);
      }
    }
  };
  uint4 bits[kFeatures][kBatch];
  load(bits, 0);
  wait_for_prerequisites();
  const bool norm = p.prologue == GemvPrologue::RmsNorm;
  const uint4* src = reinterpret_cast<const uint4*>(norm ? p.a : p.x);
  T* xs = reinterpret_cast<T*>(shared);
  const T* gamma = xs + rows * k;
  for (int64_t i = threadIdx.x; i < rows * chunks; i += blockDim.x) shared[i] = src[i];
  if (norm) {
    for (int64_t i = threadIdx.x; i < chunks; i += blockDim.x)
      shared[rows * chunks + i] = reinterpret_cast<const uint4*>(p.b)[i];
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
  for (int64_t first = 0; first < chunks; first += 32 * kBatch) {
    if (first > 0) load(bits, first);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t ch = first + lane + 32 * u;
      if (ch >= chunks) break;
      float w[kFeatures][kVec];
#pragma unroll
      for (int f = 0; f < kFeatures; ++f) {
        const T* e = reinterpret_cast<const T*>(&bits[f][u]);
#pragma unroll
        for (int v = 0; v < kVec; ++v) w[f][v] = ld(e[v]);
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows) break;
        const uint4 xb = shared[r * chunks + ch];
        const T* x = reinterpret_cast<const T*>(&xb);
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
#pragma unroll
          for (int f = 0; f < kFeatures; ++f) acc[r][f] += ld(x[v]) * w[f][v];
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
    float sum[kFeatures];
#pragma unroll
    for (int f = 0; f < kFeatures; ++f) sum[f] = warp_sum(acc[r][f]);
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

template <typename T, int kRows, int kFeatures>
cudaError_t launch_shape(const GemvArgs<T>& p, cudaStream_t stream) {
  const size_t shared = shared_bytes(p.rows, p.k, static_cast<int>(sizeof(T)), p.prologue);
  if (shared > 48 * 1024) {
    static const cudaError_t raised = cudaFuncSetAttribute(
        gemv_kernel<T, kRows, kFeatures>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMaxShared));
    if (raised != cudaSuccess) return raised;
  }
  const dim3 grid(static_cast<unsigned>((feature_groups(p.n, kFeatures, p.epilogue) + kWarps - 1) / kWarps));
  return launch_dependent(gemv_kernel<T, kRows, kFeatures>, grid, dim3(kWarps * 32), shared, stream, p);
}

template <typename T, int kRows>
cudaError_t launch_rows(const GemvArgs<T>& p, cudaStream_t stream) {
  return features_per_warp(p.n, p.epilogue) == 2 ? launch_shape<T, kRows, 2>(p, stream)
                                                 : launch_shape<T, kRows, 1>(p, stream);
}

}  // namespace

bool gemv_supported(int64_t rows, int64_t n, int64_t k, int element_size, GemvPrologue prologue,
                    GemvEpilogue epilogue) {
  if (rows < 1 || rows > kGemvMaxRows || n < 1 || k < 1 || (element_size != 2 && element_size != 4) ||
      k % (16 / element_size) != 0 || (epilogue == GemvEpilogue::SiluMul && n % 2 != 0)) {
    return false;
  }
  return shared_bytes(rows, k, element_size, prologue) <= kMaxShared &&
         (feature_groups(n, 1, epilogue) + kWarps - 1) / kWarps <= INT32_MAX;
}

template <typename T>
cudaError_t launch_gemv(const GemvArgs<T>& p, cudaStream_t stream) {
  const bool paired = p.epilogue == GemvEpilogue::SiluMul;
  const T* src = p.prologue == GemvPrologue::None ? p.x : p.a;
  if (!gemv_supported(p.rows, p.n, p.k, static_cast<int>(sizeof(T)), p.prologue, p.epilogue) || src == nullptr ||
      p.y == nullptr || (p.prologue == GemvPrologue::RmsNorm && p.b == nullptr) ||
      (paired && (p.bias != nullptr || p.residual != nullptr)) || reinterpret_cast<uintptr_t>(p.w) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(src) % 16 != 0 || (p.b != nullptr && reinterpret_cast<uintptr_t>(p.b) % 16 != 0)) {
    return cudaErrorInvalidValue;
  }
  if (p.rows == 1) return launch_rows<T, 1>(p, stream);
  if (p.rows == 2) return launch_rows<T, 2>(p, stream);
  if (p.rows <= 4) return launch_rows<T, 4>(p, stream);
  return launch_rows<T, 8>(p, stream);
}

template cudaError_t launch_gemv<float>(const GemvArgs<float>&, cudaStream_t);
template cudaError_t launch_gemv<__half>(const GemvArgs<__half>&, cudaStream_t);
template cudaError_t launch_gemv<__nv_bfloat16>(const GemvArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
