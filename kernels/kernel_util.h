#pragma once

// Shared argument checking and iteration helpers for the CPU kernels. Every kernel validates its
// arguments (count, kinds, dtypes, shapes of the planned outputs) before touching memory: a
// program is untrusted input, and a mismatch is an Error, never a crash.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/half.h>
#include <executorch/runtime/core/log.h>
#include <executorch/runtime/kernel/kernel_registry.h>

namespace executorch {
namespace kernels {

using runtime::Error;
using runtime::EValue;
using runtime::KernelRuntimeContext;
using runtime::same_shape;
using runtime::ScalarType;
using runtime::Span;
using runtime::Tensor;
using Args = Span<EValue*>;

#define KCHECK(cond, ...) ET_CHECK_OR_RETURN(cond, ::executorch::runtime::Error::InvalidArgument, __VA_ARGS__)

inline Error check_count(Args args, size_t n, const char* op) {
  KCHECK(args.size() == n, "%s takes %zu arguments, got %zu", op, n, args.size());
  return Error::Ok;
}

// args[i] as a CPU tensor with data, or an error naming the operator.
inline Error tensor_at(Args args, size_t i, const char* op, Tensor** out) {
  KCHECK(i < args.size() && args[i]->is_tensor(), "%s: argument %zu must be a tensor", op, i);
  Tensor& t = args[i]->to_tensor();
  KCHECK(!t.is_cuda(), "%s: argument %zu is in CUDA memory; this is a CPU kernel", op, i);
  KCHECK(t.mutable_data_ptr() != nullptr || t.numel() == 0, "%s: argument %zu has no memory", op, i);
  *out = &t;
  return Error::Ok;
}

inline Error int_at(Args args, size_t i, const char* op, int64_t* out) {
  KCHECK(i < args.size() && (args[i]->is_int() || args[i]->is_bool()), "%s: argument %zu must be an int", op, i);
  *out = args[i]->is_int() ? args[i]->to_int() : args[i]->to_bool();
  return Error::Ok;
}

inline Error double_at(Args args, size_t i, const char* op, double* out) {
  KCHECK(i < args.size() && args[i]->is_scalar(), "%s: argument %zu must be a number", op, i);
  *out = args[i]->scalar_as_double();
  return Error::Ok;
}

inline Error int_list_at(Args args, size_t i, const char* op, Span<const int64_t>* out) {
  KCHECK(i < args.size() && args[i]->is_int_list(), "%s: argument %zu must be an int list", op, i);
  *out = args[i]->to_int_list();
  return Error::Ok;
}

// Argument `index` of a kernel, read into *out by read_args: at(5, &values) with a Tensor*,
// int64_t, double or Span<const int64_t> (an int list) destination.
template <typename T>
struct ArgAt {
  size_t index;
  T* out;
};
template <typename T>
ArgAt<T> at(size_t index, T* out) {
  return {index, out};
}
inline Error read_arg(Args args, const char* op, ArgAt<Tensor*> a) { return tensor_at(args, a.index, op, a.out); }
inline Error read_arg(Args args, const char* op, ArgAt<int64_t> a) { return int_at(args, a.index, op, a.out); }
inline Error read_arg(Args args, const char* op, ArgAt<double> a) { return double_at(args, a.index, op, a.out); }
inline Error read_arg(Args args, const char* op, ArgAt<Span<const int64_t>> a) {
  return int_list_at(args, a.index, op, a.out);
}

// A tensor argument that may be None: *out is then nullptr.
struct OptionalTensorAt {
  size_t index;
  Tensor** out;
};
inline OptionalTensorAt optional_at(size_t index, Tensor** out) { return {index, out}; }
inline Error read_arg(Args args, const char* op, OptionalTensorAt a) {
  if (a.index < args.size() && args[a.index]->is_none()) {
    *a.out = nullptr;
    return Error::Ok;
  }
  return tensor_at(args, a.index, op, a.out);
}

// Checks that operator `op` has `n` arguments, then reads those named (at(), optional_at()), in
// order: the first of the wrong kind is the error.
template <typename... A>
Error read_args(Args args, const char* op, size_t n, A... wanted) {
  ET_TRY(check_count(args, n, op));
  Error e = Error::Ok;
  (void)(((e = read_arg(args, op, wanted)) == Error::Ok) && ...);
  return e;
}

// A kernel of `n` arguments whose first is its input and last its output, both CPU tensors.
inline Error input_output(Args args, size_t n, const char* op, Tensor** in, Tensor** out) {
  return read_args(args, op, n, at(0, in), at(n - 1, out));
}

// Wraps a negative dimension; error when out of range.
inline Error normalize_dim(int64_t dim, int64_t rank, const char* op, int64_t* out) {
  const int64_t r = rank == 0 ? 1 : rank;
  KCHECK(dim >= -r && dim < r, "%s: dim %lld out of range for rank %lld", op, static_cast<long long>(dim),
         static_cast<long long>(rank));
  *out = dim < 0 ? dim + r : dim;
  return Error::Ok;
}

// (outer, size, inner) of contiguous `t` around dimension `dim` (a 0-D tensor is one element).
inline void split_at(const Tensor& t, int64_t dim, int64_t* outer, int64_t* size, int64_t* inner) {
  *outer = 1, *inner = 1;
  for (int64_t d = 0; d < dim; ++d) *outer *= t.size(static_cast<int>(d));
  *size = t.dim() == 0 ? 1 : t.size(static_cast<int>(dim));
  for (int64_t d = dim + 1; d < t.dim(); ++d) *inner *= t.size(static_cast<int>(d));
}

inline Error check_dtype(const Tensor& t, ScalarType want, const char* op, const char* what) {
  KCHECK(t.scalar_type() == want, "%s: %s has dtype %s, expected %s", op, what, runtime::to_string(t.scalar_type()),
         runtime::to_string(want));
  return Error::Ok;
}

inline Error check_numel(const Tensor& t, int64_t want, const char* op, const char* what) {
  KCHECK(t.numel() == want, "%s: %s has %lld elements, expected %lld", op, what, static_cast<long long>(t.numel()),
         static_cast<long long>(want));
  return Error::Ok;
}

using runtime::bfloat16_to_float;
using runtime::float_to_bfloat16;
using runtime::float_to_half;
using runtime::half_to_float;

// Reads element i of a tensor of any supported dtype as T.
template <typename T>
inline T load(const Tensor& t, int64_t i) {
  const void* p = t.const_data_ptr();
  switch (t.scalar_type()) {
    case ScalarType::Float: return static_cast<T>(static_cast<const float*>(p)[i]);
    case ScalarType::Double: return static_cast<T>(static_cast<const double*>(p)[i]);
    case ScalarType::Long: return static_cast<T>(static_cast<const int64_t*>(p)[i]);
    case ScalarType::Int: return static_cast<T>(static_cast<const int32_t*>(p)[i]);
    case ScalarType::Bool: return static_cast<T>(static_cast<const bool*>(p)[i]);
    case ScalarType::Byte: return static_cast<T>(static_cast<const uint8_t*>(p)[i]);
    case ScalarType::Char: return static_cast<T>(static_cast<const int8_t*>(p)[i]);
    case ScalarType::Short: return static_cast<T>(static_cast<const int16_t*>(p)[i]);
    case ScalarType::Half: return static_cast<T>(half_to_float(static_cast<const uint16_t*>(p)[i]));
    case ScalarType::BFloat16: return static_cast<T>(bfloat16_to_float(static_cast<const uint16_t*>(p)[i]));
    default: return T(0);
  }
}

template <typename T>
inline void store(const Tensor& t, int64_t i, T v) {
  void* p = t.mutable_data_ptr();
  switch (t.scalar_type()) {
    case ScalarType::Float: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case ScalarType::Double: static_cast<double*>(p)[i] = static_cast<double>(v); break;
    case ScalarType::Long: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case ScalarType::Int: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case ScalarType::Bool: static_cast<bool*>(p)[i] = v != T(0); break;
    case ScalarType::Byte: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case ScalarType::Char: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case ScalarType::Short: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); break;
    case ScalarType::Half: static_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v)); break;
    case ScalarType::BFloat16: static_cast<uint16_t*>(p)[i] = float_to_bfloat16(static_cast<float>(v)); break;
    default: break;
  }
}

