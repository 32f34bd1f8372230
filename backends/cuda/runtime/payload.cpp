#include <executorch/backends/cuda/runtime/payload.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include <executorch/backends/cuda/runtime/cuda_backend.h>
#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/data_loader.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

// Windows, strides, paddings and dilations above this are refused (no real model comes close).
constexpr int64_t kMaxWindow = int64_t{1} << 20;

bool is_floating(runtime::ScalarType t) {
  return t == runtime::ScalarType::Float || t == runtime::ScalarType::Half || t == runtime::ScalarType::BFloat16;
}
// A floating tensor; plan_op has checked that all of an op's floating tensors share one dtype.
bool is_float(const EValue* v) { return v->is_tensor() && is_floating(v->to_tensor().scalar_type()); }
bool is_bool(const EValue* v) { return v->is_tensor() && v->to_tensor().scalar_type() == runtime::ScalarType::Bool; }
bool is_integer(const EValue* v) {
  return v->is_tensor() && (v->to_tensor().scalar_type() == runtime::ScalarType::Int ||
                            v->to_tensor().scalar_type() == runtime::ScalarType::Long);
}
// A tensor of an element type the kernels convert (element_type_of).
bool is_element(const EValue* v) {
  ElementType unused;
  return v->is_tensor() && element_type_of(v->to_tensor().scalar_type(), &unused);
}
// Two tensors of one dtype, any: for the ops that only move elements.
bool same_type_tensors(const EValue* a, const EValue* b) {
  return a->is_tensor() && b->is_tensor() && a->to_tensor().scalar_type() == b->to_tensor().scalar_type();
}

// Each check names the operator and the argument.
#define PAYLOAD_CHECK(cond, ...) ET_CHECK_OR_RETURN(cond, Error::InvalidProgram, __VA_ARGS__)

Error need_float(const EValue* v, const char* op, size_t i) {
  PAYLOAD_CHECK(is_float(v), "%s %s: argument %zu must be a float32, float16 or bfloat16 tensor", kCudaBackendName, op,
                i);
  return Error::Ok;
}

Error need_numel(const EValue* v, int64_t numel, const char* op, size_t i) {
  ET_TRY(need_float(v, op, i));
  PAYLOAD_CHECK(v->to_tensor().numel() == numel, "%s %s: argument %zu has %lld elements, expected %lld",
                kCudaBackendName, op, i, static_cast<long long>(v->to_tensor().numel()), static_cast<long long>(numel));
  return Error::Ok;
}

Error need_bool_numel(const EValue* v, int64_t numel, const char* op, size_t i) {
  PAYLOAD_CHECK(is_bool(v) && v->to_tensor().numel() == numel,
                "%s %s: argument %zu must be a bool tensor of %lld elements", kCudaBackendName, op, i,
                static_cast<long long>(numel));
  return Error::Ok;
}

// 4-D `x` and `o` of the same (batch, channel) planes: pooling and resampling.
Error need_planes(const Tensor& x, const Tensor& o, const char* op) {
  PAYLOAD_CHECK(x.dim() == 4 && o.dim() == 4 && o.size(0) == x.size(0) && o.size(1) == x.size(1),
                "%s %s: needs 4-D input and output of the same planes", kCudaBackendName, op);
  return Error::Ok;
}

// A dimension argument of `x`, wrapped.
Error dim_at(const EValue* v, const Tensor& x, const char* op, int64_t* dim) {
  PAYLOAD_CHECK(v->is_int() && x.dim() > 0 && v->to_int() >= -x.dim() && v->to_int() < x.dim(),
                "%s %s: dimension out of range", kCudaBackendName, op);
  *dim = v->to_int() < 0 ? v->to_int() + x.dim() : v->to_int();
  return Error::Ok;
}

// Tensor `v` broadcasts to `out` (at most kMaxOpDims dimensions).
Error need_broadcast(const EValue* v, const Tensor& out, const char* op, size_t i) {
  int64_t strides[kMaxOpDims];
  PAYLOAD_CHECK(
      v->is_tensor() && out.dim() <= kMaxOpDims && broadcast_strides(v->to_tensor(), out.dim(), out.sizes(), strides),
      "%s %s: argument %zu does not broadcast to the output's shape", kCudaBackendName, op, i);
  return Error::Ok;
}

Error need_int(const EValue* v, const char* op, size_t i) {
  PAYLOAD_CHECK(v->is_int(), "%s %s: argument %zu must be an integer", kCudaBackendName, op, i);
  return Error::Ok;
}

Error need_number(const EValue* v, const char* op, size_t i) {
  PAYLOAD_CHECK(v->is_int() || v->is_double() || v->is_bool(), "%s %s: argument %zu must be a number", kCudaBackendName,
                op, i);
  return Error::Ok;
}

// Element `i` of a 1- or 2-element int list (an empty list or None gives `fallback`).
Error pair_at(const EValue* v, int i, int64_t fallback, const char* op, int64_t* out) {
  if (v->is_none() || (v->is_int_list() && v->to_int_list().size() == 0)) return *out = fallback, Error::Ok;
  PAYLOAD_CHECK(v->is_int_list() && v->to_int_list().size() <= 2, "%s %s: expected a list of 1 or 2 integers",
                kCudaBackendName, op);
  const auto l = v->to_int_list();
  *out = l.size() == 1 ? l[0] : l[static_cast<size_t>(i)];
  return Error::Ok;
}

bool classify(const std::string& name, OpPlan* op) {
  static const struct {
    const char* name;
    Unary op;
  } unary[] = {
      {"aten::relu", Unary::Relu},
      {"aten::silu", Unary::Silu},
      {"aten::sigmoid", Unary::Sigmoid},
      {"aten::tanh", Unary::Tanh},
      {"aten::neg", Unary::Neg},
      {"aten::exp", Unary::Exp},
      {"aten::rsqrt", Unary::Rsqrt},
      {"aten::gelu", Unary::Gelu},
      {"aten::clamp", Unary::Clamp},
      {"aten::hardtanh", Unary::Clamp},
      {"aten::hardswish", Unary::HardSwish},
      {"aten::hardsigmoid", Unary::HardSigmoid},
      {"aten::leaky_relu", Unary::LeakyRelu},
      {"aten::pow.Tensor_Scalar", Unary::Pow},
      {"aten::sqrt", Unary::Sqrt},
      {"aten::abs", Unary::Abs},
      {"aten::log", Unary::Log},
      {"aten::sin", Unary::Sin},
      {"aten::cos", Unary::Cos},
      {"aten::erf", Unary::Erf},
  };
  static const struct {
    const char* name;
    Binary op;
  } binary[] = {
      {"aten::add.Tensor", Binary::Add}, {"aten::sub.Tensor", Binary::Sub}, {"aten::mul.Tensor", Binary::Mul},
      {"aten::div.Tensor", Binary::Div}, {"aten::mul.Scalar", Binary::Mul}, {"aten::add.Scalar", Binary::Add},
      {"aten::maximum", Binary::Max},    {"aten::minimum", Binary::Min},
  };
  static const struct {
    const char* name;
    Compare op;
  } compare[] = {
      {"aten::eq.Scalar", Compare::Eq}, {"aten::ne.Scalar", Compare::Ne}, {"aten::lt.Scalar", Compare::Lt},
      {"aten::le.Scalar", Compare::Le}, {"aten::gt.Scalar", Compare::Gt}, {"aten::ge.Scalar", Compare::Ge},
      {"aten::eq.Tensor", Compare::Eq}, {"aten::ne.Tensor", Compare::Ne}, {"aten::lt.Tensor", Compare::Lt},
      {"aten::le.Tensor", Compare::Le}, {"aten::gt.Tensor", Compare::Gt}, {"aten::ge.Tensor", Compare::Ge},
  };
  static const struct {
    const char* name;
    Logic op;
  } logic[] = {
      {"aten::bitwise_and.Tensor", Logic::And}, {"aten::bitwise_or.Tensor", Logic::Or},
      {"aten::bitwise_xor.Tensor", Logic::Xor}, {"aten::logical_and", Logic::And},
      {"aten::logical_or", Logic::Or},          {"aten::logical_xor", Logic::Xor},
  };
  static const struct {
    const char* name;
    OpKind kind;
  } other[] = {
      {"aten::index.Tensor", OpKind::Index},
      {"aten::index_put", OpKind::IndexPut},
      {"aten::addmm", OpKind::Addmm},
      {"aten::mm", OpKind::Mm},
      {"aten::bmm", OpKind::Bmm},
      {"aten::expand", OpKind::Expand},
      {"aten::split_with_sizes", OpKind::Split},
      {"aten::logical_not", OpKind::LogicalNot},
      {"aten::any.dim", OpKind::Any},
      {"aten::where.self", OpKind::Where},
      {"aten::embedding", OpKind::Embedding},
      {"aten::_to_copy", OpKind::Cast},
      {"aten::copy", OpKind::Cast},
      {"aten::_softmax", OpKind::Softmax},
      {"aten::_log_softmax", OpKind::LogSoftmax},
      {"aten::native_layer_norm", OpKind::LayerNorm},
      {"executorch::rms_norm", OpKind::RmsNorm},
      {"executorch::rope", OpKind::Rope},
      {"aten::view", OpKind::Copy},
      {"aten::_unsafe_view", OpKind::Copy},
      {"aten::clone", OpKind::Copy},
      {"aten::unsqueeze", OpKind::Copy},
      {"aten::squeeze.dims", OpKind::Copy},
      {"aten::squeeze.dim", OpKind::Copy},
      {"aten::permute", OpKind::Permute},
      {"aten::convolution", OpKind::Conv},
      {"aten::_native_batch_norm_legit_no_training", OpKind::BatchNorm},
      {"aten::max_pool2d_with_indices", OpKind::MaxPool},
      {"aten::avg_pool2d", OpKind::AvgPool},
      {"aten::mean.dim", OpKind::RowReduce},
      {"aten::mean", OpKind::RowReduce},
      {"aten::sum.dim_IntList", OpKind::RowReduce},
      {"aten::sum", OpKind::RowReduce},
      {"executorch::int8_linear", OpKind::Int8Linear},
      {"executorch::int8_weight_linear", OpKind::Int8WeightLinear},
      {"executorch::int4_linear", OpKind::Int4Linear},
      {"aten::cumsum", OpKind::Cumsum},
      {"aten::argmax", OpKind::ArgMax},
      {"aten::gather", OpKind::Gather},
      {"executorch::lstm_cell", OpKind::LstmCell},
      {"executorch::gru_cell", OpKind::GruCell},
      {"executorch::lstm_layer", OpKind::LstmLayer},
      {"executorch::gru_layer", OpKind::GruLayer},
      {"aten::scaled_dot_product_attention", OpKind::Attention},
      {"aten::slice.Tensor", OpKind::Slice},
      {"aten::as_strided", OpKind::AsStrided},
      {"aten::constant_pad_nd", OpKind::ConstantPad},
      {"aten::index_select", OpKind::IndexSelect},
      {"aten::upsample_bilinear2d.vec", OpKind::Upsample},
      {"aten::upsample_nearest2d.vec", OpKind::Upsample},
      {"aten::select.int", OpKind::Select},
      {"aten::cat", OpKind::Cat},
      {"aten::_adaptive_avg_pool2d", OpKind::AdaptiveAvgPool},
  };
  for (const auto& u : unary) {
    if (name == u.name) return op->kind = OpKind::Unary, op->unary = u.op, true;
  }
  for (const auto& b : binary) {
    if (name == b.name) return op->kind = OpKind::Binary, op->binary = b.op, true;
  }
  for (const auto& c : compare) {
    if (name == c.name) return op->kind = OpKind::Compare, op->compare = c.op, true;
  }
  for (const auto& l : logic) {
    if (name == l.name) return op->kind = OpKind::Logic, op->logic = l.op, true;
  }
  for (const auto& o : other) {
    if (name == o.name) return op->kind = o.kind, true;
  }
  return false;
}

