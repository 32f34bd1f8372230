// Elementwise kernels with PyTorch's broadcasting: arithmetic, comparisons, where, activations.
// The output's dtype (planned by the exporter from PyTorch's type promotion) picks the arithmetic:
// float32 outputs compute in float, integer outputs in int64, bool outputs compare in double.
#include <algorithm>
#include <cmath>

#include <executorch/kernels/kernel_util.h>
#include <executorch/kernels/vector_math.h>

namespace executorch {
namespace kernels {
namespace {

constexpr int kMaxDim = runtime::kTensorDimensionLimit;

// A tensor argument or a scalar one (PyTorch passes Python numbers for `other`).
struct Operand {
  const Tensor* tensor = nullptr;
  double scalar = 0;
};

Error operand_at(Args args, size_t i, const char* op, Operand* out) {
  KCHECK(i < args.size(), "%s: missing argument %zu", op, i);
  if (args[i]->is_tensor()) {
    Tensor* t;
    ET_TRY(tensor_at(args, i, op, &t));
    KCHECK(is_supported_dtype(t->scalar_type()), "%s: argument %zu has unsupported dtype %s", op, i,
           runtime::to_string(t->scalar_type()));
    out->tensor = t;
  } else {
    ET_TRY(double_at(args, i, op, &out->scalar));
  }
  return Error::Ok;
}

template <typename T>
T read(const Operand& o, int64_t offset) {
  return o.tensor ? load<T>(*o.tensor, offset) : static_cast<T>(o.scalar);
}

// out = f(a, b) elementwise with broadcasting; T is the compute type.
template <typename T, typename F>
Error apply_binary(const Operand& a, const Operand& b, const Tensor& out, const char* op, F f) {
  int64_t strides[2][kMaxDim] = {};
  if (a.tensor) ET_TRY(broadcast_strides(*a.tensor, out, op, strides[0]));
  if (b.tensor) ET_TRY(broadcast_strides(*b.tensor, out, op, strides[1]));
  // Fast path: float32 everywhere, `a` the output's shape, `b` the same shape or a scalar.
  if (std::is_same<T, float>::value && out.scalar_type() == ScalarType::Float && a.tensor &&
      a.tensor->scalar_type() == ScalarType::Float && same_shape(*a.tensor, out) &&
      (!b.tensor || (b.tensor->scalar_type() == ScalarType::Float && same_shape(*b.tensor, out)))) {
    const float* pa = a.tensor->data_ptr<float>();
    const float* pb = b.tensor ? b.tensor->data_ptr<float>() : nullptr;
    const float sb = static_cast<float>(b.scalar);
    float* po = out.data_ptr<float>();
    extension::threadpool::parallel_for(0, out.numel(), 32768, [&](int64_t i0, int64_t i1) {
      if (pb) {
        for (int64_t i = i0; i < i1; ++i) po[i] = static_cast<float>(f(pa[i], pb[i]));
      } else {
        for (int64_t i = i0; i < i1; ++i) po[i] = static_cast<float>(f(pa[i], sb));
      }
    });
    return Error::Ok;
  }
  for_each_broadcast<2>(out, strides, [&](int64_t i, const int64_t* offs) {
    store<T>(out, i, static_cast<T>(f(read<T>(a, offs[0]), read<T>(b, offs[1]))));
  });
  return Error::Ok;
}

enum class Math { Float, Int, Double };

Error output_at(Args args, size_t i, const char* op, Tensor** out, Math* math) {
  ET_TRY(tensor_at(args, i, op, out));
  switch ((*out)->scalar_type()) {
    case ScalarType::Float: *math = Math::Float; break;
    case ScalarType::Double:
    case ScalarType::Half:
    case ScalarType::BFloat16: *math = Math::Double; break;
    case ScalarType::Long:
    case ScalarType::Int:
    case ScalarType::Short:
    case ScalarType::Bool:
    case ScalarType::Byte:
    case ScalarType::Char: *math = Math::Int; break;
    default:
      return ET_ERROR(Error::InvalidArgument, "%s: output dtype %s is not supported", op,
                      runtime::to_string((*out)->scalar_type()));
  }
  return Error::Ok;
}

template <typename F>
Error binary(Args args, const char* op, bool has_alpha, F f) {
  const size_t n = has_alpha ? 4 : 3;
  ET_TRY(check_count(args, n, op));
  Operand a, b;
  ET_TRY(operand_at(args, 0, op, &a));
  ET_TRY(operand_at(args, 1, op, &b));
  KCHECK(a.tensor != nullptr || b.tensor != nullptr, "%s: one argument must be a tensor", op);
  double alpha = 1.0;
  if (has_alpha) ET_TRY(double_at(args, 2, op, &alpha));
  Tensor* out;
  Math math;
  ET_TRY(output_at(args, n - 1, op, &out, &math));
  switch (math) {
    case Math::Float: {
      const float al = static_cast<float>(alpha);
      return apply_binary<float>(a, b, *out, op, [&](float x, float y) { return f(x, y, al); });
    }
    case Math::Double: return apply_binary<double>(a, b, *out, op, [&](double x, double y) { return f(x, y, alpha); });
    case Math::Int: {
      const int64_t al = static_cast<int64_t>(alpha);
      return apply_binary<int64_t>(a, b, *out, op, [&](int64_t x, int64_t y) { return f(x, y, al); });
    }
  }
  return Error::Internal;
}

template <typename F>
Error compare(Args args, const char* op, F f) {
  ET_TRY(check_count(args, 3, op));
  Operand a, b;
  ET_TRY(operand_at(args, 0, op, &a));
  ET_TRY(operand_at(args, 1, op, &b));
  KCHECK(a.tensor != nullptr, "%s: the first argument must be a tensor", op);
  Tensor* out;
  ET_TRY(tensor_at(args, 2, op, &out));
  ET_TRY(check_dtype(*out, ScalarType::Bool, op, "output"));
  if (a.tensor->scalar_type() == ScalarType::Float && same_shape(*a.tensor, *out) &&
      (!b.tensor || (b.tensor->scalar_type() == ScalarType::Float && same_shape(*b.tensor, *out)))) {
    const float* pa = a.tensor->data_ptr<float>();
    const float* pb = b.tensor ? b.tensor->data_ptr<float>() : nullptr;
    const double sb = b.scalar;
    bool* po = out->data_ptr<bool>();
    for (int64_t i = 0; i < out->numel(); ++i) po[i] = f(pa[i], pb ? static_cast<double>(pb[i]) : sb);
    return Error::Ok;
  }
  return apply_binary<double>(a, b, *out, op, [&](double x, double y) { return f(x, y) ? 1.0 : 0.0; });
}

#define BINARY(fn, name, alpha, expr)                              \
  Error fn(KernelRuntimeContext&, Args args) {                     \
    return binary(args, name, alpha, [](auto x, auto y, auto al) { \
      (void)al;                                                    \
      return expr;                                                 \
    });                                                            \
  }
BINARY(add, "aten::add.Tensor", true, x + al * y)
BINARY(add_scalar, "aten::add.Scalar", true, x + al * y)
BINARY(sub, "aten::sub.Tensor", true, x - al * y)
BINARY(sub_scalar, "aten::sub.Scalar", true, x - al * y)
BINARY(mul, "aten::mul.Tensor", false, x* y)
BINARY(mul_scalar, "aten::mul.Scalar", false, x* y)
BINARY(maximum, "aten::maximum", false, (x > y || x != x) ? x : y)
BINARY(minimum, "aten::minimum", false, (x < y || x != x) ? x : y)
#undef BINARY

// True division: integer inputs divide in the output's (floating) type.
Error div(KernelRuntimeContext&, Args args) {
  return binary(args, "aten::div.Tensor", false, [](auto x, auto y, auto) { return x / y; });
}
Error div_scalar(KernelRuntimeContext&, Args args) {
  return binary(args, "aten::div.Scalar", false, [](auto x, auto y, auto) { return x / y; });
}
Error pow_tensor_tensor(KernelRuntimeContext&, Args args) {
  return binary(args, "aten::pow.Tensor_Tensor", false, [](auto x, auto y, auto) { return std::pow(x, y); });
}
Error pow_tensor_scalar(KernelRuntimeContext&, Args args) {
  return binary(args, "aten::pow.Tensor_Scalar", false, [](auto x, auto y, auto) {
    using T = decltype(x);
    if (y == T(2)) return x * x;
    if (y == T(0.5)) return static_cast<T>(std::sqrt(x));
    return static_cast<T>(std::pow(x, y));
  });
}

// Integer division and remainder by zero give 0 rather than trapping (PyTorch raises there).
template <typename T>
T int_safe_div(T x, T y) {
  if (std::is_integral<T>::value && y == T(0)) return T(0);
  return x / y;
}

template <typename T>
T floor_div(T x, T y) {
  if constexpr (std::is_integral<T>::value) {
    if (y == T(0)) return T(0);
    const T q = x / y;
    return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
  } else {
    return std::floor(x / y);
  }
}

template <typename T>
T c_fmod(T x, T y) {
  if (std::is_integral<T>::value) return y == T(0) ? T(0) : static_cast<T>(std::fmod(x, y));
  return static_cast<T>(std::fmod(x, y));
}

// Python's remainder: the sign of the divisor.
template <typename T>
T py_remainder(T x, T y) {
  if (std::is_integral<T>::value && y == T(0)) return T(0);
  T r = c_fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

template <typename T>
T bit_and(T x, T y) {
  if constexpr (std::is_integral<T>::value)
    return x & y;
  else
    return T((x != 0) && (y != 0));
}
template <typename T>
T bit_or(T x, T y) {
  if constexpr (std::is_integral<T>::value)
    return x | y;
  else
    return T((x != 0) || (y != 0));
}
template <typename T>
T bit_xor(T x, T y) {
  if constexpr (std::is_integral<T>::value)
    return x ^ y;
  else
    return T((x != 0) != (y != 0));
}

#define BINARY(fn, name, expr)                                                   \
  Error fn(KernelRuntimeContext&, Args args) {                                   \
    return binary(args, name, false, [](auto x, auto y, auto) { return expr; }); \
  }
BINARY(fmod_tensor, "aten::fmod.Tensor", c_fmod(x, y))
BINARY(fmod_scalar, "aten::fmod.Scalar", c_fmod(x, y))
BINARY(remainder_tensor, "aten::remainder.Tensor", py_remainder(x, y))
BINARY(remainder_scalar, "aten::remainder.Scalar", py_remainder(x, y))
BINARY(floor_divide, "aten::floor_divide", floor_div(x, y))
BINARY(bitwise_and_tensor, "aten::bitwise_and.Tensor", bit_and(x, y))
BINARY(bitwise_and_scalar, "aten::bitwise_and.Scalar", bit_and(x, y))
BINARY(bitwise_or_tensor, "aten::bitwise_or.Tensor", bit_or(x, y))
BINARY(bitwise_or_scalar, "aten::bitwise_or.Scalar", bit_or(x, y))
BINARY(bitwise_xor_tensor, "aten::bitwise_xor.Tensor", bit_xor(x, y))
BINARY(bitwise_xor_scalar, "aten::bitwise_xor.Scalar", bit_xor(x, y))
BINARY(atan2_, "aten::atan2",
       std::atan2(static_cast<double>(x), static_cast<double>(y)))  // atan2f has a glibc 2.43 symbol version
BINARY(pow_scalar, "aten::pow.Scalar", std::pow(x, y))
#undef BINARY

// div.Tensor_mode / div.Scalar_mode(self, other, rounding_mode?): None, "trunc" or "floor".
Error div_mode(Args args, const char* op) {
  ET_TRY(check_count(args, 4, op));
  int mode = 0;
  if (!args[2]->is_none()) {
    KCHECK(args[2]->tag() == EValue::Tag::String, "%s: rounding_mode must be a string", op);
    const auto m = args[2]->to_string();
    const bool trunc = m.size() == 5 && std::memcmp(m.data(), "trunc", 5) == 0;
    KCHECK(trunc || (m.size() == 5 && std::memcmp(m.data(), "floor", 5) == 0),
           "%s: rounding_mode must be 'trunc' or 'floor'", op);
    mode = trunc ? 1 : 2;
  }
  EValue* three[] = {args[0], args[1], args[3]};
  const Args rest(three, 3);
  switch (mode) {
    case 0: return binary(rest, op, false, [](auto x, auto y, auto) { return int_safe_div(x, y); });
    case 1:
      return binary(rest, op, false, [](auto x, auto y, auto) {
        using T = decltype(x);
        return std::is_integral<T>::value ? int_safe_div(x, y) : static_cast<T>(std::trunc(x / y));
      });
    default: return binary(rest, op, false, [](auto x, auto y, auto) { return floor_div(x, y); });
  }
}
Error div_tensor_mode(KernelRuntimeContext&, Args args) { return div_mode(args, "aten::div.Tensor_mode"); }
Error div_scalar_mode(KernelRuntimeContext&, Args args) { return div_mode(args, "aten::div.Scalar_mode"); }

#define COMPARE(fn, name, expr)                                          \
  Error fn(KernelRuntimeContext&, Args args) {                           \
    return compare(args, name, [](double x, double y) { return expr; }); \
  }
COMPARE(eq_tensor, "aten::eq.Tensor", x == y)
COMPARE(eq_scalar, "aten::eq.Scalar", x == y)
COMPARE(ne_tensor, "aten::ne.Tensor", x != y)
COMPARE(ne_scalar, "aten::ne.Scalar", x != y)
COMPARE(lt_tensor, "aten::lt.Tensor", x < y)
COMPARE(lt_scalar, "aten::lt.Scalar", x < y)
COMPARE(le_tensor, "aten::le.Tensor", x <= y)
COMPARE(le_scalar, "aten::le.Scalar", x <= y)
COMPARE(gt_tensor, "aten::gt.Tensor", x > y)
COMPARE(gt_scalar, "aten::gt.Scalar", x > y)
COMPARE(ge_tensor, "aten::ge.Tensor", x >= y)
COMPARE(ge_scalar, "aten::ge.Scalar", x >= y)
COMPARE(logical_and, "aten::logical_and", x != 0 && y != 0)
COMPARE(logical_or, "aten::logical_or", x != 0 || y != 0)
COMPARE(logical_xor, "aten::logical_xor", (x != 0) != (y != 0))
#undef COMPARE

// where(condition, self, other): three-way broadcast.
Error where(KernelRuntimeContext&, Args args) {
  const char* op = "aten::where.self";
  ET_TRY(check_count(args, 4, op));
  Tensor* cond;
  ET_TRY(tensor_at(args, 0, op, &cond));
  ET_TRY(check_dtype(*cond, ScalarType::Bool, op, "condition"));
  Operand a, b;
  ET_TRY(operand_at(args, 1, op, &a));
  ET_TRY(operand_at(args, 2, op, &b));
  Tensor* out;
  Math math;
  ET_TRY(output_at(args, 3, op, &out, &math));
  int64_t strides[3][kMaxDim] = {};
  ET_TRY(broadcast_strides(*cond, *out, op, strides[0]));
  if (a.tensor) ET_TRY(broadcast_strides(*a.tensor, *out, op, strides[1]));
  if (b.tensor) ET_TRY(broadcast_strides(*b.tensor, *out, op, strides[2]));
  const bool* c = cond->data_ptr<bool>();
  if (math == Math::Float && a.tensor && b.tensor && a.tensor->scalar_type() == ScalarType::Float &&
      b.tensor->scalar_type() == ScalarType::Float) {
    const float* pa = a.tensor->data_ptr<float>();
    const float* pb = b.tensor->data_ptr<float>();
    float* po = out->data_ptr<float>();
    for_each_broadcast<3>(*out, strides,
                          [&](int64_t i, const int64_t* offs) { po[i] = c[offs[0]] ? pa[offs[1]] : pb[offs[2]]; });
    return Error::Ok;
  }
  for_each_broadcast<3>(*out, strides, [&](int64_t i, const int64_t* offs) {
    store<double>(*out, i, c[offs[0]] ? read<double>(a, offs[1]) : read<double>(b, offs[2]));
  });
  return Error::Ok;
}

#define UNARY(fn, name, expr)                                 \
  Error fn(KernelRuntimeContext&, Args args) {                \
    return unary(args, name, 2, [](auto x) { return expr; }); \
  }
UNARY(neg, "aten::neg", -x)
UNARY(relu, "aten::relu", x > 0 ? x : decltype(x)(0))
Error silu_(KernelRuntimeContext&, Args args) {
  return unary(
      args, "aten::silu", 2, [](auto x) { return x / (1 + std::exp(-x)); }, silu);
}
Error sigmoid(KernelRuntimeContext&, Args args) {
  return unary(
      args, "aten::sigmoid", 2, [](auto x) { return 1 / (1 + std::exp(-x)); }, logistic);
}
UNARY(tanh_, "aten::tanh", std::tanh(x))
UNARY(exp_, "aten::exp", std::exp(x))
UNARY(log_, "aten::log", std::log(x))
UNARY(sqrt_, "aten::sqrt", std::sqrt(x))
UNARY(rsqrt, "aten::rsqrt", 1 / std::sqrt(x))
UNARY(abs_, "aten::abs", std::fabs(x))
UNARY(reciprocal, "aten::reciprocal", 1 / x)
UNARY(sin_, "aten::sin", std::sin(x))
UNARY(cos_, "aten::cos", std::cos(x))
UNARY(erf_, "aten::erf", std::erf(x))
#undef UNARY

// logical_not(self): any dtype in, bool out.
Error logical_not(KernelRuntimeContext&, Args args) {
  const char* op = "aten::logical_not";
  Tensor *in, *out;
  ET_TRY(input_output(args, 2, op, &in, &out));
  KCHECK(is_supported_dtype(in->scalar_type()), "%s: unsupported input dtype", op);
  ET_TRY(check_dtype(*out, ScalarType::Bool, op, "output"));
  ET_TRY(check_numel(*out, in->numel(), op, "output"));
  bool* y = out->data_ptr<bool>();
  for (int64_t i = 0; i < in->numel(); ++i) y[i] = load<double>(*in, i) == 0.0;
  return Error::Ok;
}

// masked_fill.Scalar / masked_fill.Tensor(self, mask, value): where(mask, value, self).
Error masked_fill(Args args, const char* op) {
  Tensor *self, *mask, *out;
  ET_TRY(read_args(args, op, 4, at(0, &self), at(1, &mask), at(3, &out)));
  ET_TRY(check_dtype(*mask, ScalarType::Bool, op, "mask"));
  KCHECK(is_supported_dtype(self->scalar_type()) && out->scalar_type() == self->scalar_type(), "%s: dtype mismatch",
         op);
  double value;
  if (args[2]->is_tensor()) {
    Tensor* v;
    ET_TRY(tensor_at(args, 2, op, &v));
    KCHECK(v->numel() == 1 && is_supported_dtype(v->scalar_type()), "%s: value must be a one-element tensor", op);
    value = load<double>(*v, 0);
  } else {
    ET_TRY(double_at(args, 2, op, &value));
  }
  int64_t strides[2][kMaxDim] = {};
  ET_TRY(broadcast_strides(*self, *out, op, strides[0]));
  ET_TRY(broadcast_strides(*mask, *out, op, strides[1]));
  const bool* m = mask->data_ptr<bool>();
  if (out->scalar_type() == ScalarType::Float) {
    const float* x = self->data_ptr<float>();
    float* y = out->data_ptr<float>();
    const float v = static_cast<float>(value);
    for_each_broadcast<2>(*out, strides, [&](int64_t i, const int64_t* offs) { y[i] = m[offs[1]] ? v : x[offs[0]]; });
    return Error::Ok;
  }
  for_each_broadcast<2>(*out, strides, [&](int64_t i, const int64_t* offs) {
    store<double>(*out, i, m[offs[1]] ? value : load<double>(*self, offs[0]));
  });
  return Error::Ok;
}
Error masked_fill_scalar(KernelRuntimeContext&, Args args) { return masked_fill(args, "aten::masked_fill.Scalar"); }
Error masked_fill_tensor(KernelRuntimeContext&, Args args) { return masked_fill(args, "aten::masked_fill.Tensor"); }

// copy(self, src, non_blocking): src broadcast to self's shape, in self's dtype.
Error copy(KernelRuntimeContext&, Args args) {
  const char* op = "aten::copy";
  Tensor *self, *src, *out;
  ET_TRY(read_args(args, op, 4, at(0, &self), at(1, &src), at(3, &out)));
  KCHECK(same_shape(*self, *out) && self->scalar_type() == out->scalar_type(), "%s: output mismatch", op);
  KCHECK(is_supported_dtype(src->scalar_type()) && is_supported_dtype(out->scalar_type()), "%s: unsupported dtype", op);
  if (same_shape(*src, *out) && src->scalar_type() == out->scalar_type()) {
    if (out->nbytes()) std::memmove(out->mutable_data_ptr(), src->const_data_ptr(), out->nbytes());
    return Error::Ok;
  }
  int64_t strides[1][kMaxDim] = {};
  ET_TRY(broadcast_strides(*src, *out, op, strides[0]));
  for_each_broadcast<1>(*out, strides,
                        [&](int64_t i, const int64_t* offs) { store<double>(*out, i, load<double>(*src, offs[0])); });
  return Error::Ok;
}

// gelu(self, approximate): "none" (erf) or "tanh".
Error gelu(KernelRuntimeContext&, Args args) {
  const char* op = "aten::gelu";
  ET_TRY(check_count(args, 3, op));
  KCHECK(args[1]->tag() == EValue::Tag::String, "%s: approximate must be a string", op);
  const auto mode = args[1]->to_string();
  const bool tanh_mode = mode.size() == 4 && std::memcmp(mode.data(), "tanh", 4) == 0;
  KCHECK(tanh_mode || (mode.size() == 4 && std::memcmp(mode.data(), "none", 4) == 0),
         "%s: approximate must be 'none' or 'tanh'", op);
  if (tanh_mode) {
    return unary(args, op, 3, [](auto x) {
      using T = decltype(x);
      return T(0.5) * x * (1 + std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
    });
  }
  return unary(
      args, op, 3,
      [](auto x) {  // other dtypes, through double; float32 runs take gelu_erf
        using T = decltype(x);
        return T(0.5) * x * (1 + std::erf(x * T(0.7071067811865476)));
      },
      gelu_erf);
}

// out[i] = convert(in[i]) over every element, From and To the storage types of the two dtypes.
template <typename From, typename To, To (*Convert)(From)>
void convert_all(const Tensor& in, const Tensor& out) {
  const auto* src = static_cast<const From*>(in.const_data_ptr());
  auto* dst = static_cast<To*>(out.mutable_data_ptr());
  const int64_t n = in.numel();
  for (int64_t i = 0; i < n; ++i) dst[i] = Convert(src[i]);
}

// float16/bfloat16 <-> float32 in a typed loop: the conversions half-precision programs run around
// every operator that computes (the general path goes through double, one dtype switch an element).
bool half_float_copy(const Tensor& in, const Tensor& out) {
  const ScalarType from = in.scalar_type(), to = out.scalar_type();
  if (to == ScalarType::Float && from == ScalarType::Half) {
    convert_all<uint16_t, float, half_to_float>(in, out);
  } else if (to == ScalarType::Float && from == ScalarType::BFloat16) {
    convert_all<uint16_t, float, bfloat16_to_float>(in, out);
  } else if (from == ScalarType::Float && to == ScalarType::Half) {
    convert_all<float, uint16_t, float_to_half>(in, out);
  } else if (from == ScalarType::Float && to == ScalarType::BFloat16) {
    convert_all<float, uint16_t, float_to_bfloat16>(in, out);
  } else {
    return false;
  }
  return true;
}

// clone(self, memory_format) and _to_copy(self, dtype, layout, device, pin_memory, non_blocking,
// memory_format): a copy, converting the dtype when the output's differs.
Error copy_to(const Tensor& in, const Tensor& out, const char* op) {
  ET_TRY(check_numel(out, in.numel(), op, "output"));
  if (in.scalar_type() == out.scalar_type()) {  // bytes, whatever the dtype (float16 and bfloat16 too)
    if (in.nbytes() && in.const_data_ptr() != out.const_data_ptr()) {
      std::memmove(out.mutable_data_ptr(), in.const_data_ptr(), in.nbytes());
    }
    return Error::Ok;
  }
  KCHECK(is_supported_dtype(in.scalar_type()) && is_supported_dtype(out.scalar_type()), "%s: unsupported dtype", op);
  if (half_float_copy(in, out)) return Error::Ok;
  for (int64_t i = 0; i < in.numel(); ++i) store<double>(out, i, load<double>(in, i));
  return Error::Ok;
}

Error clone(KernelRuntimeContext&, Args args) {
  const char* op = "aten::clone";
  Tensor *in, *out;
  ET_TRY(input_output(args, 3, op, &in, &out));
  return copy_to(*in, *out, op);
}

Error to_copy(KernelRuntimeContext&, Args args) {
  const char* op = "aten::_to_copy";
  Tensor *in, *out;
  ET_TRY(input_output(args, 8, op, &in, &out));
  return copy_to(*in, *out, op);
}

// executorch::rope(x, cos, sin) -> out: x * cos + rotate_half(x) * sin, rotate_half(x) =
// cat(-x[..., D/2:], x[..., :D/2]), cos and sin broadcast to x (docs/program_format.md).
Error rope(KernelRuntimeContext&, Args args) {
  const char* op = "executorch::rope";
  Tensor *x, *cos, *sin, *out;
  ET_TRY(read_args(args, op, 4, at(0, &x), at(1, &cos), at(2, &sin), at(3, &out)));
  for (const Tensor* t : {x, cos, sin, out}) ET_TRY(check_dtype(*t, ScalarType::Float, op, "tensor"));
  KCHECK(x->dim() >= 1 && x->size(x->dim() - 1) % 2 == 0, "%s: the input needs an even last size", op);
  KCHECK(same_shape(*x, *out), "%s: output shape differs from input", op);
  int64_t strides[3][kMaxDim] = {};
  ET_TRY(broadcast_strides(*x, *out, op, strides[0]));
  ET_TRY(broadcast_strides(*cos, *out, op, strides[1]));
  ET_TRY(broadcast_strides(*sin, *out, op, strides[2]));
  const int64_t width = out->size(out->dim() - 1), half = width / 2, step = strides[0][out->dim() - 1];
  const float *px = x->data_ptr<float>(), *pc = cos->data_ptr<float>(), *ps = sin->data_ptr<float>();
  float* po = out->data_ptr<float>();
  const int last = out->dim() - 1;
  if (step == 1 && strides[1][last] == 1 && strides[2][last] == 1) {  // rows contiguous: two vectorized halves
    for_each_broadcast_row<3>(*out, strides, [&](int64_t r, const int64_t* base) {
      const float *xr = px + base[0], *cr = pc + base[1], *sr = ps + base[2];
      float* o = po + r * width;
      for (int64_t d = 0; d < half; ++d) o[d] = xr[d] * cr[d] - xr[d + half] * sr[d];
      for (int64_t d = half; d < width; ++d) o[d] = xr[d] * cr[d] + xr[d - half] * sr[d];
    });
    return Error::Ok;
  }
  for_each_broadcast<3>(*out, strides, [&](int64_t i, const int64_t* offs) {
    const int64_t d = i % width;
    const float partner = d < half ? -px[offs[0] + half * step] : px[offs[0] - half * step];
    po[i] = px[offs[0]] * pc[offs[1]] + partner * ps[offs[2]];
  });
  return Error::Ok;
}

const runtime::Kernel kKernels[] = {
    {"executorch::rope", rope},
    {"aten::add.Tensor", add},
    {"aten::add.Scalar", add_scalar},
    {"aten::sub.Tensor", sub},
    {"aten::sub.Scalar", sub_scalar},
    {"aten::mul.Tensor", mul},
    {"aten::mul.Scalar", mul_scalar},
    {"aten::div.Tensor", div},
    {"aten::div.Scalar", div_scalar},
    {"aten::pow.Tensor_Tensor", pow_tensor_tensor},
    {"aten::pow.Tensor_Scalar", pow_tensor_scalar},
    {"aten::maximum", maximum},
    {"aten::minimum", minimum},
    {"aten::eq.Tensor", eq_tensor},
    {"aten::eq.Scalar", eq_scalar},
    {"aten::ne.Tensor", ne_tensor},
    {"aten::ne.Scalar", ne_scalar},
    {"aten::lt.Tensor", lt_tensor},
    {"aten::lt.Scalar", lt_scalar},
    {"aten::le.Tensor", le_tensor},
    {"aten::le.Scalar", le_scalar},
    {"aten::gt.Tensor", gt_tensor},
    {"aten::gt.Scalar", gt_scalar},
    {"aten::ge.Tensor", ge_tensor},
    {"aten::ge.Scalar", ge_scalar},
    {"aten::logical_and", logical_and},
    {"aten::logical_or", logical_or},
    {"aten::logical_xor", logical_xor},
    {"aten::fmod.Tensor", fmod_tensor},
    {"aten::fmod.Scalar", fmod_scalar},
    {"aten::remainder.Tensor", remainder_tensor},
    {"aten::remainder.Scalar", remainder_scalar},
    {"aten::floor_divide", floor_divide},
    {"aten::bitwise_and.Tensor", bitwise_and_tensor},
    {"aten::bitwise_and.Scalar", bitwise_and_scalar},
    {"aten::bitwise_or.Tensor", bitwise_or_tensor},
    {"aten::bitwise_or.Scalar", bitwise_or_scalar},
    {"aten::bitwise_xor.Tensor", bitwise_xor_tensor},
    {"aten::bitwise_xor.Scalar", bitwise_xor_scalar},
    {"aten::atan2", atan2_},
    {"aten::pow.Scalar", pow_scalar},
    {"aten::div.Tensor_mode", div_tensor_mode},
    {"aten::div.Scalar_mode", div_scalar_mode},
    {"aten::masked_fill.Scalar", masked_fill_scalar},
    {"aten::masked_fill.Tensor", masked_fill_tensor},
    {"aten::copy", copy},
    {"aten::where.self", where},
    {"aten::logical_not", logical_not},
    {"aten::neg", neg},
    {"aten::relu", relu},
    {"aten::gelu", gelu},
    {"aten::silu", silu_},
    {"aten::sigmoid", sigmoid},
    {"aten::tanh", tanh_},
    {"aten::exp", exp_},
    {"aten::log", log_},
    {"aten::sqrt", sqrt_},
    {"aten::rsqrt", rsqrt},
    {"aten::abs", abs_},
    {"aten::reciprocal", reciprocal},
    {"aten::sin", sin_},
    {"aten::cos", cos_},
    {"aten::erf", erf_},
    {"aten::clone", clone},
    {"aten::_to_copy", to_copy},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
