// Activations with parameters and the unary math functions beyond those in elementwise.cpp.
// Every kernel goes through unary() (kernel_util.h): float32 computes in float, other dtypes in double.
#include <cmath>
#include <limits>

#include <executorch/kernels/kernel_util.h>

namespace executorch {
namespace kernels {
namespace {

// A Scalar? argument: None leaves `out` at its fallback.
Error optional_double_at(Args args, size_t i, const char* op, double fallback, double* out) {
  KCHECK(i < args.size(), "%s: missing argument %zu", op, i);
  *out = fallback;
  if (!args[i]->is_none()) ET_TRY(double_at(args, i, op, out));
  return Error::Ok;
}

// op(self, lo, hi, out): NaN stays NaN, as in PyTorch. None bounds (clamp's) are open.
Error clamp_between(Args args, const char* op) {
  ET_TRY(check_count(args, 4, op));
  double lo, hi;
  ET_TRY(optional_double_at(args, 1, op, -std::numeric_limits<double>::infinity(), &lo));
  ET_TRY(optional_double_at(args, 2, op, std::numeric_limits<double>::infinity(), &hi));
  return unary(args, op, 4, [lo, hi](auto x) {
    using T = decltype(x);
    return x != x ? x : std::min(std::max(x, static_cast<T>(lo)), static_cast<T>(hi));
  });
}

// clamp(self, min?, max?); hardtanh(self, min_val, max_val), of which relu6 is hardtanh(0, 6).
Error clamp(KernelRuntimeContext&, Args args) { return clamp_between(args, "aten::clamp"); }
Error hardtanh(KernelRuntimeContext&, Args args) { return clamp_between(args, "aten::hardtanh"); }

Error leaky_relu(KernelRuntimeContext&, Args args) {
  const char* op = "aten::leaky_relu";
  double slope;
  ET_TRY(double_at(args, 1, op, &slope));
  return unary(args, op, 3, [slope](auto x) { return x > 0 ? x : x * static_cast<decltype(x)>(slope); });
}

// elu(self, alpha, scale, input_scale): selu and celu are elus with other constants.
Error elu(KernelRuntimeContext&, Args args) {
  const char* op = "aten::elu";
  double alpha, scale, input_scale;
  ET_TRY(read_args(args, op, 5, at(1, &alpha), at(2, &scale), at(3, &input_scale)));
  return unary(args, op, 5, [=](auto x) {
    using T = decltype(x);
    return x > 0 ? static_cast<T>(scale) * x
                 : static_cast<T>(alpha * scale) * std::expm1(x * static_cast<T>(input_scale));
  });
}

// softplus(self, beta, threshold): linear where beta * x > threshold.
Error softplus(KernelRuntimeContext&, Args args) {
  const char* op = "aten::softplus";
  double beta, threshold;
  ET_TRY(read_args(args, op, 4, at(1, &beta), at(2, &threshold)));
  KCHECK(beta != 0, "%s: beta must not be 0", op);
  return unary(args, op, 4, [beta, threshold](auto x) {
    using T = decltype(x);
    const T b = static_cast<T>(beta);
    return x * b > static_cast<T>(threshold) ? x : std::log1p(std::exp(x * b)) / b;
  });
}

// asin, acos, sinh, cosh, acosh, atanh and log10 compute through double: glibc 2.43 gave their
// float versions new symbol versions, which older systems lack.
#define UNARY(fn, name, expr)                  \
  Error fn(KernelRuntimeContext&, Args args) { \
    return unary(args, name, 2, [](auto x) {   \
      using T = decltype(x);                   \
      (void)T(0);                              \
      return expr;                             \
    });                                        \
  }
UNARY(hardswish, "aten::hardswish", x* std::min(std::max(x + T(3), T(0)), T(6)) / T(6))
UNARY(hardsigmoid, "aten::hardsigmoid", std::min(std::max(x + T(3), T(0)), T(6)) / T(6))
UNARY(mish, "aten::mish", x* std::tanh(x > T(20) ? x : std::log1p(std::exp(x))))
UNARY(sign, "aten::sign", static_cast<T>((x > T(0)) - (x < T(0))))
UNARY(floor_, "aten::floor", std::floor(x))
UNARY(ceil_, "aten::ceil", std::ceil(x))
UNARY(round_, "aten::round", std::nearbyint(x))  // half to even, as PyTorch rounds
UNARY(trunc_, "aten::trunc", std::trunc(x))
UNARY(tan_, "aten::tan", std::tan(x))
UNARY(atan_, "aten::atan", std::atan(x))
UNARY(asin_, "aten::asin", static_cast<T>(std::asin(static_cast<double>(x))))
UNARY(acos_, "aten::acos", static_cast<T>(std::acos(static_cast<double>(x))))
UNARY(sinh_, "aten::sinh", static_cast<T>(std::sinh(static_cast<double>(x))))
UNARY(cosh_, "aten::cosh", static_cast<T>(std::cosh(static_cast<double>(x))))
UNARY(asinh_, "aten::asinh", std::asinh(x))
UNARY(acosh_, "aten::acosh", static_cast<T>(std::acosh(static_cast<double>(x))))
UNARY(atanh_, "aten::atanh", static_cast<T>(std::atanh(static_cast<double>(x))))
UNARY(log1p_, "aten::log1p", std::log1p(x))
UNARY(expm1_, "aten::expm1", std::expm1(x))
UNARY(log2_, "aten::log2", std::log2(x))
UNARY(log10_, "aten::log10", static_cast<T>(std::log10(static_cast<double>(x))))
UNARY(exp2_, "aten::exp2", std::exp2(x))
UNARY(isinf_, "aten::isinf", std::isinf(x) ? T(1) : T(0))
UNARY(isnan_, "aten::isnan", x != x ? T(1) : T(0))
UNARY(logical_not_any, "aten::bitwise_not", x == T(0) ? T(1) : T(0))
#undef UNARY

// bitwise_not: bools flip, integers take their complement.
Error bitwise_not(KernelRuntimeContext& ctx, Args args) {
  const char* op = "aten::bitwise_not";
  Tensor *in, *out;
  ET_TRY(input_output(args, 2, op, &in, &out));
  if (in->scalar_type() == ScalarType::Bool) return logical_not_any(ctx, args);
  KCHECK(in->scalar_type() == out->scalar_type() && in->scalar_type() != ScalarType::Float &&
             in->scalar_type() != ScalarType::Double && in->scalar_type() != ScalarType::Half &&
             in->scalar_type() != ScalarType::BFloat16,
         "%s: takes bool or integer tensors", op);
  ET_TRY(check_numel(*out, in->numel(), op, "output"));
  for (int64_t i = 0; i < in->numel(); ++i) store<int64_t>(*out, i, ~load<int64_t>(*in, i));
  return Error::Ok;
}

const runtime::Kernel kKernels[] = {
    {"aten::clamp", clamp},
    {"aten::hardtanh", hardtanh},
    {"aten::leaky_relu", leaky_relu},
    {"aten::elu", elu},
    {"aten::softplus", softplus},
    {"aten::hardswish", hardswish},
    {"aten::hardsigmoid", hardsigmoid},
    {"aten::mish", mish},
    {"aten::sign", sign},
    {"aten::floor", floor_},
    {"aten::ceil", ceil_},
    {"aten::round", round_},
    {"aten::trunc", trunc_},
    {"aten::tan", tan_},
    {"aten::atan", atan_},
    {"aten::asin", asin_},
    {"aten::acos", acos_},
    {"aten::sinh", sinh_},
    {"aten::cosh", cosh_},
    {"aten::asinh", asinh_},
    {"aten::acosh", acosh_},
    {"aten::atanh", atanh_},
    {"aten::log1p", log1p_},
    {"aten::expm1", expm1_},
    {"aten::log2", log2_},
    {"aten::log10", log10_},
    {"aten::exp2", exp2_},
    {"aten::isinf", isinf_},
    {"aten::isnan", isnan_},
    {"aten::bitwise_not", bitwise_not},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
