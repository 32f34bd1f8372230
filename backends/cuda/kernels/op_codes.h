#pragma once

// Operator codes shared by the delegate's payload checks (CPU) and its kernels (CUDA).
#include <cstdint>

namespace executorch {
namespace backends {
namespace cuda {

constexpr int kMaxOpDims = 8;
// Attention: head sizes up to this (a lane of a warp holds head_dim / 32 outputs), query rows per
// block, and queries per head (the grid's second dimension counts blocks of rows).
constexpr int kMaxAttentionHeadDim = 128;
constexpr int kAttentionRowsPerBlock = 8;
constexpr int64_t kMaxAttentionQueries = int64_t{65535} * kAttentionRowsPerBlock;

// Unary ops; Clamp, LeakyRelu and Pow read two scalar parameters p0, p1 (bounds, slope, exponent).
enum class Unary {
  Relu,
  Silu,
  Gelu,
  GeluTanh,
  Sigmoid,
  Tanh,
  Neg,
  Exp,
  Rsqrt,
  Clamp,
  HardSwish,
  HardSigmoid,
  LeakyRelu,
  Pow,
  Sqrt,
  Abs,
  Log,
  Sin,
  Cos,
  Erf
};
enum class Binary { Add, Sub, Mul, Div, Max, Min };
enum class Compare { Eq, Ne, Lt, Le, Gt, Ge };
// The element types _to_copy converts between.
enum class ElementType { Float32, Float16, BFloat16, Bool, Int32, Int64 };
// Elementwise ops on bool tensors (bitwise_and/or/xor, logical_and/or).
enum class Logic { And, Or, Xor };
// An attention mask: none, bool (true: attend) or added to the scores.
enum class AttentionMask { None, Bool, Additive };

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