// The scalars a unary op reads: gelu's approximation, clamp's and hardtanh's bounds (None: open),
// leaky_relu's slope, pow's exponent. Every other unary op is (self, out).
Error plan_unary_parameters(Span<EValue*> a, const char* op, OpPlan* plan) {
  const size_t n = a.size();
  float* p = plan->scalars;
  auto number = [](const EValue* v, float fallback) {
    return v->is_none() ? fallback : static_cast<float>(v->scalar_as_double());
  };
  switch (plan->unary) {
    case Unary::Gelu:
      PAYLOAD_CHECK(n == 2 || (n == 3 && a[1]->tag() == EValue::Tag::String), "%s %s: %zu arguments", kCudaBackendName,
                    op, n);
      if (n == 3 && a[1]->to_string().size() == 4 && std::memcmp(a[1]->to_string().data(), "tanh", 4) == 0) {
        plan->unary = Unary::GeluTanh;
      }
      return Error::Ok;
    case Unary::Clamp:
      PAYLOAD_CHECK(n == 4, "%s %s: %zu arguments", kCudaBackendName, op, n);
      for (size_t i : {1, 2}) {
        PAYLOAD_CHECK(a[i]->is_none() || a[i]->is_int() || a[i]->is_double(),
                      "%s %s: bound %zu must be a number or None", kCudaBackendName, op, i);
      }
      p[0] = number(a[1], -INFINITY), p[1] = number(a[2], INFINITY);
      return Error::Ok;
    case Unary::LeakyRelu:
    case Unary::Pow:
      PAYLOAD_CHECK(n == 3, "%s %s: %zu arguments", kCudaBackendName, op, n);
      ET_TRY(need_number(a[1], op, 1));
      p[0] = static_cast<float>(a[1]->scalar_as_double());
      return Error::Ok;
    default: PAYLOAD_CHECK(n == 2, "%s %s: %zu arguments", kCudaBackendName, op, n); return Error::Ok;
  }
}

// `out` has `x`'s dtype and shape except `size` at `dim` (which is in range).
Error need_shape_but(const Tensor& x, const EValue* out, int64_t dim, int64_t size, const char* op) {
  PAYLOAD_CHECK(
      out->is_tensor() && out->to_tensor().scalar_type() == x.scalar_type() && out->to_tensor().dim() == x.dim(),
      "%s %s: the output's dtype or rank differs", kCudaBackendName, op);
  for (int d = 0; d < x.dim(); ++d) {
    PAYLOAD_CHECK(out->to_tensor().size(d) == (d == dim ? size : x.size(d)), "%s %s: the output's shape differs",
                  kCudaBackendName, op);
  }
  return Error::Ok;
}

// slice.Tensor(self, dim, start?, end?, step, out); ints = dim, start, step (start and end clipped
// into the dimension as PyTorch does).
Error plan_slice(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 6 && a[0]->is_tensor() && a[4]->is_int(), "%s %s: arguments", kCudaBackendName, op);
  const Tensor& x = a[0]->to_tensor();
  int64_t dim;
  ET_TRY(dim_at(a[1], x, op, &dim));
  const int64_t size = x.size(static_cast<int>(dim)), step = a[4]->to_int();
  PAYLOAD_CHECK(step > 0 && (a[2]->is_none() || a[2]->is_int()) && (a[3]->is_none() || a[3]->is_int()),
                "%s %s: start and end must be integers or None, step positive", kCudaBackendName, op);
  auto clip = [size](const EValue* v, int64_t fallback) {
    int64_t i = v->is_none() ? fallback : v->to_int();
    if (i < 0) i = i < -size ? 0 : i + size;
    return i > size ? size : i;
  };
  const int64_t start = clip(a[2], 0), end = std::max(start, clip(a[3], size));
  ET_TRY(need_shape_but(x, a[5], dim, (end - start + step - 1) / step, op));
  plan->ints[0] = dim, plan->ints[1] = start, plan->ints[2] = step;
  return Error::Ok;
}

// select.int(self, dim, index, out); ints = dim, index (wrapped).
Error plan_select(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 4 && same_type_tensors(a[0], a[3]) && a[2]->is_int(), "%s %s: arguments", kCudaBackendName,
                op);
  const Tensor& x = a[0]->to_tensor();
  int64_t dim;
  ET_TRY(dim_at(a[1], x, op, &dim));
  const int64_t size = x.size(static_cast<int>(dim)), index = a[2]->to_int();
  PAYLOAD_CHECK(index >= -size && index < size, "%s %s: index %lld out of range", kCudaBackendName, op,
                static_cast<long long>(index));
  const Tensor& o = a[3]->to_tensor();
  PAYLOAD_CHECK(o.dim() == x.dim() - 1, "%s %s: the output's rank differs", kCudaBackendName, op);
  for (int d = 0, od = 0; d < x.dim(); ++d) {
    if (d == dim) continue;
    PAYLOAD_CHECK(o.size(od++) == x.size(d), "%s %s: the output's shape differs", kCudaBackendName, op);
  }
  plan->ints[0] = dim, plan->ints[1] = index < 0 ? index + size : index;
  return Error::Ok;
}

// as_strided(self, size, stride, storage_offset?, out) reading inside the (contiguous) input;
// ints = storage offset.
Error plan_as_strided(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 5 && same_type_tensors(a[0], a[4]) && a[1]->is_int_list() && a[2]->is_int_list() &&
                    (a[3]->is_none() || a[3]->is_int()),
                "%s %s: arguments", kCudaBackendName, op);
  const Tensor &x = a[0]->to_tensor(), &o = a[4]->to_tensor();
  const auto sizes = a[1]->to_int_list(), strides = a[2]->to_int_list();
  const int64_t offset = a[3]->is_none() ? 0 : a[3]->to_int();
  PAYLOAD_CHECK(sizes.size() == strides.size() && static_cast<int>(sizes.size()) == o.dim() && o.dim() <= kMaxOpDims &&
                    offset >= 0,
                "%s %s: sizes, strides and output disagree", kCudaBackendName, op);
  int64_t last = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t span = 0;
    PAYLOAD_CHECK(o.size(static_cast<int>(d)) == sizes[d] && strides[d] >= 0 &&
                      !__builtin_mul_overflow(sizes[d] > 0 ? sizes[d] - 1 : 0, strides[d], &span) &&
                      !__builtin_add_overflow(last, span, &last),
                  "%s %s: size or stride %zu out of range", kCudaBackendName, op, d);
  }
  PAYLOAD_CHECK(o.numel() == 0 || last < x.numel(), "%s %s: the view reaches past the input", kCudaBackendName, op);
  plan->ints[0] = offset;
  return Error::Ok;
}

// constant_pad_nd(self, pad, value, out): pad holds (before, after) pairs from the last dimension
// back; ints = the elements ahead of the input along each dimension; scalars[0] = value.
Error plan_constant_pad(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 4 && is_float(a[0]) && a[1]->is_int_list() && is_float(a[3]), "%s %s: arguments",
                kCudaBackendName, op);
  ET_TRY(need_number(a[2], op, 2));
  const Tensor &x = a[0]->to_tensor(), &o = a[3]->to_tensor();
  const auto pad = a[1]->to_int_list();
  PAYLOAD_CHECK(
      pad.size() % 2 == 0 && static_cast<int>(pad.size() / 2) <= x.dim() && o.dim() == x.dim() && x.dim() <= kMaxOpDims,
      "%s %s: %zu paddings for a %d-D input", kCudaBackendName, op, pad.size(), x.dim());
  for (int d = 0; d < x.dim(); ++d) {
    const size_t k = static_cast<size_t>(x.dim() - 1 - d);  // pairs count from the last dimension
    const int64_t before = 2 * k < pad.size() ? pad[2 * k] : 0, after = 2 * k < pad.size() ? pad[2 * k + 1] : 0;
    PAYLOAD_CHECK(before >= -kMaxWindow && before <= kMaxWindow && after >= -kMaxWindow && after <= kMaxWindow &&
                      o.size(d) == x.size(d) + before + after && o.size(d) >= 0,
                  "%s %s: the output's size %d does not match the padding", kCudaBackendName, op, d);
    plan->ints[d] = before;
  }
  plan->scalars[0] = static_cast<float>(a[2]->scalar_as_double());
  return Error::Ok;
}

// index_select(self, dim, index, out): int64 or int32 indices (checked on the device, as
// embedding's); at most kMaxIndexSelectSlices slices before dim; ints = dim.
constexpr int64_t kMaxIndexSelectSlices = 1024;
Error plan_index_select(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 4 && is_float(a[0]) && a[2]->is_tensor(), "%s %s: arguments", kCudaBackendName, op);
  const Tensor &x = a[0]->to_tensor(), &idx = a[2]->to_tensor();
  PAYLOAD_CHECK(idx.dim() <= 1 &&
                    (idx.scalar_type() == runtime::ScalarType::Long || idx.scalar_type() == runtime::ScalarType::Int),
                "%s %s: the index must be a 1-D int64 or int32 tensor", kCudaBackendName, op);
  int64_t dim, outer = 1;
  ET_TRY(dim_at(a[1], x, op, &dim));
  for (int d = 0; d < dim; ++d) outer *= x.size(d);
  PAYLOAD_CHECK(outer <= kMaxIndexSelectSlices, "%s %s: more than %lld slices before the dimension", kCudaBackendName,
                op, static_cast<long long>(kMaxIndexSelectSlices));
  ET_TRY(need_shape_but(x, a[3], dim, idx.numel(), op));
  plan->ints[0] = dim;
  return Error::Ok;
}

