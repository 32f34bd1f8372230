#include <executorch/backends/cuda/kernels/gemv.h>

#include <executorch/backends/cuda/kernels/convert.cuh>
#include <executorch/backends/cuda/kernels/dependent_launch.cuh>
#include <executorch/backends/cuda/kernels/warp.cuh>

#include <algorithm>
#include <cstdint>
#include <type_traits>

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

// x (every row, each `stride` elements apart in `xs`, shared memory) staged for a block's GEMV, with
// the RMS norm applied where folded in (`gamma`: room for its weight, [k]), rounded as
// executorch::rms_norm's kernel rounds. Ends with the block synchronized.
template <typename T>
__device__ void stage_x(const GemvArgs<T>& p, T* xs, int64_t stride, T* gamma) {
  constexpr int kVec = 16 / sizeof(T);
  __shared__ float rs[kGemvMaxRows];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rows = static_cast<int>(p.rows);
  const int64_t k = p.k;
  const bool norm = p.prologue == GemvPrologue::RmsNorm;
  const T* src = norm ? p.a : p.x;
  if (reinterpret_cast<uintptr_t>(src) % 16 == 0 && k % kVec == 0 && stride % kVec == 0) {
    const int64_t per_row = k / kVec;
    for (int64_t i = threadIdx.x; i < rows * per_row; i += blockDim.x) {
      reinterpret_cast<uint4*>(xs + i / per_row * stride)[i % per_row] = reinterpret_cast<const uint4*>(src)[i];
    }
  } else {
    for (int64_t i = threadIdx.x; i < rows * k; i += blockDim.x) xs[i / k * stride + i % k] = src[i];
  }
  if (norm) {
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x) gamma[i] = p.b[i];
  }
  __syncthreads();
  if (!norm) return;
  if (warp < rows) {
    float ss = 0.f;
    for (int64_t j = lane; j < k; j += 32) ss += ld(xs[warp * stride + j]) * ld(xs[warp * stride + j]);
    ss = warp_sum(ss);
    if (lane == 0) rs[warp] = rsqrtf(ss / static_cast<float>(k) + p.eps);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < rows * k; i += blockDim.x) {
    T& x = xs[i / k * stride + i % k];
    x = st<T>(ld(gamma[i % k]) * ld(st<T>(ld(x) * rs[i / k])));
  }
  __syncthreads();
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
  constexpr int kPer = per_load<T, kWeights>();
  constexpr bool kInt4 = kWeights == GemvWeights::Int4;
  allow_dependents();
  extern __shared__ uint4 shared[];  // x [rows][k], then the norm's weight [k]
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
  T* xs = reinterpret_cast<T*>(shared);
  stage_x(p, xs, k, xs + rows * k);
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

// Int4Tiled: one warp multiplies a tile of 16 features by 64 inputs at a time on tensor cores (mma
// m16n8k16: the tile's weights, q - 8 exact in T, times x, its rows the product's eight columns),
// reading the tile's 512 bytes as one 16-byte load per lane. `slices` warps share a feature tile,
// each taking an even part of its k-tiles, kTileBatch loads in flight; the block adds their sums in
// shared memory. Each group's products are scaled in float32 as they leave the tensor cores, so the
// arithmetic is Int4's: exact products, float32 sums.
constexpr int64_t kTileFeatures = 16, kTileInputs = 64;
// Four loads in flight per lane and four blocks resident per SM (64 registers a thread): blocks
// overlap one another's loads and arithmetic. Eight loads at two blocks per SM left the memory idle
// while both computed: 12.4 against 10.5 us for the 1B Llama's int4 gate|up on an H100, 26.8
// against 20.8 us for its lm_head.
constexpr int kTileBatch = 4;
constexpr int kTileBlocks = 4;
constexpr size_t kTileSums = kWarps * 32 * 4 * sizeof(float);  // each warp's accumulators

// Warps sharing a feature tile: as many as leave each at least two k-tiles, so that small layers
// still spread over every SM; four at most with SiluMul, whose block holds a gate tile and its up tile.
int tile_slices(int64_t k, GemvEpilogue epilogue) {
  const int64_t tiles = k / kTileInputs;
  int slices = epilogue == GemvEpilogue::SiluMul ? 4 : kWarps;
  while (slices > 1 && tiles < 2 * slices) slices /= 2;
  return slices;
}

// x rows kTilePad elements apart in shared memory: the eight rows' reads of one step then fall in
// different banks.
constexpr int64_t kTilePad = 8;
size_t tiled_shared_bytes(int64_t rows, int64_t k, GemvPrologue prologue) {
  return kTileSums + static_cast<size_t>(rows * (k + kTilePad) + (prologue == GemvPrologue::RmsNorm ? k : 0)) * 2;
}