inline bool is_supported_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::Float:
    case ScalarType::Double:
    case ScalarType::Long:
    case ScalarType::Int:
    case ScalarType::Bool:
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Half:
    case ScalarType::BFloat16: return true;
    default: return false;
  }
}

// Element strides of `in` broadcast to the shape of `out` (0 where `in` is broadcast).
inline Error broadcast_strides(const Tensor& in, const Tensor& out, const char* op, int64_t* strides) {
  KCHECK(runtime::broadcast_strides(in, out.dim(), out.sizes(), strides),
         "%s: an input of rank %d does not broadcast to the output's rank-%d shape", op, in.dim(), out.dim());
  return Error::Ok;
}

// Calls f(row, base[0..N)) for every row of `out`'s innermost dimension, where base[k] indexes the
// row's first element in input k under broadcasting (strides[k][dim - 1] apart along the row);
// parallel over rows.
template <int N, typename F>
inline void for_each_broadcast_row(const Tensor& out, const int64_t (&strides)[N][runtime::kTensorDimensionLimit],
                                   F f) {
  const int dim = out.dim();
  const int64_t inner = dim == 0 ? 1 : out.size(dim - 1);
  const int64_t rows = inner == 0 ? 0 : out.numel() / inner;
  extension::threadpool::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                                      [&](int64_t r0, int64_t r1) {
                                        for (int64_t r = r0; r < r1; ++r) {
                                          int64_t base[N] = {};
                                          int64_t rem = r;
                                          for (int d = dim - 2; d >= 0; --d) {
                                            const int64_t idx = rem % out.size(d);
                                            rem /= out.size(d);
                                            for (int k = 0; k < N; ++k) base[k] += idx * strides[k][d];
                                          }
                                          f(r, static_cast<const int64_t*>(base));
                                        }
                                      });
}