// Whether `t` has the shape of indexing `x` as `ix` says: x's leading dimensions, the index shape,
// then x's dimensions after the indexed ones.
bool indexed_shape(const Tensor& t, const Tensor& x, const Indexing& ix) {
  if (t.dim() != x.dim() - ix.count + ix.rank) return false;
  for (int d = 0; d < t.dim(); ++d) {
    const int64_t want = d < ix.lead             ? x.size(d)
                         : d < ix.lead + ix.rank ? ix.shape[d - ix.lead]
                                                 : x.size(d - ix.rank + ix.count);
    if (t.size(d) != want) return false;
  }
  return true;
}

// index.Tensor(self, indices, out): integer index tensors (int64 or int32, checked on the device as
// embedding's) broadcast together, after leading Nones; no None between them (the indexed
// dimensions would move).
Error plan_index(Span<EValue*> a, const char* op) {
  PAYLOAD_CHECK(a.size() == 3 && a[1]->is_tensor_list() && same_type_tensors(a[0], a[2]), "%s %s: arguments",
                kCudaBackendName, op);
  const Tensor &x = a[0]->to_tensor(), &o = a[2]->to_tensor();
  Indexing ix;
  ET_TRY(indexing(a[1]->to_tensor_list(), x.dim(), op, &ix));
  PAYLOAD_CHECK(indexed_shape(o, x, ix), "%s %s: the output's shape differs", kCudaBackendName, op);
  return Error::Ok;
}

// index_put(self, indices, values, accumulate, out): out = self with `values` written where the
// indices point (a key/value cache's new positions). `values` has the indexed shape (no
// broadcasting); accumulate is not run.
Error plan_index_put(Span<EValue*> a, const char* op) {
  PAYLOAD_CHECK(a.size() == 5 && a[1]->is_tensor_list() && same_type_tensors(a[0], a[4]) &&
                    same_type_tensors(a[0], a[2]) && a[3]->is_bool(),
                "%s %s: arguments", kCudaBackendName, op);
  PAYLOAD_CHECK(!a[3]->to_bool(), "%s %s: accumulate=True is not run", kCudaBackendName, op);
  const Tensor &x = a[0]->to_tensor(), &values = a[2]->to_tensor(), &o = a[4]->to_tensor();
  PAYLOAD_CHECK(o.dim() == x.dim() && std::equal(o.sizes(), o.sizes() + o.dim(), x.sizes()),
                "%s %s: the output's shape differs from self's", kCudaBackendName, op);
  Indexing ix;
  ET_TRY(indexing(a[1]->to_tensor_list(), x.dim(), op, &ix));
  PAYLOAD_CHECK(indexed_shape(values, x, ix), "%s %s: values must have the indexed shape (they are not broadcast)",
                kCudaBackendName, op);
  return Error::Ok;
}

// upsample_bilinear2d.vec(input, output_size?, align_corners, scale_factors?, out) and
// upsample_nearest2d.vec(input, output_size?, scale_factors?, out) on 4-D tensors; ints = bilinear,
// align_corners; scalars = source steps per output step (height, width), as PyTorch computes them.
Error plan_upsample(Span<EValue*> a, const char* op, OpPlan* plan) {
  const bool bilinear = std::strstr(op, "bilinear") != nullptr;
  const size_t n = bilinear ? 5 : 4;
  PAYLOAD_CHECK(a.size() == n && is_float(a[0]) && is_float(a[n - 1]) && (!bilinear || a[2]->is_bool()),
                "%s %s: arguments", kCudaBackendName, op);
  const Tensor &x = a[0]->to_tensor(), &o = a[n - 1]->to_tensor();
  ET_TRY(need_planes(x, o, op));
  PAYLOAD_CHECK(x.size(2) > 0 && x.size(3) > 0 && o.size(2) > 0 && o.size(3) > 0, "%s %s: empty planes",
                kCudaBackendName, op);
  const EValue* sf = a[n - 2];
  PAYLOAD_CHECK(sf->is_none() || (sf->tag() == EValue::Tag::DoubleList && sf->to_double_list().size() == 2),
                "%s %s: scale_factors must be None or two numbers", kCudaBackendName, op);
  const bool align = bilinear && a[2]->to_bool();
  for (int d = 0; d < 2; ++d) {
    const int64_t in = x.size(2 + d), out = o.size(2 + d);
    const double factor = sf->is_none() ? 0.0 : sf->to_double_list()[static_cast<size_t>(d)];
    PAYLOAD_CHECK(sf->is_none() || factor > 0, "%s %s: scale factors must be positive", kCudaBackendName, op);
    plan->scalars[d] =
        static_cast<float>(align        ? (out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0)
                           : factor > 0 ? 1.0 / factor
                                        : static_cast<double>(in) / static_cast<double>(out));
  }
  plan->ints[0] = bilinear, plan->ints[1] = align;
  return Error::Ok;
}

// cat(tensors, dim, out): every piece of the output's dtype and rank, alike but along `dim`,
// which they fill in order; ints = dim.
Error plan_cat(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 3 && a[0]->is_tensor_list() && is_float(a[2]), "%s %s: arguments", kCudaBackendName, op);
  const Tensor& o = a[2]->to_tensor();
  int64_t dim;
  ET_TRY(dim_at(a[1], o, op, &dim));
  int64_t covered = 0;
  for (const EValue* item : a[0]->to_tensor_list()) {
    PAYLOAD_CHECK(item != nullptr && is_float(item) && item->to_tensor().scalar_type() == o.scalar_type(),
                  "%s %s: every piece must be a tensor of the output's dtype", kCudaBackendName, op);
    const Tensor& t = item->to_tensor();
    ET_TRY(need_shape_but(t, a[2], dim, o.size(static_cast<int>(dim)), op));
    covered += t.size(static_cast<int>(dim));
  }
  PAYLOAD_CHECK(covered == o.size(static_cast<int>(dim)), "%s %s: the pieces do not fill the output", kCudaBackendName,
                op);
  plan->ints[0] = dim;
  return Error::Ok;
}

// _adaptive_avg_pool2d(self, output_size, out) where the output size divides the input's: an
// average pool whose window and stride are the quotient (ints as plan_pool's).
Error plan_adaptive_avg_pool(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 3 && is_float(a[0]) && is_float(a[2]), "%s %s: arguments", kCudaBackendName, op);
  const Tensor &x = a[0]->to_tensor(), &o = a[2]->to_tensor();
  ET_TRY(need_planes(x, o, op));
  // kh, kw, sh, sw, ph, pw, dh, dw, count_include_pad, adaptive: a plain average pool where the
  // output size divides the input's, else torch's adaptive windows (of varying size and overlap).
  int64_t* v = plan->ints;
  v[9] = 0;
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x.size(2 + i), out = o.size(2 + i);
    PAYLOAD_CHECK(out > 0 && (in + out - 1) / out + 1 <= kMaxWindow,
                  "%s %s: windows of input size %lld over %lld outputs", kCudaBackendName, op,
                  static_cast<long long>(in), static_cast<long long>(out));
    v[9] |= in % out != 0;
    v[i] = v[2 + i] = in / out, v[4 + i] = 0, v[6 + i] = 1;
  }
  v[8] = 1;
  return Error::Ok;
}

// One spatial dimension of a convolution: kernel, stride and dilation at least 1, padding at least
// 0, all small enough that the size arithmetic cannot overflow, and `out` the extent they give.
Error need_conv_extent(int64_t in, int64_t k, int64_t s, int64_t p, int64_t dil, int64_t out) {
  PAYLOAD_CHECK(k >= 1 && s >= 1 && dil >= 1 && p >= 0 && k <= kMaxWindow && s <= kMaxWindow && dil <= kMaxWindow &&
                    p <= kMaxWindow,
                "%s: convolution kernel, stride, padding or dilation out of range", kCudaBackendName);
  PAYLOAD_CHECK(in + 2 * p >= dil * (k - 1) + 1 && out == (in + 2 * p - dil * (k - 1) - 1) / s + 1,
                "%s: convolution output size %lld disagrees with its input", kCudaBackendName,
                static_cast<long long>(out));
  return Error::Ok;
}

// `groups` splits the input's channels and the weight's filters; the output has the input's batch
// and one channel per filter.
Error need_conv_groups(const Tensor& x, const Tensor& wt, const Tensor& o, int64_t groups) {
  PAYLOAD_CHECK(groups > 0 && x.size(1) % groups == 0 && wt.size(0) % groups == 0 && wt.size(1) == x.size(1) / groups &&
                    o.size(0) == x.size(0) && o.size(1) == wt.size(0),
                "%s: convolution channels do not split into groups", kCudaBackendName);
  return Error::Ok;
}

// A 3-D convolution (NCDHW, weights OIDHW; cuDNN runs it): ints as a 2-D one's over height and
// width, depth[] the third dimension. Arguments as plan_conv's, already checked there.
Error plan_conv3d(Span<EValue*> a, const char* op, OpPlan* plan) {
  const Tensor &x = a[0]->to_tensor(), &wt = a[1]->to_tensor(), &o = a[9]->to_tensor();
  PAYLOAD_CHECK(wt.dim() == 5 && o.dim() == 5, "%s %s: weight and output must be 5-D", kCudaBackendName, op);
  // Per spatial dimension (depth, height, width): kernel, stride, padding, dilation, in, out.
  int64_t k[3], st[3], pad[3], dil[3];
  auto entry = [op](const EValue* list, int i, int64_t* out) -> Error {
    PAYLOAD_CHECK(list->is_int_list() && (list->to_int_list().size() == 3 || list->to_int_list().size() == 1),
                  "%s %s: stride, padding and dilation must list 1 or 3 integers", kCudaBackendName, op);
    const auto l = list->to_int_list();
    *out = l.size() == 1 ? l[0] : l[static_cast<size_t>(i)];
    return Error::Ok;
  };
  for (int i = 0; i < 3; ++i) {
    ET_TRY(entry(a[3], i, &st[i]));
    ET_TRY(entry(a[4], i, &pad[i]));
    ET_TRY(entry(a[5], i, &dil[i]));
    k[i] = wt.size(2 + i);
    ET_TRY(need_conv_extent(x.size(2 + i), k[i], st[i], pad[i], dil[i], o.size(2 + i)));
  }
  const int64_t groups = a[8]->to_int();
  ET_TRY(need_conv_groups(x, wt, o, groups));
  int64_t* v = plan->ints;
  const int64_t ints[16] = {x.size(0), x.size(1), x.size(3), x.size(4), wt.size(0), k[1],   k[2],      st[1],
                            st[2],     pad[1],    pad[2],    dil[1],    dil[2],     groups, o.size(3), o.size(4)};
  std::copy(ints, ints + 16, v);
  const int64_t depth[6] = {x.size(2), k[0], st[0], pad[0], dil[0], o.size(2)};
  std::copy(depth, depth + 6, plan->depth);
  plan->kind = OpKind::Conv3d;
  if (a[2]->is_tensor()) ET_TRY(need_numel(a[2], wt.size(0), op, 2));
  return Error::Ok;
}