// Two nibbles of `w` (bits 0-3 and 16-19) as two T holding q - 8: each placed in the mantissa of
// 128 (bfloat16) or 1024 (half), exact there, less 136 or 1032.
template <typename T>
__device__ __forceinline__ uint32_t nibble_pair(uint32_t w);
template <>
__device__ __forceinline__ uint32_t nibble_pair<__nv_bfloat16>(uint32_t w) {
  uint32_t bits = (w & 0x000F000Fu) | 0x43004300u;
  __nv_bfloat162 v = __hsub2(*reinterpret_cast<__nv_bfloat162*>(&bits), __floats2bfloat162_rn(136.f, 136.f));
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t nibble_pair<__half>(uint32_t w) {
  uint32_t bits = (w & 0x000F000Fu) | 0x64006400u;
  __half2 v = __hsub2(*reinterpret_cast<__half2*>(&bits), __floats2half2_rn(1032.f, 1032.f));
  return *reinterpret_cast<uint32_t*>(&v);
}

// d = a (16 x 16, row-major fragments) * b (16 x 8) + c, float32 accumulators.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                          const float (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
  }
#endif
}

// Lane (g = lane / 4, t = lane % 4) holds, per k-tile, features g and g + 8 of its tile and the
// products' columns (rows of x) 2t and 2t + 1: acc[0..1] feature g, acc[2..3] feature g + 8.
template <typename T, bool kGroup32>
__global__ void __launch_bounds__(kWarps * 32, kTileBlocks) gemv_tiles_kernel(GemvArgs<T> p, int slices) {
  allow_dependents();
  extern __shared__ uint4 shared[];  // the warps' sums, x [rows][k + kTilePad], the norm's weight [k]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int rows = static_cast<int>(p.rows);
  const int64_t n = p.n, k = p.k, k_tiles = k / kTileInputs, stride = k + kTilePad;
  const bool paired = p.epilogue == GemvEpilogue::SiluMul;
  const int tiles = kWarps / slices, local = warp / slices, slice = warp % slices;
  // The warp's feature tile: gate tiles come first, up tiles n / 32 later (SiluMul).
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * (tiles / 2) + local / 2;
  const int64_t ft = paired ? pair + (local & 1) * (n / 32) : static_cast<int64_t>(blockIdx.x) * tiles + local;
  const bool live = paired ? pair < n / 32 : ft < n / kTileFeatures;
  const int64_t kt0 = k_tiles * slice / slices, kt1 = k_tiles * (slice + 1) / slices;
  const uint4* wp = reinterpret_cast<const uint4*>(p.w) + ft * k_tiles * 32 + lane;
  const int64_t groups = k / p.group;
  uint4 bits[kTileBatch];
  float4 sc[kTileBatch];  // group 32: (g, a), (g + 8, a), (g, b), (g + 8, b) of the tile's groups a, b
  auto load = [&](int64_t first) {
#pragma unroll
    for (int u = 0; u < kTileBatch; ++u) {
      const int64_t kt = first + u;
      if (!live || kt >= kt1) break;
      bits[u] = __ldcs(wp + kt * 32);
      if constexpr (kGroup32) {
        sc[u] = __ldg(reinterpret_cast<const float4*>(p.scales) + (ft * k_tiles + kt) * 8 + g);
      } else {
        const float2 s =
            __ldg(reinterpret_cast<const float2*>(p.scales) + (ft * groups + kt * kTileInputs / p.group) * 8 + g);
        sc[u] = make_float4(s.x, s.y, s.x, s.y);
      }
    }
  };
  load(kt0);
  wait_for_prerequisites();
  float* sums = reinterpret_cast<float*>(shared);
  T* xs = reinterpret_cast<T*>(reinterpret_cast<uint8_t*>(shared) + kTileSums);
  stage_x(p, xs, stride, xs + rows * stride);
  const T* xrow = xs + g * stride + 2 * t;  // read only where g < rows
  float acc[4] = {};
  const float zero[4] = {};
  for (int64_t first = kt0; live && first < kt1; first += kTileBatch) {
    if (first > kt0) load(first);
#pragma unroll
    for (int u = 0; u < kTileBatch; ++u) {
      const int64_t kt = first + u;
      if (kt >= kt1) break;
      const uint32_t* words = reinterpret_cast<const uint32_t*>(&bits[u]);
      float d[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t a[4] = {nibble_pair<T>(words[j]), nibble_pair<T>(words[j] >> 4), nibble_pair<T>(words[j] >> 8),
                               nibble_pair<T>(words[j] >> 12)};
        const int64_t at = kt * kTileInputs + 16 * j;
        const uint32_t b0 = g < rows ? *reinterpret_cast<const uint32_t*>(xrow + at) : 0u;
        const uint32_t b1 = g < rows ? *reinterpret_cast<const uint32_t*>(xrow + at + 8) : 0u;
        const bool starts = kGroup32 ? j % 2 == 0 : j == 0;
        if (starts) {
          mma_16816<T>(d, a, b0, b1, zero);
        } else {
          mma_16816<T>(d, a, b0, b1, d);
        }
        if (kGroup32 ? j % 2 == 1 : j == 3) {
          const float lo = j == 3 && kGroup32 ? sc[u].z : sc[u].x, hi = j == 3 && kGroup32 ? sc[u].w : sc[u].y;
          acc[0] += d[0] * lo, acc[1] += d[1] * lo, acc[2] += d[2] * hi, acc[3] += d[3] * hi;
        }
      }
    }
  }
  reinterpret_cast<float4*>(sums)[warp * 32 + lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  __syncthreads();
  // Feature f (0..15) of local tile `tile`, row r: the slices' accumulators added.
  auto total = [&](int tile, int f, int r) {
    float sum = 0.f;
    for (int w = tile * slices; w < (tile + 1) * slices; ++w) {
      sum += sums[(w * 32 + (f % 8) * 4 + r / 2) * 4 + (f >= 8 ? 2 : 0) + (r & 1)];
    }
    return sum;
  };
  const int outputs = (paired ? tiles / 2 : tiles) * static_cast<int>(kTileFeatures) * rows;
  for (int o = threadIdx.x; o < outputs; o += blockDim.x) {
    const int r = o % rows, f = o / rows % kTileFeatures, tile = o / rows / kTileFeatures;
    if (paired) {
      const int64_t c = (static_cast<int64_t>(blockIdx.x) * (tiles / 2) + tile) * kTileFeatures + f;
      if (c >= n / 2) continue;
      const float gate = ld(st<T>(total(2 * tile, f, r))), up = ld(st<T>(total(2 * tile + 1, f, r)));
      p.y[r * (n / 2) + c] = st<T>(ld(st<T>(gate / (1.f + expf(-gate)))) * up);
      continue;
    }
    const int64_t c = (static_cast<int64_t>(blockIdx.x) * tiles + tile) * kTileFeatures + f;
    if (c >= n) continue;
    float sum = total(tile, f, r);
    if (p.bias != nullptr) sum += ld(p.bias[c]);
    if (p.residual != nullptr) sum += ld(p.residual[r * n + c]);
    p.y[r * n + c] = st<T>(sum);
  }
}

template <typename T, bool kGroup32>
cudaError_t launch_tiles(const GemvArgs<T>& p, cudaStream_t stream) {
  const size_t shared = tiled_shared_bytes(p.rows, p.k, p.prologue);
  if (shared > 48 * 1024) {
    static const cudaError_t raised = cudaFuncSetAttribute(
        gemv_tiles_kernel<T, kGroup32>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMaxShared));
    if (raised != cudaSuccess) return raised;
  }
  const int slices = tile_slices(p.k, p.epilogue);
  const bool paired = p.epilogue == GemvEpilogue::SiluMul;
  const int64_t per_block = paired ? kWarps / slices / 2 : kWarps / slices;
  const int64_t units = paired ? p.n / (2 * kTileFeatures) : p.n / kTileFeatures;
  const dim3 grid(static_cast<unsigned>((units + per_block - 1) / per_block));
  return launch_dependent(gemv_tiles_kernel<T, kGroup32>, grid, dim3(kWarps * 32), shared, stream, p, slices);
}