// Calls f(out_index, offsets[0..N)) for every element of `out`, where offsets[k] indexes input k
// under broadcasting; parallel over rows of the innermost dimension.
template <int N, typename F>
inline void for_each_broadcast(const Tensor& out, const int64_t (&strides)[N][runtime::kTensorDimensionLimit], F f) {
  const int dim = out.dim();
  const int64_t inner = dim == 0 ? 1 : out.size(dim - 1);
  int64_t step[N];
  for (int k = 0; k < N; ++k) step[k] = dim == 0 ? 0 : strides[k][dim - 1];
  for_each_broadcast_row<N>(out, strides, [&](int64_t r, const int64_t* base) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t offs[N];
      for (int k = 0; k < N; ++k) offs[k] = base[k] + i * step[k];
      f(r * inner + i, offs);
    }
  });
}

// out = f(self) elementwise for tensors of one element count: float32 in float, other dtypes
// (integers, float16, bfloat16, float64) through double. f is generic in its argument type.
// `floats`, where given, computes float32 runs instead: floats(in, out, count), vectorized.
template <typename F, typename Floats = std::nullptr_t>
inline Error unary(Args args, const char* op, size_t n, F f, Floats floats = nullptr) {
  Tensor *in, *out;
  ET_TRY(input_output(args, n, op, &in, &out));
  KCHECK(is_supported_dtype(in->scalar_type()) && is_supported_dtype(out->scalar_type()),
         "%s: dtype %s is not supported", op, runtime::to_string(in->scalar_type()));
  ET_TRY(check_numel(*out, in->numel(), op, "output"));
  if (in->scalar_type() == ScalarType::Float && out->scalar_type() == ScalarType::Float) {
    const float* x = in->data_ptr<float>();
    float* y = out->data_ptr<float>();
    extension::threadpool::parallel_for(0, in->numel(), 16384, [&](int64_t i0, int64_t i1) {
      if constexpr (std::is_same_v<Floats, std::nullptr_t>) {
        for (int64_t i = i0; i < i1; ++i) y[i] = static_cast<float>(f(x[i]));
      } else {
        floats(x + i0, y + i0, i1 - i0);
      }
    });
    return Error::Ok;
  }
  extension::threadpool::parallel_for(0, in->numel(), 16384, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) store<double>(*out, i, static_cast<double>(f(load<double>(*in, i))));
  });
  return Error::Ok;
}

}  // namespace kernels
}  // namespace executorch