Error plan_conv(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 10, "%s %s: %zu arguments", kCudaBackendName, op, a.size());
  ET_TRY(need_float(a[0], op, 0));
  ET_TRY(need_float(a[1], op, 1));
  ET_TRY(need_float(a[9], op, 9));
  PAYLOAD_CHECK(a[2]->is_none() || is_float(a[2]), "%s %s: bias must be a floating tensor or None", kCudaBackendName,
                op);
  ET_TRY(need_number(a[6], op, 6));
  ET_TRY(need_int(a[8], op, 8));
  PAYLOAD_CHECK(!a[6]->scalar_as_double(), "%s: only non-transposed convolution", kCudaBackendName);
  const Tensor &x = a[0]->to_tensor(), &wt = a[1]->to_tensor(), &o = a[9]->to_tensor();
  if (x.dim() == 5) return plan_conv3d(a, op, plan);
  // A 1-D convolution runs as a 2-D one of height 1.
  const bool one_d = x.dim() == 3;
  PAYLOAD_CHECK((x.dim() == 4 || one_d) && wt.dim() == x.dim() && o.dim() == x.dim(),
                "%s: only 1-D, 2-D and 3-D convolution (3-D, 4-D or 5-D tensors)", kCudaBackendName);
  auto size = [one_d](const Tensor& t, int d) -> int64_t {
    return one_d ? (d == 2 ? 1 : t.size(d - (d == 3))) : t.size(d);
  };
  int64_t* v = plan->ints;
  v[0] = x.size(0), v[1] = x.size(1), v[2] = size(x, 2), v[3] = size(x, 3), v[4] = wt.size(0), v[5] = size(wt, 2),
  v[6] = size(wt, 3);
  for (int i = 0; i < 2; ++i) {
    if (one_d && i == 0) {
      v[7] = 1, v[9] = 0, v[11] = 1;
      continue;
    }
    ET_TRY(pair_at(a[3], one_d ? 0 : i, 1, op, &v[7 + i]));
    ET_TRY(pair_at(a[4], one_d ? 0 : i, 0, op, &v[9 + i]));
    ET_TRY(pair_at(a[5], one_d ? 0 : i, 1, op, &v[11 + i]));
  }
  v[13] = a[8]->to_int(), v[14] = size(o, 2), v[15] = size(o, 3);
  ET_TRY(need_conv_groups(x, wt, o, v[13]));
  for (int d = 0; d < 2; ++d) ET_TRY(need_conv_extent(v[2 + d], v[5 + d], v[7 + d], v[9 + d], v[11 + d], v[14 + d]));
  if (a[2]->is_tensor()) ET_TRY(need_numel(a[2], v[4], op, 2));
  return Error::Ok;
}

Error plan_pool(Span<EValue*> a, const char* op, bool is_max, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 8, "%s %s: %zu arguments", kCudaBackendName, op, a.size());
  ET_TRY(need_float(a[0], op, 0));
  const Tensor& x = a[0]->to_tensor();
  EValue* out = a[is_max ? 6 : 7];
  ET_TRY(need_float(out, op, is_max ? 6 : 7));
  const Tensor& o = out->to_tensor();
  ET_TRY(need_planes(x, o, op));
  int64_t* v = plan->ints;  // kh, kw, sh, sw, ph, pw, dh, dw, count_include_pad
  for (int i = 0; i < 2; ++i) {
    ET_TRY(pair_at(a[1], i, 1, op, &v[i]));
    ET_TRY(pair_at(a[2], i, v[i], op, &v[2 + i]));
    ET_TRY(pair_at(a[3], i, 0, op, &v[4 + i]));
    v[6 + i] = 1;
    if (is_max) ET_TRY(pair_at(a[4], i, 1, op, &v[6 + i]));
  }
  for (int i = 0; i < 8; ++i) {
    PAYLOAD_CHECK(v[i] >= (i == 4 || i == 5 ? 0 : 1) && v[i] <= kMaxWindow,
                  "%s %s: window, stride, padding or dilation out of range", kCudaBackendName, op);
  }
  if (is_max) {
    PAYLOAD_CHECK(a[7]->is_tensor() && a[7]->to_tensor().scalar_type() == runtime::ScalarType::Long &&
                      a[7]->to_tensor().numel() == o.numel(),
                  "%s %s: indices must be int64 and shaped like the output", kCudaBackendName, op);
  } else {
    ET_TRY(need_number(a[5], op, 5));
    PAYLOAD_CHECK(a[6]->is_none(), "%s: avg_pool2d divisor_override", kCudaBackendName);
    v[8] = a[5]->scalar_as_double() != 0;
  }
  return Error::Ok;
}

// mean.dim / sum.dim_IntList(self, dims?, keepdim, dtype?, out) over trailing dimensions (as
// adaptive average pooling to 1x1 lowers to), or mean / sum(self, dtype?, out) over every element;
// ints[0] = 1 for a mean. No dtype conversion.
Error plan_mean(Span<EValue*> a, const char* op, OpPlan* plan) {
  const size_t n = a.size();
  PAYLOAD_CHECK((n == 5 && (a[1]->is_int_list() || a[1]->is_none())) || n == 3, "%s %s: arguments", kCudaBackendName,
                op);
  PAYLOAD_CHECK(a[n - 2]->is_none(), "%s %s: a dtype argument", kCudaBackendName, op);
  ET_TRY(need_float(a[0], op, 0));
  ET_TRY(need_float(a[n - 1], op, n - 1));
  plan->ints[0] = std::strncmp(op, "aten::mean", 10) == 0;
  if (n == 3 || a[1]->is_none() || a[1]->to_int_list().size() == 0) return need_numel(a[n - 1], 1, op, n - 1);
  const int rank = a[0]->to_tensor().dim();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t d : a[1]->to_int_list()) {
    PAYLOAD_CHECK(d >= -rank && d < rank, "%s %s: dimension %lld out of range", kCudaBackendName, op,
                  static_cast<long long>(d));
    reduced[static_cast<size_t>(d < 0 ? d + rank : d)] = true;
  }
  bool trailing = true, seen = false;
  int64_t kept = 1;
  for (int d = 0; d < rank; ++d) {
    if (reduced[static_cast<size_t>(d)])
      seen = true;
    else if (seen)
      trailing = false;
    else
      kept *= a[0]->to_tensor().size(d);
  }
  PAYLOAD_CHECK(trailing, "%s %s: only over trailing dimensions", kCudaBackendName, op);
  return need_numel(a[4], kept, op, 4);
}

// split_with_sizes(self, split_sizes, dim, out_0, ..., out_{n-1}); ints = dim.
Error plan_split(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(is_float(a[0]) && a[1]->is_int_list() && a[2]->is_int(), "%s %s: arguments", kCudaBackendName, op);
  const auto sizes = a[1]->to_int_list();
  PAYLOAD_CHECK(a.size() == 3 + sizes.size(), "%s %s: %zu arguments for %zu pieces", kCudaBackendName, op, a.size(),
                sizes.size());
  const Tensor& x = a[0]->to_tensor();
  int64_t dim;
  PAYLOAD_CHECK(x.dim() <= kMaxOpDims, "%s %s: more than %d dimensions", kCudaBackendName, op, kMaxOpDims);
  ET_TRY(dim_at(a[2], x, op, &dim));
  int64_t covered = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const EValue* o = a[3 + i];
    PAYLOAD_CHECK(o->is_tensor() && o->to_tensor().scalar_type() == x.scalar_type() &&
                      o->to_tensor().dim() == x.dim() && sizes[i] >= 0 &&
                      sizes[i] <= x.size(static_cast<int>(dim)) - covered,
                  "%s %s: piece %zu does not fit the input", kCudaBackendName, op, i);
    for (int d = 0; d < x.dim(); ++d) {
      PAYLOAD_CHECK(o->to_tensor().size(d) == (d == dim ? sizes[i] : x.size(d)), "%s %s: piece %zu has another shape",
                    kCudaBackendName, op, i);
    }
    covered += sizes[i];
  }
  PAYLOAD_CHECK(covered == x.size(static_cast<int>(dim)), "%s %s: pieces do not cover the input", kCudaBackendName, op);
  plan->ints[0] = dim;
  return Error::Ok;
}

// int8_linear(x, weight, scale, bias, out): float32 x [..., k], int8 weight [n, k] with float32
// scale [n], float32 bias [n] or None, out [..., n]. k is a multiple of 4 (the kernel reads packed
// groups of four) and small enough that int32 sums of k products of two int8 values cannot overflow.
constexpr int64_t kMaxInt8Depth = (int64_t{1} << 31) / (127 * 127) / 4 * 4;