// One thread per 32-bit word of tiled weights: eight nibbles of features g, g + 8 and inputs c, c + 1,
// c + 8, c + 9, in the order nibble_pair reads them.
__global__ void int4_tiles_kernel(const uint8_t* __restrict__ w, uint32_t* __restrict__ out, int64_t n, int64_t k) {
  const int64_t words = n * k / 8, k_tiles = k / kTileInputs, half_k = k / 2;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t tile = i / 128, ft = tile / k_tiles, kt = tile % k_tiles;
    const int lane = static_cast<int>(i % 128) / 4, j = static_cast<int>(i % 4), g = lane / 4, t = lane % 4;
    const int64_t f = ft * kTileFeatures + g, c = kt * kTileInputs + 16 * j + 2 * t;
    const uint32_t b00 = w[f * half_k + c / 2], b01 = w[f * half_k + c / 2 + 4];
    const uint32_t b10 = w[(f + 8) * half_k + c / 2], b11 = w[(f + 8) * half_k + c / 2 + 4];
    out[i] = (b00 & 0xFu) | (b10 & 0xFu) << 4 | (b01 & 0xFu) << 8 | (b11 & 0xFu) << 12 | (b00 >> 4) << 16 |
             (b10 >> 4) << 20 | (b01 >> 4) << 24 | (b11 >> 4) << 28;
  }
}

