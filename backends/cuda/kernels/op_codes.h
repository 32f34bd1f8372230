#pragma once

// Operator codes shared by the delegate's payload checks (CPU) and its kernels (CUDA).
namespace executorch {
namespace backends {
namespace cuda {

constexpr int kMaxOpDims = 8;

enum class Unary { Relu, Silu, Gelu, GeluTanh, Sigmoid, Tanh, Neg, Exp, Rsqrt };
enum class Binary { Add, Sub, Mul, Div };
enum class Compare { Eq, Ne, Lt, Le, Gt, Ge };

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