Error plan_int8_linear(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 5 && a[0]->is_tensor() && a[1]->is_tensor() && a[4]->is_tensor(), "%s %s: arguments",
                kCudaBackendName, op);
  PAYLOAD_CHECK(
      plan->dtype == runtime::ScalarType::Float && a[0]->to_tensor().scalar_type() == runtime::ScalarType::Float,
      "%s %s: activations must be float32", kCudaBackendName, op);
  const Tensor &x = a[0]->to_tensor(), &w = a[1]->to_tensor(), &o = a[4]->to_tensor();
  PAYLOAD_CHECK(w.scalar_type() == runtime::ScalarType::Char && w.dim() == 2,
                "%s %s: the weight must be a 2-D int8 tensor", kCudaBackendName, op);
  const int64_t n = w.size(0), k = w.size(1);
  PAYLOAD_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) == k, "%s %s: input features differ from the weight's %lld",
                kCudaBackendName, op, static_cast<long long>(k));
  PAYLOAD_CHECK(k > 0 && k % 4 == 0 && k <= kMaxInt8Depth, "%s %s: %lld input features (a multiple of 4 up to %lld)",
                kCudaBackendName, op, static_cast<long long>(k), static_cast<long long>(kMaxInt8Depth));
  ET_TRY(need_numel(a[2], n, op, 2));
  if (!a[3]->is_none()) ET_TRY(need_numel(a[3], n, op, 3));
  const int64_t rows = x.numel() / k;
  int64_t total = 0;
  PAYLOAD_CHECK(!__builtin_mul_overflow(rows, n, &total) && o.dim() == x.dim() && o.size(o.dim() - 1) == n,
                "%s %s: the output must be shaped [..., %lld]", kCudaBackendName, op, static_cast<long long>(n));
  ET_TRY(need_numel(a[4], total, op, 4));
  plan->ints[0] = rows, plan->ints[1] = n, plan->ints[2] = k;
  return Error::Ok;
}

// int8_weight_linear(x, weight, scale, bias, out) and int4_linear(x, packed, scales, group_size, bias,
// out): x, bias and out of one floating dtype, the weight int8 [n, k] or packed uint8 [n, k / 2], its
// scales float32 ([n] or [n, k / group_size]); k a multiple of 32 (the kernels read 16 bytes of
// weights at a time), group_size 32, 64 or 128.
Error plan_weight_linear(Span<EValue*> a, const char* op, OpPlan* plan) {
  const bool int4 = plan->kind == OpKind::Int4Linear;
  const size_t bias = int4 ? 4 : 3, n_args = bias + 2;
  PAYLOAD_CHECK(a.size() == n_args && a[1]->is_tensor() && a[2]->is_tensor(), "%s %s: arguments", kCudaBackendName, op);
  for (size_t i : {size_t{0}, n_args - 1}) ET_TRY(need_float(a[i], op, i));
  const Tensor &x = a[0]->to_tensor(), &w = a[1]->to_tensor(), &s = a[2]->to_tensor(), &o = a[n_args - 1]->to_tensor();
  PAYLOAD_CHECK(w.dim() == 2 && w.scalar_type() == (int4 ? runtime::ScalarType::Byte : runtime::ScalarType::Char),
                "%s %s: the weight must be a 2-D %s tensor", kCudaBackendName, op, int4 ? "uint8" : "int8");
  const int64_t n = w.size(0), k = int4 ? 2 * w.size(1) : w.size(1);
  int64_t group = 1;
  if (int4) {
    PAYLOAD_CHECK(a[3]->is_int() && (a[3]->to_int() == 32 || a[3]->to_int() == 64 || a[3]->to_int() == 128),
                  "%s %s: group_size must be 32, 64 or 128", kCudaBackendName, op);
    group = a[3]->to_int();
  }
  PAYLOAD_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) == k && k > 0 && k % 32 == 0 && k % group == 0,
                "%s %s: %lld input features for a weight of %lld (a multiple of 32 and of the group)", kCudaBackendName,
                op, static_cast<long long>(x.dim() >= 1 ? x.size(x.dim() - 1) : 0), static_cast<long long>(k));
  const int64_t scales = int4 ? n * (k / group) : n;
  PAYLOAD_CHECK(s.scalar_type() == runtime::ScalarType::Float && s.numel() == scales,
                "%s %s: the scales must be %lld float32 values", kCudaBackendName, op, static_cast<long long>(scales));
  if (!a[bias]->is_none()) ET_TRY(need_numel(a[bias], n, op, bias));
  const int64_t rows = x.numel() / k;
  int64_t total = 0;
  PAYLOAD_CHECK(!__builtin_mul_overflow(rows, n, &total) && o.dim() == x.dim() && o.size(o.dim() - 1) == n,
                "%s %s: the output must be shaped [..., %lld]", kCudaBackendName, op, static_cast<long long>(n));
  ET_TRY(need_numel(a[n_args - 1], total, op, n_args - 1));
  plan->ints[0] = rows, plan->ints[1] = n, plan->ints[2] = k, plan->ints[3] = group;
  return Error::Ok;
}

// add/sub/mul/maximum/minimum on int32 or int64 tensors: every tensor of one integer dtype, a
// number `other` and alpha integers (PyTorch would promote otherwise). div is true division.
Error plan_integer_binary(Span<EValue*> a, const char* op, OpPlan* plan) {
  const size_t n = a.size();
  const runtime::ScalarType t = a[0]->to_tensor().scalar_type();
  PAYLOAD_CHECK(plan->binary != Binary::Div, "%s %s: integer division (true division in PyTorch)", kCudaBackendName,
                op);
  PAYLOAD_CHECK((a[1]->is_int() || (is_integer(a[1]) && a[1]->to_tensor().scalar_type() == t)) &&
                    is_integer(a[n - 1]) && a[n - 1]->to_tensor().scalar_type() == t && (n == 3 || a[2]->is_int()),
                "%s %s: integer operands, alpha and output must share the input's dtype", kCudaBackendName, op);
  PAYLOAD_CHECK(a[n - 1]->to_tensor().dim() <= kMaxOpDims, "%s %s: more than %d dimensions", kCudaBackendName, op,
                kMaxOpDims);
  plan->kind = OpKind::IntegerBinary;
  return Error::Ok;  // broadcasting is checked against the shapes on each call
}

// cumsum(self, dim, dtype?, out): any element type the kernels convert, in and out.
Error plan_cumsum(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 4 && is_element(a[0]) && is_element(a[3]), "%s %s: arguments", kCudaBackendName, op);
  const Tensor &x = a[0]->to_tensor(), &o = a[3]->to_tensor();
  PAYLOAD_CHECK(o.dim() == x.dim() && o.numel() == x.numel() && x.dim() > 0,
                "%s %s: the output must be shaped like the input", kCudaBackendName, op);
  for (int d = 0; d < x.dim(); ++d) {
    PAYLOAD_CHECK(o.size(d) == x.size(d), "%s %s: the output must be shaped like the input", kCudaBackendName, op);
  }
  ET_TRY(dim_at(a[1], x, op, &plan->ints[0]));
  return Error::Ok;
}

// argmax(self, dim?, keepdim, out): over the last dimension, or over every element (dim None).
Error plan_argmax(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 4 && is_element(a[0]) && a[2]->is_bool() && a[3]->is_tensor() &&
                    a[3]->to_tensor().scalar_type() == runtime::ScalarType::Long,
                "%s %s: arguments (the output is int64)", kCudaBackendName, op);
  const Tensor& x = a[0]->to_tensor();
  int64_t cols = x.numel();
  if (!a[1]->is_none()) {
    int64_t dim;
    ET_TRY(dim_at(a[1], x, op, &dim));
    PAYLOAD_CHECK(dim == x.dim() - 1, "%s: %s only over the last dimension", kCudaBackendName, op);
    cols = x.size(static_cast<int>(dim));
  }
  PAYLOAD_CHECK(cols > 0, "%s %s: an empty reduction", kCudaBackendName, op);
  plan->ints[0] = x.numel() / cols, plan->ints[1] = cols;
  PAYLOAD_CHECK(a[3]->to_tensor().numel() == plan->ints[0], "%s %s: the output has %lld elements, expected %lld",
                kCudaBackendName, op, static_cast<long long>(a[3]->to_tensor().numel()),
                static_cast<long long>(plan->ints[0]));
  return Error::Ok;
}

// gather(self, dim, index, sparse_grad, out): index int64 or int32 of self's rank, no larger than
// self off `dim`; out of index's shape and self's dtype.
Error plan_gather(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 5 && a[0]->is_tensor() && is_integer(a[2]) && same_type_tensors(a[0], a[4]),
                "%s %s: arguments (int64 or int32 index; the output of self's dtype)", kCudaBackendName, op);
  const Tensor &x = a[0]->to_tensor(), &idx = a[2]->to_tensor(), &o = a[4]->to_tensor();
  ET_TRY(dim_at(a[1], x, op, &plan->ints[0]));
  PAYLOAD_CHECK(idx.dim() == x.dim() && o.dim() == x.dim(), "%s %s: index and output must have self's rank",
                kCudaBackendName, op);
  for (int d = 0; d < x.dim(); ++d) {
    PAYLOAD_CHECK(o.size(d) == idx.size(d) && (d == plan->ints[0] || idx.size(d) <= x.size(d)),
                  "%s %s: index and output shapes", kCudaBackendName, op);
  }
  return Error::Ok;
}

// lstm_cell(input_gates, hidden_gates, cell, hidden_out, cell_out) and gru_cell(input_gates,
// hidden_gates, hidden, hidden_out): gates [rows, G * units] (G = 4 or 3), states [rows, units], all
// of one floating dtype (checked by plan_op).
Error plan_recurrent_cell(Span<EValue*> a, const char* op, OpPlan* plan) {
  const bool lstm = plan->kind == OpKind::LstmCell;
  PAYLOAD_CHECK(a.size() == (lstm ? 5u : 4u), "%s %s: %zu arguments", kCudaBackendName, op, a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ET_TRY(need_float(a[i], op, i));
    PAYLOAD_CHECK(a[i]->to_tensor().dim() == 2, "%s %s: argument %zu must be 2-D [batch, features]", kCudaBackendName,
                  op, i);
  }
  const Tensor& state = a[2]->to_tensor();
  const int64_t rows = state.size(0), units = state.size(1), gates = lstm ? 4 : 3;
  for (size_t i : {0, 1}) {
    const Tensor& g = a[i]->to_tensor();
    PAYLOAD_CHECK(g.size(0) == rows && g.size(1) == gates * units, "%s %s: gate tensor %zu must be [%lld, %lld]",
                  kCudaBackendName, op, i, static_cast<long long>(rows), static_cast<long long>(gates * units));
  }
  for (size_t i = 3; i < a.size(); ++i) {
    const Tensor& o = a[i]->to_tensor();
    PAYLOAD_CHECK(o.size(0) == rows && o.size(1) == units, "%s %s: output %zu must be shaped like the state",
                  kCudaBackendName, op, i - 3);
  }
  plan->ints[0] = rows, plan->ints[1] = units;
  return Error::Ok;
}