// The scales in the order gemv_tiles_kernel loads them (see its `sc`).
__global__ void scale_tiles_kernel(const float* __restrict__ s, float* __restrict__ out, int64_t n, int64_t k,
                                   int64_t group) {
  const int64_t groups = k / group, count = n * groups, k_tiles = k / kTileInputs;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (group == 32) {
      const int64_t chunk = i / 4, tile = chunk / 8, ft = tile / k_tiles, kt = tile % k_tiles;
      const int e = static_cast<int>(i % 4), g = static_cast<int>(chunk % 8);
      out[i] = s[(ft * kTileFeatures + g + 8 * (e & 1)) * groups + 2 * kt + (e >> 1)];
    } else {
      const int64_t chunk = i / 2, ft = chunk / 8 / groups, grp = chunk / 8 % groups;
      const int e = static_cast<int>(i % 2), g = static_cast<int>(chunk % 8);
      out[i] = s[(ft * kTileFeatures + g + 8 * e) * groups + grp];
    }
  }
}

}  // namespace

bool gemv_supported(int64_t rows, int64_t n, int64_t k, int element_size, GemvWeights weights, int64_t group,
                    GemvPrologue prologue, GemvEpilogue epilogue) {
  if (weights == GemvWeights::Int4Tiled) {
    return rows >= 1 && rows <= kGemvMaxRows && element_size == 2 && n > 0 && n % kTileFeatures == 0 && k > 0 &&
           k % kTileInputs == 0 && (group == 32 || (group > 0 && group % kTileInputs == 0)) && k % group == 0 &&
           (epilogue != GemvEpilogue::SiluMul || (n / 2) % kTileFeatures == 0) &&
           tiled_shared_bytes(rows, k, prologue) <= kMaxShared && n / kTileFeatures <= INT32_MAX;
  }
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
    case GemvWeights::Int4Tiled:
      if constexpr (sizeof(T) == 2) {
        return p.group == 32 ? launch_tiles<T, true>(p, stream) : launch_tiles<T, false>(p, stream);
      }
      return cudaErrorInvalidValue;
    case GemvWeights::Int8: return launch_weights<T, GemvWeights::Int8>(p, stream);
    case GemvWeights::Int4: return launch_weights<T, GemvWeights::Int4>(p, stream);
    default: return launch_weights<T, GemvWeights::Dense>(p, stream);
  }
}

cudaError_t launch_int4_tiles(const uint8_t* w, const float* scales, uint8_t* w_tiled, float* scales_tiled, int64_t n,
                              int64_t k, int64_t group, cudaStream_t stream) {
  if (!gemv_supported(1, n, k, 2, GemvWeights::Int4Tiled, group, GemvPrologue::None, GemvEpilogue::None)) {
    return cudaErrorInvalidValue;
  }
  const int64_t words = n * k / 8, count = n * (k / group);
  const auto blocks = [](int64_t items) {
    return static_cast<unsigned>(std::min<int64_t>((items + 255) / 256, 65535));
  };
  int4_tiles_kernel<<<blocks(words), 256, 0, stream>>>(w, reinterpret_cast<uint32_t*>(w_tiled), n, k);
  scale_tiles_kernel<<<blocks(count), 256, 0, stream>>>(scales, scales_tiled, n, k, group);
  return cudaGetLastError();
}

bool gemv_tiles_available() {
  int device = 0, major = 0;
  cudaFuncAttributes attributes{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaFuncGetAttributes(&attributes, gemv_tiles_kernel<__nv_bfloat16, true>) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major >= 8 && attributes.binaryVersion >= 80;  // the code the device runs has the tensor-core path
}

template cudaError_t launch_gemv<float>(const GemvArgs<float>&, cudaStream_t);
template cudaError_t launch_gemv<__half>(const GemvArgs<__half>&, cudaStream_t);
template cudaError_t launch_gemv<__nv_bfloat16>(const GemvArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
