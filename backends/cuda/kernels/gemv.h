#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace executorch {
namespace backends {
namespace cuda {

// Matrix-vector products of decode steps: y [rows, n] = x [rows, k] @ w^T (+ bias [n])
// (+ residual [rows, n]) for up to kGemvMaxRows rows, of one floating type T (float, __half or
// __nv_bfloat16), computed in float32 and rounded once. w is [n, k]: one output feature per row,
// read in one pass: each warp streams whole feature rows, with x (all rows) in shared memory. Its
// weights are
//   Dense: T (a linear layer's [k, n] operand transposed);
//   Int8: int8, times scales[c] per feature c (executorch::int8_weight_linear);
//   Int4: two to a byte, column 2i in the low nibble, (q - 8) * scales[c, i / group]
//     (executorch::int4_linear; group a multiple of 32).
//   Int4Tiled: the same weights and scales as laid out by launch_int4_tiles, for tensor cores
//     (T half or bfloat16, from sm_80: gemv_tiles_available).
// The weights' rows start 16-byte aligned: k a multiple of 16 bytes' worth of them.
//
// Folded in from the instructions around the product, which then never run:
//   prologue RmsNorm: x = executorch::rms_norm(a, weight b, eps), rounded as that kernel rounds
//     (a contiguous [rows, k], b [k]);
//   epilogue SiluMul: n = 2 * m features, the first m a gate and the others its up projection; y
//     is [rows, m] = silu(gate) * up, each result rounded to T as the separate ops round it. No
//     bias or residual then.
// y must not overlap x, a, b or w.
constexpr int64_t kGemvMaxRows = 8;

enum class GemvWeights { Dense, Int8, Int4, Int4Tiled };
enum class GemvPrologue { None, RmsNorm };
enum class GemvEpilogue { None, SiluMul };

template <typename T>
struct GemvArgs {
  const T* x = nullptr;  // GemvPrologue::None
  GemvPrologue prologue = GemvPrologue::None;
  const T* a = nullptr;
  const T* b = nullptr;
  float eps = 0.f;
  GemvEpilogue epilogue = GemvEpilogue::None;
  const void* w = nullptr;  // [n, k], 16-byte aligned
  GemvWeights weights = GemvWeights::Dense;
  const float* scales = nullptr;  // Int8: [n]; Int4: [n, k / group]; Int4Tiled: as tiled
  int64_t group = 0;
  const T* bias = nullptr;      // [n] or null
  const T* residual = nullptr;  // [rows, n] or null; may be y itself
  T* y = nullptr;
  int64_t rows = 0, n = 0, k = 0;
};

// Whether launch_gemv takes a product of this shape with elements of `element_size` bytes.
bool gemv_supported(int64_t rows, int64_t n, int64_t k, int element_size, GemvWeights weights, int64_t group,
                    GemvPrologue prologue, GemvEpilogue epilogue);

template <typename T>
cudaError_t launch_gemv(const GemvArgs<T>& args, cudaStream_t stream);

// Int4Tiled: int4 weights [n, k] (Int4's bytes) and their float32 scales [n, k / group] rearranged
// so that each lane of a warp reads, in one 16-byte load, its share of four 16 x 16 operands of a
// tensor-core product (mma m16n8k16): tiles of 16 features x 64 inputs, 512 bytes each, feature tile
// by feature tile; within a 32-bit word the nibbles of one operand in the order that two-at-a-time
// conversion to 16-bit floats wants. The scales follow the tiles (group 32: four per tile row pair;
// a multiple of 64: two per group and row pair). Same sizes as the inputs; out of place.
// Shapes gemv_supported takes as Int4Tiled only.
cudaError_t launch_int4_tiles(const uint8_t* w, const float* scales, uint8_t* w_tiled, float* scales_tiled, int64_t n,
                              int64_t k, int64_t group, cudaStream_t stream);

// Whether the current device runs the Int4Tiled GEMV (tensor cores for 16-bit floats: sm_80 on).
bool gemv_tiles_available();

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