// lstm_layer(gates, w_hh, b_hh, h0, c0, reverse, y, h_n, c_n) and gru_layer(gates, w_hh, b_hh, h0,
// reverse, y, h_n): gates [T, B, G * H] (T >= 1), w_hh [G * H, H], b_hh None or G * H elements, the
// states [B, H], y [T, B, H]; one floating dtype (checked by plan_op).
Error plan_recurrent_layer(Span<EValue*> a, const char* op, OpPlan* plan) {
  const bool lstm = plan->kind == OpKind::LstmLayer;
  const size_t flag = lstm ? 5 : 4;
  PAYLOAD_CHECK(a.size() == flag + (lstm ? 4u : 3u), "%s %s: %zu arguments", kCudaBackendName, op, a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (i == flag || (i == 2 && a[i]->is_none())) continue;
    ET_TRY(need_float(a[i], op, i));
  }
  PAYLOAD_CHECK(a[flag]->is_bool() || a[flag]->is_int(), "%s %s: reverse must be a bool", kCudaBackendName, op);
  const Tensor &x = a[0]->to_tensor(), &w = a[1]->to_tensor(), &h0 = a[3]->to_tensor(), &y = a[flag + 1]->to_tensor();
  PAYLOAD_CHECK(h0.dim() == 2, "%s %s: the initial hidden state must be 2-D [batch, hidden]", kCudaBackendName, op);
  const int64_t rows = h0.size(0), units = h0.size(1), gates = lstm ? 4 : 3;
  PAYLOAD_CHECK(x.dim() == 3 && x.size(0) >= 1 && x.size(1) == rows && x.size(2) == gates * units,
                "%s %s: gates must be [steps >= 1, %lld, %lld]", kCudaBackendName, op, static_cast<long long>(rows),
                static_cast<long long>(gates * units));
  PAYLOAD_CHECK(w.dim() == 2 && w.size(0) == gates * units && w.size(1) == units, "%s %s: w_hh must be [%lld, %lld]",
                kCudaBackendName, op, static_cast<long long>(gates * units), static_cast<long long>(units));
  if (a[2]->is_tensor()) ET_TRY(need_numel(a[2], gates * units, op, 2));
  PAYLOAD_CHECK(y.dim() == 3 && y.size(0) == x.size(0) && y.size(1) == rows && y.size(2) == units,
                "%s %s: the output must be [steps, batch, hidden]", kCudaBackendName, op);
  for (size_t i : {size_t{4}, flag + 2, flag + 3}) {
    if (i == flag || i >= a.size()) continue;  // a GRU has no cell
    PAYLOAD_CHECK(runtime::same_shape(a[i]->to_tensor(), h0), "%s %s: argument %zu must be shaped like the state",
                  kCudaBackendName, op, i);
  }
  plan->ints[0] = x.size(0), plan->ints[1] = rows, plan->ints[2] = units;
  plan->ints[3] = a[flag]->is_bool() ? a[flag]->to_bool() : a[flag]->to_int() != 0;
  return Error::Ok;
}

// scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
// out) on 3-D ([heads, L, E]) or 4-D ([batch, heads, L, E]) tensors; the mask is bool or of the
// query's dtype and broadcasts to [batch, heads, L, S].
Error plan_attention(Span<EValue*> a, const char* op, OpPlan* plan) {
  PAYLOAD_CHECK(a.size() == 9, "%s %s: %zu arguments", kCudaBackendName, op, a.size());
  for (size_t i : {0, 1, 2, 8}) ET_TRY(need_float(a[i], op, i));
  ET_TRY(need_number(a[4], op, 4));
  PAYLOAD_CHECK(a[4]->scalar_as_double() == 0.0 && a[5]->is_bool() && a[7]->is_bool() &&
                    (a[6]->is_none() || a[6]->is_double() || a[6]->is_int()),
                "%s %s: dropout_p must be 0, is_causal and enable_gqa bools, scale None or a number", kCudaBackendName,
                op);
  const Tensor &q = a[0]->to_tensor(), &k = a[1]->to_tensor(), &v = a[2]->to_tensor(), &o = a[8]->to_tensor();
  const int r = q.dim();
  PAYLOAD_CHECK((r == 3 || r == 4) && k.dim() == r && v.dim() == r && o.dim() == r,
                "%s %s: query, key, value and output must all be 3-D or 4-D", kCudaBackendName, op);
  int64_t* s = plan->ints;
  s[0] = r == 4 ? q.size(0) : 1, s[1] = q.size(r - 3), s[2] = k.size(r - 3), s[3] = q.size(r - 2), s[4] = k.size(r - 2),
  s[5] = q.size(r - 1), s[6] = v.size(r - 1), s[7] = a[5]->to_bool();
  PAYLOAD_CHECK((r == 3 || (k.size(0) == s[0] && v.size(0) == s[0] && o.size(0) == s[0])) && v.size(r - 3) == s[2] &&
                    v.size(r - 2) == s[4] && k.size(r - 1) == s[5] && o.size(r - 3) == s[1] && o.size(r - 2) == s[3] &&
                    o.size(r - 1) == s[6],
                "%s %s: the shapes of query, key, value and output disagree", kCudaBackendName, op);
  // Without enable_gqa, one key/value head still broadcasts over the query's heads.
  PAYLOAD_CHECK(a[7]->to_bool() ? s[2] > 0 && s[1] % s[2] == 0 : s[1] == s[2] || s[2] == 1,
                "%s %s: %lld query heads for %lld key/value heads", kCudaBackendName, op, static_cast<long long>(s[1]),
                static_cast<long long>(s[2]));
  PAYLOAD_CHECK(s[5] <= kMaxAttentionHeadDim && s[6] <= kMaxAttentionHeadDim && s[3] <= kMaxAttentionQueries,
                "%s %s: head sizes up to %d and up to %lld queries", kCudaBackendName, op, kMaxAttentionHeadDim,
                static_cast<long long>(kMaxAttentionQueries));
  s[8] = static_cast<int64_t>(AttentionMask::None);
  if (a[3]->is_none()) return Error::Ok;
  PAYLOAD_CHECK(!s[7] && (is_bool(a[3]) || is_float(a[3])),
                "%s %s: attn_mask must be a bool or floating tensor, and not combined with is_causal", kCudaBackendName,
                op);
  const Tensor& m = a[3]->to_tensor();
  const int64_t scores[4] = {s[0], s[1], s[3], s[4]};
  PAYLOAD_CHECK(m.dim() <= r && runtime::broadcast_strides(m, 4, scores, &s[9]),
                "%s %s: attn_mask does not broadcast to the scores", kCudaBackendName, op);
  s[8] = static_cast<int64_t>(is_bool(a[3]) ? AttentionMask::Bool : AttentionMask::Additive);
  return Error::Ok;
}

}  // namespace

Error indexing(Span<EValue* const> items, int dims, const char* op, Indexing* ix) {
  PAYLOAD_CHECK(static_cast<int>(items.size()) <= dims, "%s %s: %zu indices for a %d-D tensor", kCudaBackendName, op,
                items.size(), dims);
  const auto none = [&](size_t k) { return items[k] == nullptr || items[k]->is_none(); };
  size_t k = 0;
  while (k < items.size() && none(k)) ++k;
  ix->lead = static_cast<int>(k);
  for (; k < items.size() && !none(k); ++k) {
    PAYLOAD_CHECK(items[k]->is_tensor() && (items[k]->to_tensor().scalar_type() == runtime::ScalarType::Long ||
                                            items[k]->to_tensor().scalar_type() == runtime::ScalarType::Int),
                  "%s %s: index %zu must be an int64 or int32 tensor (masks are not run)", kCudaBackendName, op, k);
    ix->rank = std::max(ix->rank, items[k]->to_tensor().dim());
  }
  ix->count = static_cast<int>(k) - ix->lead;
  PAYLOAD_CHECK(ix->count > 0, "%s %s: no index tensor", kCudaBackendName, op);
  for (; k < items.size(); ++k) {
    PAYLOAD_CHECK(none(k), "%s %s: index tensors apart from one another are not run", kCudaBackendName, op);
  }
  std::fill(ix->shape, ix->shape + kMaxOpDims, 1);
  for (int j = ix->lead; j < ix->lead + ix->count; ++j) {
    const Tensor& t = items[j]->to_tensor();
    for (int d = 0; d < t.dim(); ++d) {
      int64_t& s = ix->shape[ix->rank - t.dim() + d];
      PAYLOAD_CHECK(s == 1 || t.size(d) == 1 || t.size(d) == s, "%s %s: index shapes do not broadcast",
                    kCudaBackendName, op);
      if (t.size(d) != 1) s = t.size(d);
    }
  }
  return Error::Ok;
}

bool element_type_of(runtime::ScalarType t, ElementType* out) {
  switch (t) {
    case runtime::ScalarType::Float: return *out = ElementType::Float32, true;
    case runtime::ScalarType::Half: return *out = ElementType::Float16, true;
    case runtime::ScalarType::BFloat16: return *out = ElementType::BFloat16, true;
    case runtime::ScalarType::Bool: return *out = ElementType::Bool, true;
    case runtime::ScalarType::Int: return *out = ElementType::Int32, true;
    case runtime::ScalarType::Long: return *out = ElementType::Int64, true;
    default: return false;
  }
}

Error plan_op(const char* name, Span<EValue*> a, OpPlan* plan) {
  ET_CHECK_OR_RETURN(classify(name, plan), Error::NotSupported, "%s does not implement %s", kCudaBackendName, name);
  const size_t n = a.size();
  PAYLOAD_CHECK(n >= 2, "%s %s: %zu arguments", kCudaBackendName, name, n);
  for (size_t i = 0; i < n; ++i)
    PAYLOAD_CHECK(a[i] != nullptr, "%s %s: argument %zu missing", kCudaBackendName, name, i);
  // One floating element type per op (kernels are instantiated per type, never mixed), but for
  // the conversion between them.
  bool seen = false;
  // The quantized linear layers' scales are float32 whatever the activations' dtype.
  const bool float32_scales = plan->kind == OpKind::Int8WeightLinear || plan->kind == OpKind::Int4Linear;
  for (size_t i = 0; i < n && plan->kind != OpKind::Cast; ++i) {
    if (!is_float(a[i]) || (float32_scales && i == 2)) continue;
    const runtime::ScalarType t = a[i]->to_tensor().scalar_type();
    PAYLOAD_CHECK(!seen || t == plan->dtype, "%s %s: argument %zu is %s, another argument %s", kCudaBackendName, name,
                  i, runtime::to_string(t), runtime::to_string(plan->dtype));
    plan->dtype = t, seen = true;
  }
  switch (plan->kind) {
    case OpKind::Unary:
      ET_TRY(need_float(a[0], name, 0));
      ET_TRY(need_numel(a[n - 1], a[0]->to_tensor().numel(), name, n - 1));
      return plan_unary_parameters(a, name, plan);
    case OpKind::Binary:
      PAYLOAD_CHECK(n == 3 || n == 4, "%s %s: %zu arguments", kCudaBackendName, name, n);
      if (is_integer(a[0])) return plan_integer_binary(a, name, plan);
      ET_TRY(need_float(a[0], name, 0));
      ET_TRY(need_float(a[n - 1], name, n - 1));
      PAYLOAD_CHECK(is_float(a[1]) || a[1]->is_int() || a[1]->is_double(),
                    "%s %s: other must be a floating tensor or a number", kCudaBackendName, name);
      if (n == 4) ET_TRY(need_number(a[2], name, 2));
      PAYLOAD_CHECK(a[n - 1]->to_tensor().dim() <= kMaxOpDims, "%s %s: more than %d dimensions", kCudaBackendName, name,
                    kMaxOpDims);
      return Error::Ok;  // broadcasting is checked against the shapes on each call
    case OpKind::Bmm:
      PAYLOAD_CHECK(n == 3, "%s %s: %zu arguments", kCudaBackendName, name, n);
      for (size_t t : {0, 1, 2}) ET_TRY(need_float(a[t], name, t));
      return Error::Ok;  // the shim library checks the matrix shapes
    case OpKind::Expand:
      PAYLOAD_CHECK(n == 4 && same_type_tensors(a[0], a[n - 1]), "%s %s: arguments", kCudaBackendName, name);
      return need_broadcast(a[0], a[n - 1]->to_tensor(), name, 0);
    case OpKind::Split: return plan_split(a, name, plan);
    case OpKind::Compare:
      PAYLOAD_CHECK(n == 3, "%s %s: %zu arguments", kCudaBackendName, name, n);
      PAYLOAD_CHECK(is_float(a[0]) || is_integer(a[0]) || is_bool(a[0]),
                    "%s %s: argument 0 must be a floating, integer or bool tensor", kCudaBackendName, name);
      if (a[1]->is_tensor()) {  // .Tensor: two tensors of one dtype, broadcast to the output
        plan->ints[0] = 1;
        PAYLOAD_CHECK(same_type_tensors(a[0], a[1]) && is_bool(a[2]),
                      "%s %s: both operands must have one dtype, the output bool", kCudaBackendName, name);
        for (size_t i : {0, 1}) ET_TRY(need_broadcast(a[i], a[2]->to_tensor(), name, i));
        return Error::Ok;
      }
      ET_TRY(need_number(a[1], name, 1));
      return need_bool_numel(a[2], a[0]->to_tensor().numel(), name, 2);
    case OpKind::LogicalNot:
      PAYLOAD_CHECK(n == 2 && is_bool(a[0]), "%s %s: the input must be a bool tensor", kCudaBackendName, name);
      return need_bool_numel(a[1], a[0]->to_tensor().numel(), name, 1);
    case OpKind::Any: {
      // Over the last dimension only (as the attention masks lower to).
      PAYLOAD_CHECK(n == 4 && is_bool(a[0]) && a[1]->is_int() && a[2]->is_bool(), "%s %s: arguments", kCudaBackendName,
                    name);
      const Tensor& x = a[0]->to_tensor();
      PAYLOAD_CHECK(x.dim() > 0 && (a[1]->to_int() == -1 || a[1]->to_int() == x.dim() - 1),
                    "%s: %s only over the last dimension", kCudaBackendName, name);
      const int64_t cols = x.size(x.dim() - 1);
      return need_bool_numel(a[3], cols ? x.numel() / cols : 0, name, 3);
    }
    case OpKind::Where: {
      PAYLOAD_CHECK(n == 4 && is_bool(a[0]), "%s %s: the condition must be a bool tensor", kCudaBackendName, name);
      ET_TRY(need_float(a[1], name, 1));
      ET_TRY(need_float(a[2], name, 2));
      ET_TRY(need_float(a[3], name, 3));
      for (size_t i : {0, 1, 2}) ET_TRY(need_broadcast(a[i], a[3]->to_tensor(), name, i));
      return Error::Ok;
    }
    case OpKind::Embedding: {
      PAYLOAD_CHECK(n == 6 && a[1]->is_tensor() && a[2]->is_int(), "%s %s: arguments", kCudaBackendName, name);
      ET_TRY(need_float(a[0], name, 0));
      const Tensor &w = a[0]->to_tensor(), &idx = a[1]->to_tensor();
      PAYLOAD_CHECK(w.dim() == 2, "%s %s: the weight must be 2-D", kCudaBackendName, name);
      PAYLOAD_CHECK(idx.scalar_type() == runtime::ScalarType::Long || idx.scalar_type() == runtime::ScalarType::Int,
                    "%s %s: indices must be int64 or int32", kCudaBackendName, name);
      int64_t total = 0;
      PAYLOAD_CHECK(!__builtin_mul_overflow(idx.numel(), w.size(1), &total), "%s %s: output size overflows",
                    kCudaBackendName, name);
      return need_numel(a[5], total, name, 5);
    }
    case OpKind::Cast: {
      // _to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format, out), or
      // copy(self, src, non_blocking, out): src's elements in self's dtype. ints[0] = the source.
      const bool copy = std::strcmp(name, "aten::copy") == 0;
      PAYLOAD_CHECK(n == (copy ? 4u : 8u), "%s %s: %zu arguments", kCudaBackendName, name, n);
      plan->ints[0] = copy ? 1 : 0;
      ElementType unused;
      for (size_t i : {static_cast<size_t>(plan->ints[0]), n - 1}) {
        PAYLOAD_CHECK(a[i]->is_tensor() && element_type_of(a[i]->to_tensor().scalar_type(), &unused),
                      "%s %s: argument %zu must be a float32, float16, bfloat16, bool, int32 or int64 tensor",
                      kCudaBackendName, name, i);
      }
      PAYLOAD_CHECK(a[n - 1]->to_tensor().numel() == a[plan->ints[0]]->to_tensor().numel(),
                    "%s %s: output size differs (a broadcasting copy is not run)", kCudaBackendName, name);
      PAYLOAD_CHECK(!copy || same_type_tensors(a[0], a[3]), "%s %s: the output must have self's dtype",
                    kCudaBackendName, name);
      return Error::Ok;
    }
    case OpKind::Logic:
      PAYLOAD_CHECK(n == 3 && is_bool(a[0]) && is_bool(a[1]) && is_bool(a[2]), "%s %s: bool tensors only",
                    kCudaBackendName, name);
      for (size_t i : {0, 1}) ET_TRY(need_broadcast(a[i], a[2]->to_tensor(), name, i));
      return Error::Ok;
    case OpKind::Index: return plan_index(a, name);
    case OpKind::IndexPut: return plan_index_put(a, name);
    case OpKind::Addmm:
    case OpKind::Mm: {
      const bool addmm = plan->kind == OpKind::Addmm;
      PAYLOAD_CHECK(n == (addmm ? 6u : 3u), "%s %s: %zu arguments", kCudaBackendName, name, n);
      for (size_t t : addmm ? std::vector<size_t>{0, 1, 2, 5} : std::vector<size_t>{0, 1, 2}) {
        ET_TRY(need_float(a[t], name, t));
      }
      if (addmm) {
        ET_TRY(need_number(a[3], name, 3));
        ET_TRY(need_number(a[4], name, 4));
      }
      return Error::Ok;  // the shim library checks the matrix shapes
    }
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      PAYLOAD_CHECK(n == 4, "%s %s: %zu arguments", kCudaBackendName, name, n);
      ET_TRY(need_float(a[0], name, 0));
      ET_TRY(need_int(a[1], name, 1));
      ET_TRY(need_numel(a[3], a[0]->to_tensor().numel(), name, 3));
      const int64_t dim = a[1]->to_int(), rank = a[0]->to_tensor().dim();
      PAYLOAD_CHECK(rank > 0 && (dim == -1 || dim == rank - 1), "%s: %s only over the last dimension", kCudaBackendName,
                    name);
      return Error::Ok;
    }
    case OpKind::LayerNorm: {
      PAYLOAD_CHECK(n == 8 && a[1]->is_int_list(), "%s %s: arguments", kCudaBackendName, name);
      ET_TRY(need_float(a[0], name, 0));
      ET_TRY(need_number(a[4], name, 4));
      const Tensor& x = a[0]->to_tensor();
      int64_t cols = 1;
      const auto shape = a[1]->to_int_list();
      PAYLOAD_CHECK(static_cast<int>(shape.size()) <= x.dim(), "%s %s: normalized shape", kCudaBackendName, name);
      for (size_t i = 0; i < shape.size(); ++i) {
        PAYLOAD_CHECK(shape[i] == x.size(x.dim() - static_cast<int>(shape.size()) + static_cast<int>(i)),
                      "%s %s: normalized shape differs from the input's", kCudaBackendName, name);
        cols *= shape[i];
      }
      const int64_t rows = cols ? x.numel() / cols : 0;
      for (size_t i : {2, 3}) {
        if (!a[i]->is_none()) ET_TRY(need_numel(a[i], cols, name, i));
      }
      ET_TRY(need_numel(a[5], x.numel(), name, 5));
      ET_TRY(need_numel(a[6], rows, name, 6));
      return need_numel(a[7], rows, name, 7);
    }
    case OpKind::RmsNorm: {  // rms_norm(x, weight, eps, out)
      PAYLOAD_CHECK(n == 4, "%s %s: %zu arguments", kCudaBackendName, name, n);
      ET_TRY(need_float(a[0], name, 0));
      ET_TRY(need_number(a[2], name, 2));
      const Tensor& x = a[0]->to_tensor();
      PAYLOAD_CHECK(x.dim() >= 1, "%s %s: the input needs a dimension", kCudaBackendName, name);
      const int64_t cols = x.size(x.dim() - 1);
      ET_TRY(need_numel(a[1], cols, name, 1));
      ET_TRY(need_numel(a[3], x.numel(), name, 3));
      plan->ints[0] = cols ? x.numel() / cols : 0, plan->ints[1] = cols;
      plan->scalars[0] = static_cast<float>(a[2]->scalar_as_double());
      return Error::Ok;
    }
    case OpKind::Rope: {  // rope(x, cos, sin, out)
      PAYLOAD_CHECK(n == 4, "%s %s: %zu arguments", kCudaBackendName, name, n);
      for (size_t i = 0; i < n; ++i) ET_TRY(need_float(a[i], name, i));
      const Tensor& x = a[0]->to_tensor();
      PAYLOAD_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) % 2 == 0 && runtime::same_shape(x, a[3]->to_tensor()),
                    "%s %s: the input needs an even last size, and the output its shape", kCudaBackendName, name);
      for (size_t i : {1, 2}) ET_TRY(need_broadcast(a[i], a[3]->to_tensor(), name, i));
      return Error::Ok;
    }
    case OpKind::Copy:
    case OpKind::Permute:
      PAYLOAD_CHECK(same_type_tensors(a[0], a[n - 1]), "%s %s: input and output must be tensors of one dtype",
                    kCudaBackendName, name);
      PAYLOAD_CHECK(plan->kind == OpKind::Copy || (n == 3 && a[1]->is_int_list()), "%s %s: arguments", kCudaBackendName,
                    name);
      return Error::Ok;  // byte counts and permutations are checked on each call
    case OpKind::Conv: return plan_conv(a, name, plan);
    case OpKind::BatchNorm: {
      PAYLOAD_CHECK(n == 10, "%s %s: %zu arguments", kCudaBackendName, name, n);
      ET_TRY(need_float(a[0], name, 0));
      ET_TRY(need_number(a[6], name, 6));
      const Tensor& x = a[0]->to_tensor();
      PAYLOAD_CHECK(x.dim() >= 2, "%s %s: input needs a channel dimension", kCudaBackendName, name);
      for (size_t i : {1, 2, 3, 4}) {
        if (!a[i]->is_none()) ET_TRY(need_numel(a[i], x.size(1), name, i));
      }
      PAYLOAD_CHECK(a[3]->is_tensor() && a[4]->is_tensor(), "%s %s: running statistics are required", kCudaBackendName,
                    name);
      return need_numel(a[7], x.numel(), name, 7);
    }
    case OpKind::MaxPool:
    case OpKind::AvgPool: return plan_pool(a, name, plan->kind == OpKind::MaxPool, plan);
    case OpKind::RowReduce: return plan_mean(a, name, plan);
    case OpKind::Int8Linear: return plan_int8_linear(a, name, plan);
    case OpKind::Int8WeightLinear:
    case OpKind::Int4Linear: return plan_weight_linear(a, name, plan);
    case OpKind::LstmCell:
    case OpKind::GruCell: return plan_recurrent_cell(a, name, plan);
    case OpKind::LstmLayer:
    case OpKind::GruLayer: return plan_recurrent_layer(a, name, plan);
    case OpKind::IntegerBinary:  // classify gives Binary and Conv; plan_integer_binary and plan_conv3d choose these
    case OpKind::Conv3d: return Error::Ok;
    case OpKind::Cumsum: return plan_cumsum(a, name, plan);
    case OpKind::ArgMax: return plan_argmax(a, name, plan);
    case OpKind::Gather: return plan_gather(a, name, plan);
    case OpKind::Attention: return plan_attention(a, name, plan);
    case OpKind::Slice: return plan_slice(a, name, plan);
    case OpKind::Select: return plan_select(a, name, plan);
    case OpKind::Cat: return plan_cat(a, name, plan);
    case OpKind::AsStrided: return plan_as_strided(a, name, plan);
    case OpKind::ConstantPad: return plan_constant_pad(a, name, plan);
    case OpKind::IndexSelect: return plan_index_select(a, name, plan);
    case OpKind::Upsample: return plan_upsample(a, name, plan);
    case OpKind::AdaptiveAvgPool: return plan_adaptive_avg_pool(a, name, plan);
  }
  return Error::Ok;
}

Error plan_instruction(runtime::Method& m, size_t k, OpPlan* plan) {
  const char* name = m.instruction_operator(k);
  ET_CHECK_OR_RETURN(name != nullptr, Error::NotSupported, "%s: instruction %zu is not a kernel call", kCudaBackendName,
                     k);
  // Every tensor of an op fits the kernels' index arithmetic (broadcasts, permutations, copies).
  const Span<EValue*> args = m.instruction_args(k);
  for (size_t i = 0; i < args.size(); ++i) {
    PAYLOAD_CHECK(args[i] == nullptr || !args[i]->is_tensor() || args[i]->to_tensor().dim() <= kMaxOpDims,
                  "%s %s: argument %zu has more than %d dimensions", kCudaBackendName, name, i, kMaxOpDims);
  }
  return plan_op(name, args, plan);
}

namespace {

// Loads `bytes` as a program on the CPU and its first method with host memory (refused above
// `max_planned_bytes`), and hands the method to `fn`.
template <typename Fn>
auto with_host_method(Span<const uint8_t> bytes, uint64_t max_planned_bytes, Fn fn)
    -> decltype(fn(std::declval<runtime::Method&>())) {
  ET_TRY_ASSIGN(auto loader, runtime::OwnedBufferDataLoader::copy_of(bytes.data(), bytes.size()));
  ET_TRY_ASSIGN(auto program, runtime::Program::load(std::move(loader)));
  const char* method_name = program->method_name(0);
  ET_TRY_ASSIGN(const uint64_t total, program->planned_bytes(method_name));
  ET_CHECK_OR_RETURN(total <= max_planned_bytes, Error::MemoryAllocationFailed, "%s payload plans more than %llu bytes",
                     kCudaBackendName, static_cast<unsigned long long>(max_planned_bytes));
  ET_TRY_ASSIGN(auto method, program->load_method(method_name));
  return fn(*method);
}

}  // namespace

runtime::Result<size_t> check_payload(Span<const uint8_t> payload, uint64_t max_planned_bytes) {
  return with_host_method(payload, max_planned_bytes, [](runtime::Method& m) -> runtime::Result<size_t> {
    for (size_t k = 0; k < m.num_instructions(); ++k) {
      OpPlan plan;
      ET_TRY(plan_instruction(m, k, &plan));
    }
    return m.num_instructions();
  });
}

runtime::Result<std::vector<std::string>> explain_instructions(Span<const uint8_t> program) {
  using Reasons = runtime::Result<std::vector<std::string>>;
  return with_host_method(program, UINT64_MAX, [](runtime::Method& m) -> Reasons {
    std::vector<std::string> reasons;
    reasons.reserve(m.num_instructions());
    for (size_t k = 0; k < m.num_instructions(); ++k) {
      OpPlan plan;
      runtime::clear_error();
      const Error e = plan_instruction(m, k, &plan);
      const char* why = runtime::last_error_message();
      reasons.emplace_back(e == Error::Ok ? "" : *why ? why : "refused");
    }
    return reasons;
  });
}

namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = text.find(separator, start)) != std::string::npos; start = at + 1) {
    parts.push_back(text.substr(start, at - start));
  }
  parts.push_back(text.substr(start));
  return parts;
}

}  // namespace

bool is_aoti_payload(const runtime::Program& program) { return program.metadata("aoti_library_segment") != nullptr; }

runtime::Result<AotiPayload> read_aoti_payload(const runtime::Program& program, int device_arch) {
  const char* keys[] = {"aoti_library_segment", "aoti_library_bytes", "aoti_torch_version", "aoti_cuda_archs",
                        "aoti_constants"};
  for (const char* key : keys) {
    PAYLOAD_CHECK(program.metadata(key) != nullptr, "%s AOTInductor payload: metadata '%s' is missing",
                  kCudaBackendName, key);
  }
  AotiPayload payload;
  payload.torch_version = program.metadata("aoti_torch_version");
  const std::string release(kAotiTorchRelease);
  const std::string& v = payload.torch_version;
  ET_CHECK_OR_RETURN(v.compare(0, release.size(), release) == 0 &&
                         (v.size() == release.size() || v[release.size()] == '.' || v[release.size()] == '+'),
                     Error::NotSupported,
                     "%s: the AOTInductor payload was built by torch %s; this build runs code of torch %s",
                     kCudaBackendName, v.c_str(), kAotiTorchRelease);
  payload.archs = split(program.metadata("aoti_cuda_archs"), ',');
  for (const std::string& a : payload.archs) {
    PAYLOAD_CHECK(
        a.size() > 3 && a.compare(0, 3, "sm_") == 0 && a.find_first_not_of("0123456789", 3) == std::string::npos,
        "%s AOTInductor payload: architecture '%s' is not sm_<number>", kCudaBackendName, a.c_str());
  }
  if (device_arch > 0) {
    const std::string wanted = "sm_" + std::to_string(device_arch);
    ET_CHECK_OR_RETURN(std::find(payload.archs.begin(), payload.archs.end(), wanted) != payload.archs.end(),
                       Error::NotSupported, "%s: the AOTInductor payload has kernels for %s; this device is %s",
                       kCudaBackendName, program.metadata("aoti_cuda_archs"), wanted.c_str());
  }
  const std::string segment = program.metadata("aoti_library_segment"), bytes = program.metadata("aoti_library_bytes");
  for (const std::string* number : {&segment, &bytes}) {
    PAYLOAD_CHECK(
        !number->empty() && number->size() < 16 && number->find_first_not_of("0123456789") == std::string::npos,
        "%s AOTInductor payload: library segment and size '%s' are not numbers", kCudaBackendName, number->c_str());
  }
  // Digits only, fewer than 16: no overflow. (Not strtoull: glibc 2.38's headers bind it to a symbol
  // the wheel's manylinux_2_34 floor lacks.)
  const auto number = [](const std::string& digits) {
    uint64_t n = 0;
    for (char ch : digits) n = n * 10 + static_cast<uint64_t>(ch - '0');
    return n;
  };
  auto library = program.segment_data(static_cast<size_t>(number(segment)), 0, number(bytes));
  if (!library.ok()) return ET_ERROR_CONTEXT(library.error(), "%s AOTInductor payload: the library", kCudaBackendName);
  payload.library = library.get();
  PAYLOAD_CHECK(!payload.library.empty(), "%s AOTInductor payload: the library is empty", kCudaBackendName);
  const std::string names = program.metadata("aoti_constants");
  if (!names.empty()) payload.constant_names = split(names, '\n');
  for (const std::string& name : payload.constant_names) {
    PAYLOAD_CHECK(!name.empty(), "%s AOTInductor payload: an empty constant name", kCudaBackendName);
  }
  return payload;
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
