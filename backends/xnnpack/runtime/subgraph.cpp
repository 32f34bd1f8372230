#include "backends/xnnpack/runtime/subgraph.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <executorch/backends/xnnpack/runtime/xnnpack_backend.h>
#include <executorch/runtime/core/half.h>
#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/data_loader.h>
#include <executorch/runtime/executor/program.h>

namespace executorch {
namespace backends {
namespace xnnpack {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Tensor;

namespace {

#define XNN_CHECK(cond, ...) ET_CHECK_OR_RETURN(cond, Error::NotSupported, __VA_ARGS__)

// Transposes between torch's NCHW and XNNPACK's NHWC: output dimension i is input dimension p[i].
constexpr size_t kToNhwc[4] = {0, 2, 3, 1};
constexpr size_t kToNchw[4] = {0, 3, 1, 2};
// Where torch's dimension d of a 4-D tensor lies in its NHWC form.
constexpr size_t kNhwcAxis[4] = {0, 3, 1, 2};

Error status(xnn_status s, const char* what) {
  if (s == xnn_status_success) return Error::Ok;
  return ET_ERROR(Error::NotSupported, "%s: %s refused it (XNNPACK status %d)", kXnnpackBackendName, what,
                  static_cast<int>(s));
}

std::vector<size_t> dims_of(const Tensor& t) { return std::vector<size_t>(t.sizes(), t.sizes() + t.dim()); }

std::vector<size_t> nhwc_dims(const Tensor& t) {
  return {static_cast<size_t>(t.size(0)), static_cast<size_t>(t.size(2)), static_cast<size_t>(t.size(3)),
          static_cast<size_t>(t.size(1))};
}

// float32 tensors, and float16 ones: those are float32 values inside the subgraph, converted where
// they enter or leave it (the arithmetic of a float16 program run on the CPU kernels).
bool is_floating(runtime::ScalarType t) { return t == runtime::ScalarType::Float || t == runtime::ScalarType::Half; }

bool is_float_tensor(const EValue* v) {
  return v != nullptr && v->is_tensor() && is_floating(v->to_tensor().scalar_type());
}

bool is_half(const EValue* v) { return v->to_tensor().scalar_type() == runtime::ScalarType::Half; }

bool is_number(const EValue* v) { return v != nullptr && (v->is_int() || v->is_double()); }

// Element `i` of an int list of one or two entries (a window, stride or padding), `fallback` for
// an empty list.
Result<int64_t> pair_at(const EValue* v, size_t i, int64_t fallback, const char* op) {
  XNN_CHECK(v != nullptr && v->is_int_list() && v->to_int_list().size() <= 2, "%s %s: expected one or two ints",
            kXnnpackBackendName, op);
  const auto l = v->to_int_list();
  return l.empty() ? fallback : l[l.size() == 1 ? 0 : i];
}

int64_t wrap(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }

}  // namespace

SubgraphBuilder::SubgraphBuilder(runtime::Method& method, xnn_subgraph_t subgraph, Mode mode,
                                 std::vector<std::unique_ptr<float[]>>* statics)
    : m_(method), s_(subgraph), mode_(mode), statics_(*statics) {
  for (size_t i = 0; i < m_.num_values(); ++i) {
    if (m_.value_memory(i) == runtime::Method::Memory::Constant) constants_.insert(&m_.value(i));
  }
  for (size_t k = 0; k < m_.num_outputs(); ++k) outputs_.insert(&m_.get_output(k));
}

Error SubgraphBuilder::define_externals() {
  const size_t inputs = m_.num_inputs(), outputs = m_.num_outputs();
  for (size_t k = 0; k < inputs + outputs; ++k) {
    EValue* v = const_cast<EValue*>(k < inputs ? &m_.input(k) : &m_.get_output(k - inputs));
    XNN_CHECK(is_float_tensor(v), "%s: the payload's %s %zu is not a float32 or float16 tensor", kXnnpackBackendName,
              k < inputs ? "input" : "output", k < inputs ? k : k - inputs);
    external_[v] = static_cast<uint32_t>(k);
    if (k >= inputs) continue;
    const auto dims = dims_of(v->to_tensor());
    ET_TRY_ASSIGN(const uint32_t id, define(dims, nullptr, static_cast<uint32_t>(k), XNN_VALUE_FLAG_EXTERNAL_INPUT,
                                            is_half(v) ? xnn_datatype_fp16 : xnn_datatype_fp32));
    if (!is_half(v)) {
      held_[v].torch = id;
      continue;
    }
    ET_TRY_ASSIGN(held_[v].torch, define(dims));
    ET_TRY(convert(id, held_[v].torch));
  }
  return Error::Ok;
}

Result<uint32_t> SubgraphBuilder::define(const std::vector<size_t>& dims, const void* data, uint32_t external,
                                         uint32_t flags, xnn_datatype type) {
  uint32_t id = XNN_INVALID_VALUE_ID;
  ET_TRY(status(xnn_define_tensor_value(s_, type, dims.size(), dims.data(), data, external, flags, &id),
                "xnn_define_tensor_value"));
  return id;
}

const float* SubgraphBuilder::floats(const EValue* v) {
  const Tensor& t = v->to_tensor();
  if (!is_half(v)) return static_cast<const float*>(t.const_data_ptr());
  auto& converted = widened_[v];
  if (converted == nullptr) {
    const auto* h = static_cast<const uint16_t*>(t.const_data_ptr());
    statics_.emplace_back(new float[static_cast<size_t>(t.numel())]);
    for (size_t k = 0; k < static_cast<size_t>(t.numel()); ++k) statics_.back()[k] = runtime::half_to_float(h[k]);
    converted = statics_.back().get();
  }
  return converted;
}

Error SubgraphBuilder::convert(uint32_t from, uint32_t to) {
  return status(xnn_define_unary(s_, xnn_unary_convert, nullptr, from, to, 0), "convert");
}

Error SubgraphBuilder::finish() {
  for (const auto& [from, to] : half_outputs_) ET_TRY(convert(from, to));
  half_outputs_.clear();
  return Error::Ok;
}

Result<uint32_t> SubgraphBuilder::constant(std::vector<float> data, const std::vector<size_t>& dims) {
  statics_.emplace_back(new float[data.size()]);
  std::copy(data.begin(), data.end(), statics_.back().get());
  return define(dims, statics_.back().get());
}

Result<uint32_t> SubgraphBuilder::scalar(float value) { return constant({value}, {1}); }

Error SubgraphBuilder::need_float(const EValue* v, const char* op) {
  XNN_CHECK(v != nullptr && v->is_tensor(), "%s %s: an operand is not a tensor", kXnnpackBackendName, op);
  XNN_CHECK(is_floating(v->to_tensor().scalar_type()), "%s %s: %s tensors are not run (float32 and float16 only)",
            kXnnpackBackendName, op, runtime::to_string(v->to_tensor().scalar_type()));
  return Error::Ok;
}

bool SubgraphBuilder::held_nhwc(const EValue* v) const {
  const auto it = held_.find(v);
  return it != held_.end() && it->second.nhwc != XNN_INVALID_VALUE_ID;
}

Result<uint32_t> SubgraphBuilder::torch(EValue* v, const char* op) {
  ET_TRY(need_float(v, op));
  Held& h = held_[v];
  if (h.torch != XNN_INVALID_VALUE_ID) return h.torch;
  const Tensor& t = v->to_tensor();
  if (h.nhwc != XNN_INVALID_VALUE_ID) {
    ET_TRY_ASSIGN(const uint32_t id, define(dims_of(t)));
    ET_TRY(status(xnn_define_static_transpose(s_, 4, kToNchw, h.nhwc, id, 0), "xnn_define_static_transpose"));
    return h.torch = id;
  }
  if (is_constant(v)) {
    ET_TRY_ASSIGN(h.torch, define(dims_of(t), floats(v)));
    return h.torch;
  }
  // A value no earlier node wrote: only where the partitioner asks about single instructions.
  XNN_CHECK(mode_ == Mode::Explain, "%s %s: reads a value no earlier instruction of the payload writes",
            kXnnpackBackendName, op);
  ET_TRY_ASSIGN(h.torch, define(dims_of(t)));
  return h.torch;
}

Result<uint32_t> SubgraphBuilder::nhwc(EValue* v, const char* op) {
  ET_TRY(need_float(v, op));
  const Tensor& t = v->to_tensor();
  XNN_CHECK(t.dim() == 4, "%s %s: expected a 4-D tensor", kXnnpackBackendName, op);
  if (held_nhwc(v)) return held_[v].nhwc;
  if (is_constant(v)) {  // repacked here, once
    const auto d = nhwc_dims(t);
    const float* src = floats(v);
    std::vector<float> data(static_cast<size_t>(t.numel()));
    size_t k = 0;
    for (size_t n = 0; n < d[0]; ++n)
      for (size_t y = 0; y < d[1]; ++y)
        for (size_t x = 0; x < d[2]; ++x)
          for (size_t c = 0; c < d[3]; ++c) data[k++] = src[((n * d[3] + c) * d[1] + y) * d[2] + x];
    ET_TRY_ASSIGN(held_[v].nhwc, constant(std::move(data), d));
    return held_[v].nhwc;
  }
  ET_TRY_ASSIGN(const uint32_t from, torch(v, op));
  ET_TRY_ASSIGN(const uint32_t id, define(nhwc_dims(t)));
  ET_TRY(status(xnn_define_static_transpose(s_, 4, kToNhwc, from, id, 0), "xnn_define_static_transpose"));
  return held_[v].nhwc = id;
}

Result<uint32_t> SubgraphBuilder::output(EValue* v, bool channels_last, const char* op) {
  ET_TRY(need_float(v, op));
  const Tensor& t = v->to_tensor();
  Held& h = held_[v];
  const auto ext = external_.find(v);
  if (ext != external_.end()) {
    if (is_half(v)) {  // written in float32, converted into the external value by finish()
      ET_TRY_ASSIGN(const uint32_t half,
                    define(dims_of(t), nullptr, ext->second, XNN_VALUE_FLAG_EXTERNAL_OUTPUT, xnn_datatype_fp16));
      ET_TRY_ASSIGN(h.torch, define(dims_of(t)));
      half_outputs_.emplace_back(h.torch, half);
    } else {
      ET_TRY_ASSIGN(h.torch, define(dims_of(t), nullptr, ext->second, XNN_VALUE_FLAG_EXTERNAL_OUTPUT));
    }
    if (!channels_last) return h.torch;
    // Written channels-last, then transposed into the external value (written(), after the node).
    ET_TRY_ASSIGN(h.nhwc, define(nhwc_dims(t)));
    transpose_pending_.insert(v);
    return h.nhwc;
  }
  ET_TRY_ASSIGN(const uint32_t id, define(channels_last ? nhwc_dims(t) : dims_of(t)));
  (channels_last ? h.nhwc : h.torch) = id;
  return id;
}

Result<uint32_t> SubgraphBuilder::in_layout(EValue* v, bool channels_last, const char* op) {
  return channels_last ? nhwc(v, op) : torch(v, op);
}

Error SubgraphBuilder::written(const EValue* v) {
  if (transpose_pending_.erase(v) == 0) return Error::Ok;
  const Held& h = held_[v];
  return status(xnn_define_static_transpose(s_, 4, kToNchw, h.nhwc, h.torch, 0), "xnn_define_static_transpose");
}

Error SubgraphBuilder::alias(EValue* v, uint32_t id, bool channels_last, const char* op) {
  ET_TRY(need_float(v, op));
  if (external_.count(v)) {
    ET_TRY_ASSIGN(const uint32_t out, output(v, false, op));
    if (channels_last) return status(xnn_define_static_transpose(s_, 4, kToNchw, id, out, 0), "transpose");
    return status(xnn_define_copy(s_, id, out, 0), "xnn_define_copy");
  }
  Held& h = held_[v];
  (channels_last ? h.nhwc : h.torch) = id;
  return Error::Ok;
}

bool SubgraphBuilder::used_elsewhere(const EValue* v, size_t except) const {
  if (outputs_.count(v)) return true;
  for (size_t j = 0; j < m_.num_instructions(); ++j) {
    if (j == except) continue;
    for (EValue* a : m_.instruction_args(j)) {
      if (a == v) return true;
      if (a != nullptr && a->is_tensor_list()) {
        for (EValue* t : a->to_tensor_list())
          if (t == v) return true;
      }
    }
  }
  return false;
}

Error SubgraphBuilder::node(size_t i) {
  const char* name = m_.instruction_operator(i);
  XNN_CHECK(name != nullptr, "%s: instruction %zu is not a kernel call", kXnnpackBackendName, i);
  const std::string op(name);
  Span<EValue*> a = m_.instruction_args(i);
  for (EValue* v : a) XNN_CHECK(v != nullptr, "%s %s: a missing argument", kXnnpackBackendName, name);
  const size_t n = a.size();
  const bool two = n == 3 && a[1]->is_tensor();  // (x, y, out)
  if ((op == "aten::add.Tensor" || op == "aten::sub.Tensor") && n == 4 && a[1]->is_tensor()) {
    XNN_CHECK(is_number(a[2]) && a[2]->scalar_as_double() == 1, "%s %s: only alpha = 1", kXnnpackBackendName, name);
    return binary(op == "aten::add.Tensor" ? xnn_binary_add : xnn_binary_subtract, a[0], a[1], a[3], name);
  }
  if (op == "aten::mul.Tensor" && two) return binary(xnn_binary_multiply, a[0], a[1], a[2], name);
  if (op == "aten::div.Tensor" && two) return binary(xnn_binary_divide, a[0], a[1], a[2], name);
  // A number as the second operand (x * 0.5, x + 1.0): a static scalar.
  if ((op == "aten::add.Tensor" || op == "aten::sub.Tensor") && n == 4 && is_number(a[1])) {
    XNN_CHECK(is_number(a[2]), "%s %s: arguments", kXnnpackBackendName, name);
    const double c = a[1]->scalar_as_double() * a[2]->scalar_as_double();
    return binary_scalar(xnn_binary_add, a[0], static_cast<float>(op == "aten::add.Tensor" ? c : -c), a[3], name);
  }
  if ((op == "aten::mul.Tensor" || op == "aten::div.Tensor") && n == 3 && is_number(a[1])) {
    const double c = a[1]->scalar_as_double();
    return binary_scalar(op == "aten::mul.Tensor" ? xnn_binary_multiply : xnn_binary_divide, a[0],
                         static_cast<float>(c), a[2], name);
  }
  if (op == "aten::maximum" && two) return binary(xnn_binary_maximum, a[0], a[1], a[2], name);
  if (op == "aten::minimum" && two) return binary(xnn_binary_minimum, a[0], a[1], a[2], name);
  if ((op == "aten::add.Scalar" && n == 4) || (op == "aten::mul.Scalar" && n == 3)) {
    XNN_CHECK(is_number(a[1]) && (n == 3 || is_number(a[2])), "%s %s: arguments", kXnnpackBackendName, name);
    const double c = a[1]->scalar_as_double() * (n == 4 ? a[2]->scalar_as_double() : 1.0);
    return binary_scalar(n == 4 ? xnn_binary_add : xnn_binary_multiply, a[0], static_cast<float>(c), a[n - 1], name);
  }
  if (op == "aten::addmm" && n == 6) return linear(a, true, name);
  if (op == "aten::mm" && n == 3) return is_constant(a[1]) ? linear(a, false, name) : matmul(a, name);
  if (op == "aten::bmm" && n == 3) return matmul(a, name);
  if (op == "executorch::int8_linear" && n == 5) return int8_linear(a, name);
  if (op == "aten::convolution" && n == 10) return convolution(a, name);
  if (op == "aten::max_pool2d_with_indices" && n == 8) return pool(a, true, i, name);
  if (op == "aten::avg_pool2d" && n == 8) return pool(a, false, i, name);
  if ((op == "aten::mean.dim" && n == 5) || (op == "aten::_adaptive_avg_pool2d" && n == 3)) return mean(a, name);
  if (op == "aten::sum.dim_IntList" && n == 5) return reduce(a, xnn_reduce_sum, name);
  if ((op == "aten::sum" || op == "aten::mean") && n == 3) {
    return reduce(a, op == "aten::sum" ? xnn_reduce_sum : xnn_reduce_mean, name);
  }
  if ((op == "aten::view" || op == "aten::_unsafe_view" || op == "aten::unsqueeze" || op == "aten::squeeze.dims" ||
       op == "aten::squeeze.dim" || op == "aten::clone") &&
      n >= 2) {
    return reshape(a[0], a[n - 1], name);
  }
  if (op == "aten::alias" && n == 2) return reshape(a[0], a[1], name);
  // Between float32 and float16: the same float32 value inside the subgraph, in the layouts it is
  // held in (a float16 program converts around every operator; a channels-last value stays so).
  if (op == "aten::_to_copy" && n == 8) {
    for (size_t k = 2; k < 7; ++k) {
      XNN_CHECK(a[k]->is_none() || (a[k]->is_bool() && !a[k]->to_bool()), "%s %s: only a dtype conversion",
                kXnnpackBackendName, name);
    }
    ET_TRY(need_float(a[0], name));
    ET_TRY(need_float(a[7], name));
    if (held_nhwc(a[0]) && !external_.count(a[7]) && runtime::same_shape(a[0]->to_tensor(), a[7]->to_tensor())) {
      const Held h = held_[a[0]];
      held_[a[7]] = h;
      return Error::Ok;
    }
    return reshape(a[0], a[7], name);
  }
  if (op == "aten::permute" && n == 3) return permute(a, name);
  if (op == "aten::select.int" && n == 4) return slice(a, true, name);
  if (op == "aten::slice.Tensor" && n == 6) return slice(a, false, name);
  if (op == "aten::cat" && n == 3) return cat(a, name);
  if (op == "aten::expand" && n == 4) return expand(a, name);
  if (op == "aten::constant_pad_nd" && n == 4) return pad(a, name);
  if (op == "aten::upsample_bilinear2d.vec" && n == 5) return upsample(a, name);
  if (op == "aten::_softmax" && n == 4) return softmax(a, name);
  if (op == "aten::native_layer_norm" && n == 8) return layer_norm(a, i, name);
  if (op == "aten::scaled_dot_product_attention" && n == 9) return attention(a, name);
  if (op == "aten::split_with_sizes" && n >= 4) return split(a, i, name);
  if (op == "executorch::rms_norm" && n == 4) return rms_norm(a, name);
  if (op == "executorch::rope" && n == 4) return rope(a, name);
  if (op == "executorch::lstm_cell" && n == 5) return lstm_cell(a, name);
  if (op == "executorch::gru_cell" && n == 4) return gru_cell(a, name);
  return unary(op, a);
}

Error SubgraphBuilder::unary(const std::string& op, Span<EValue*> a) {
  const char* name = op.c_str();
  const size_t n = a.size();
  xnn_unary_params p{};
  xnn_unary_operator kind = xnn_unary_invalid;
  // Operators of two or three nodes: x * sigmoid(x), clamp(x / 6 + 1/2, 0, 1), x * x^2.
  enum class Composite { None, Silu, HardSigmoid, Cube } composite = Composite::None;
  const EValue* bad = nullptr;
  if (op == "aten::relu" && n == 2) {
    kind = xnn_unary_clamp, p.clamp.min = 0.f, p.clamp.max = INFINITY;
  } else if ((op == "aten::hardtanh" || op == "aten::clamp") && n == 4) {
    for (size_t k : {1, 2}) {
      if (!a[k]->is_none() && !is_number(a[k])) bad = a[k];
    }
    kind = xnn_unary_clamp;
    p.clamp.min = a[1]->is_none() ? -INFINITY : static_cast<float>(a[1]->scalar_as_double());
    p.clamp.max = a[2]->is_none() ? INFINITY : static_cast<float>(a[2]->scalar_as_double());
  } else if (op == "aten::gelu" && (n == 2 || n == 3)) {
    if (n == 3 && !(a[1]->tag() == EValue::Tag::String && a[1]->to_string().size() == 4 &&
                    std::memcmp(a[1]->to_string().data(), "none", 4) == 0)) {
      bad = a[1];  // the tanh approximation: no such node
    }
    kind = xnn_unary_gelu;
  } else if (op == "aten::leaky_relu" && n == 3) {
    if (!is_number(a[1])) bad = a[1];
    kind = xnn_unary_leaky_relu, p.leaky_relu.negative_slope = static_cast<float>(a[1]->scalar_as_double());
  } else if (n == 2) {
    static const std::pair<const char*, xnn_unary_operator> kPlain[] = {
        {"aten::sigmoid", xnn_unary_sigmoid},
        {"aten::tanh", xnn_unary_tanh},
        {"aten::exp", xnn_unary_exp},
        {"aten::log", xnn_unary_log},
        {"aten::sqrt", xnn_unary_square_root},
        {"aten::rsqrt", xnn_unary_reciprocal_square_root},
        {"aten::neg", xnn_unary_negate},
        {"aten::abs", xnn_unary_abs},
        {"aten::hardswish", xnn_unary_hardswish},
        {"aten::floor", xnn_unary_floor},
        {"aten::ceil", xnn_unary_ceiling},
    };
    for (const auto& [k, v] : kPlain) {
      if (op == k) kind = v;
    }
    if (op == "aten::silu") composite = Composite::Silu;
    if (op == "aten::hardsigmoid") composite = Composite::HardSigmoid;
  } else if (op == "aten::pow.Tensor_Scalar" && n == 3 && is_number(a[1])) {
    const double e = a[1]->scalar_as_double();
    if (e == 2.0) kind = xnn_unary_square;
    if (e == 0.5) kind = xnn_unary_square_root;
    if (e == 3.0) composite = Composite::Cube;  // GPT-2's tanh GELU
  }
  XNN_CHECK((kind != xnn_unary_invalid || composite != Composite::None) && bad == nullptr, "%s does not run %s%s",
            kXnnpackBackendName, name, bad ? " with these arguments" : "");
  ET_TRY(need_float(a[0], name));
  const bool cl = held_nhwc(a[0]);
  ET_TRY_ASSIGN(const uint32_t x, in_layout(a[0], cl, name));
  ET_TRY_ASSIGN(const uint32_t y, output(a[n - 1], cl, name));
  if (composite == Composite::None) {
    ET_TRY(status(xnn_define_unary(s_, kind, &p, x, y, 0), "xnn_define_unary"));
    return written(a[n - 1]);
  }
  const Tensor& t = a[0]->to_tensor();
  ET_TRY_ASSIGN(const uint32_t mid, define(cl ? nhwc_dims(t) : dims_of(t)));
  if (composite == Composite::HardSigmoid) {
    ET_TRY_ASSIGN(const uint32_t sixth, scalar(1.f / 6.f));
    ET_TRY_ASSIGN(const uint32_t half, scalar(0.5f));
    ET_TRY(status(xnn_define_binary(s_, xnn_binary_multiply, nullptr, x, sixth, mid, 0), "multiply"));
    const xnn_binary_params clamp{0.f, 1.f};
    ET_TRY(status(xnn_define_binary(s_, xnn_binary_add, &clamp, mid, half, y, 0), "add"));
  } else {  // x * sigmoid(x), x * x^2
    const xnn_unary_operator first = composite == Composite::Silu ? xnn_unary_sigmoid : xnn_unary_square;
    ET_TRY(status(xnn_define_unary(s_, first, nullptr, x, mid, 0), "xnn_define_unary"));
    ET_TRY(status(xnn_define_binary(s_, xnn_binary_multiply, nullptr, x, mid, y, 0), "multiply"));
  }
  return written(a[n - 1]);
}

Error SubgraphBuilder::binary(xnn_binary_operator kind, EValue* x, EValue* y, EValue* out, const char* op) {
  ET_TRY(need_float(x, op));
  ET_TRY(need_float(y, op));
  ET_TRY(need_float(out, op));
  // Channels-last where an operand is held so and both are 4-D or single elements.
  auto fits = [](const EValue* v) { return v->to_tensor().dim() == 4 || v->to_tensor().numel() == 1; };
  const bool cl = out->to_tensor().dim() == 4 && (held_nhwc(x) || held_nhwc(y)) && fits(x) && fits(y);
  auto operand = [&](EValue* v) { return in_layout(v, cl && v->to_tensor().dim() == 4, op); };
  ET_TRY_ASSIGN(const uint32_t i1, operand(x));
  ET_TRY_ASSIGN(const uint32_t i2, operand(y));
  ET_TRY_ASSIGN(const uint32_t o, output(out, cl, op));
  ET_TRY(status(xnn_define_binary(s_, kind, nullptr, i1, i2, o, 0), "xnn_define_binary"));
  return written(out);
}

Error SubgraphBuilder::binary_scalar(xnn_binary_operator kind, EValue* x, float y, EValue* out, const char* op) {
  ET_TRY(need_float(x, op));
  const bool cl = held_nhwc(x);
  ET_TRY_ASSIGN(const uint32_t i1, in_layout(x, cl, op));
  ET_TRY_ASSIGN(const uint32_t i2, scalar(y));
  ET_TRY_ASSIGN(const uint32_t o, output(out, cl, op));
  ET_TRY(status(xnn_define_binary(s_, kind, nullptr, i1, i2, o, 0), "xnn_define_binary"));
  return written(out);
}

// addmm(bias, x, w, beta, alpha, out) / mm(x, w, out) with a constant weight [in, out] (the
// transposed linear weight the exporter folds): a fully connected node.
Error SubgraphBuilder::linear(Span<EValue*> a, bool bias, const char* op) {
  if (bias) {
    XNN_CHECK(is_number(a[3]) && a[3]->scalar_as_double() == 1 && is_number(a[4]) && a[4]->scalar_as_double() == 1,
              "%s %s: only beta = alpha = 1", kXnnpackBackendName, op);
  }
  EValue* w = a[bias ? 2 : 1];
  ET_TRY(need_float(w, op));
  XNN_CHECK(is_constant(w) && w->to_tensor().dim() == 2, "%s %s: the weight must be a 2-D constant",
            kXnnpackBackendName, op);
  ET_TRY_ASSIGN(const uint32_t x, torch(a[bias ? 1 : 0], op));
  ET_TRY_ASSIGN(const uint32_t filter, torch(w, op));
  uint32_t b = XNN_INVALID_VALUE_ID;
  if (bias) {
    ET_TRY(need_float(a[0], op));
    const Tensor& bt = a[0]->to_tensor();
    XNN_CHECK(is_constant(a[0]) && bt.numel() == w->to_tensor().size(1),
              "%s %s: the bias must be a constant per output feature", kXnnpackBackendName, op);
    ET_TRY_ASSIGN(b, define({static_cast<size_t>(bt.numel())}, floats(a[0])));
  }
  ET_TRY_ASSIGN(const uint32_t y, output(a[a.size() - 1], false, op));
  return status(xnn_define_fully_connected(s_, -INFINITY, INFINITY, x, filter, b, y, XNN_FLAG_TRANSPOSE_WEIGHTS),
                "xnn_define_fully_connected");
}

// int8_linear(x, weight, scale, bias, out): a fully connected node on the int8 weight [n, k] with its
// per-output-feature scales (XNNPACK's channelwise int8), the activations quantized per row as it
// runs (XNNPACK's quantization is asymmetric where the CPU kernel's is symmetric: the two agree
// within the activations' int8 rounding). int8_weight_linear (float activations) stays with the CPU
// kernels: this XNNPACK's float32-by-int8 product gave wrong results in our tests.
Error SubgraphBuilder::int8_linear(Span<EValue*> a, const char* op) {
  ET_TRY(need_float(a[0], op));
  ET_TRY(need_float(a[4], op));
  const EValue* w = a[1];
  XNN_CHECK(w->is_tensor() && w->to_tensor().scalar_type() == runtime::ScalarType::Char && w->to_tensor().dim() == 2 &&
                is_constant(w),
            "%s %s: the weight must be a constant 2-D int8 tensor", kXnnpackBackendName, op);
  const size_t n = static_cast<size_t>(w->to_tensor().size(0)), k = static_cast<size_t>(w->to_tensor().size(1));
  XNN_CHECK(a[2]->is_tensor() && a[2]->to_tensor().scalar_type() == runtime::ScalarType::Float && is_constant(a[2]) &&
                static_cast<size_t>(a[2]->to_tensor().numel()) == n,
            "%s %s: one constant float32 scale per output feature", kXnnpackBackendName, op);
  XNN_CHECK(a[3]->is_none() ||
                (is_float_tensor(a[3]) && is_constant(a[3]) && static_cast<size_t>(a[3]->to_tensor().numel()) == n),
            "%s %s: the bias must be a constant per output feature", kXnnpackBackendName, op);
  const Tensor& x = a[0]->to_tensor();
  XNN_CHECK(x.dim() >= 1 && static_cast<size_t>(x.size(x.dim() - 1)) == k, "%s %s: input features differ",
            kXnnpackBackendName, op);
  ET_TRY_ASSIGN(const uint32_t in, torch(a[0], op));
  const auto dims = dims_of(x);
  uint32_t q = XNN_INVALID_VALUE_ID;
  ET_TRY(status(xnn_define_dynamically_quantized_tensor_value(s_, xnn_datatype_qdint8, dims.size(), 1, dims.data(),
                                                              XNN_INVALID_VALUE_ID, 0, &q),
                "xnn_define_dynamically_quantized_tensor_value"));
  ET_TRY(convert(in, q));
  uint32_t filter = XNN_INVALID_VALUE_ID;
  const size_t wd[2] = {n, k};
  ET_TRY(status(
      xnn_define_channelwise_quantized_tensor_value(s_, xnn_datatype_qcint8, floats(a[2]), 2, 0, wd,
                                                    w->to_tensor().const_data_ptr(), XNN_INVALID_VALUE_ID, 0, &filter),
      "xnn_define_channelwise_quantized_tensor_value"));
  uint32_t bias = XNN_INVALID_VALUE_ID;
  if (a[3]->is_tensor()) {
    ET_TRY_ASSIGN(bias, define({n}, floats(a[3])));
  }
  ET_TRY_ASSIGN(const uint32_t y, output(a[4], false, op));
  return status(xnn_define_fully_connected(s_, -INFINITY, INFINITY, q, filter, bias, y, 0),
                "xnn_define_fully_connected");
}

// bmm(x, y, out), or mm of two computed matrices: XNNPACK's batch matrix multiply (3-D or more).
Error SubgraphBuilder::matmul(Span<EValue*> a, const char* op) {
  ET_TRY(need_float(a[0], op));
  ET_TRY(need_float(a[1], op));
  XNN_CHECK(a[0]->to_tensor().dim() >= 3 && a[1]->to_tensor().dim() == a[0]->to_tensor().dim(),
            "%s %s: only batched products of 3-D or larger operands", kXnnpackBackendName, op);
  ET_TRY_ASSIGN(const uint32_t x, torch(a[0], op));
  ET_TRY_ASSIGN(const uint32_t y, torch(a[1], op));
  ET_TRY_ASSIGN(const uint32_t o, output(a[2], false, op));
  return status(xnn_define_batch_matrix_multiply(s_, x, y, o, 0), "xnn_define_batch_matrix_multiply");
}

// convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups, out),
// 2-D (channels-last) or 1-D (as 2-D of height 1), with constant weights (repacked from OIHW to
// XNNPACK's OHWI once).
Error SubgraphBuilder::convolution(Span<EValue*> a, const char* op) {
  for (size_t k : {0, 1, 9}) ET_TRY(need_float(a[k], op));
  const Tensor &x = a[0]->to_tensor(), &w = a[1]->to_tensor(), &o = a[9]->to_tensor();
  const bool one_d = x.dim() == 3;
  XNN_CHECK((x.dim() == 4 || one_d) && w.dim() == x.dim() && o.dim() == x.dim(), "%s %s: only 1-D and 2-D convolutions",
            kXnnpackBackendName, op);
  XNN_CHECK(a[6]->is_bool() && !a[6]->to_bool() && a[8]->is_int(), "%s %s: only non-transposed convolutions",
            kXnnpackBackendName, op);
  XNN_CHECK(is_constant(a[1]) && (a[2]->is_none() || (is_float_tensor(a[2]) && is_constant(a[2]))),
            "%s %s: the weight and bias must be constants", kXnnpackBackendName, op);
  const int64_t groups = a[8]->to_int();
  XNN_CHECK(groups > 0 && x.size(1) % groups == 0 && w.size(0) % groups == 0 && w.size(1) == x.size(1) / groups &&
                w.size(0) == o.size(1),
            "%s %s: channels and groups disagree", kXnnpackBackendName, op);
  int64_t v[6] = {1, 1, 0, 0, 1, 1};  // stride, padding, dilation (height, width)
  for (size_t d = one_d ? 1 : 0; d < 2; ++d) {
    const size_t at = one_d ? 0 : d;
    ET_TRY_ASSIGN(v[d], pair_at(a[3], at, 1, op));
    ET_TRY_ASSIGN(v[2 + d], pair_at(a[4], at, 0, op));
    ET_TRY_ASSIGN(v[4 + d], pair_at(a[5], at, 1, op));
  }
  for (int k = 0; k < 6; ++k) {
    XNN_CHECK(v[k] >= (k == 2 || k == 3 ? 0 : 1) && v[k] <= 65535, "%s %s: stride, padding or dilation out of range",
              kXnnpackBackendName, op);
  }
  const size_t O = static_cast<size_t>(w.size(0)), I = static_cast<size_t>(w.size(1)),
               KH = one_d ? 1 : static_cast<size_t>(w.size(2)), KW = static_cast<size_t>(w.size(one_d ? 2 : 3));
  // 1-D: [N, C, L] is NHWC [N, 1, L, C] after a transpose and a reshape, and back after.
  const size_t N = static_cast<size_t>(x.size(0)), C = static_cast<size_t>(x.size(1));
  uint32_t in;
  if (one_d) {
    const size_t L = static_cast<size_t>(x.size(2));
    ET_TRY_ASSIGN(const uint32_t src, torch(a[0], op));
    ET_TRY_ASSIGN(const uint32_t nlc, define({N, L, C}));
    const size_t swap[3] = {0, 2, 1}, shape[4] = {N, 1, L, C};
    ET_TRY(status(xnn_define_static_transpose(s_, 3, swap, src, nlc, 0), "xnn_define_static_transpose"));
    ET_TRY_ASSIGN(in, define({N, 1, L, C}));
    ET_TRY(status(xnn_define_static_reshape(s_, 4, shape, nlc, in, 0), "xnn_define_static_reshape"));
  } else {
    ET_TRY_ASSIGN(in, nhwc(a[0], op));
  }
  // OIHW -> OHWI
  std::vector<float> packed(O * I * KH * KW);
  const float* src = floats(a[1]);
  for (size_t oc = 0; oc < O; ++oc)
    for (size_t ic = 0; ic < I; ++ic)
      for (size_t y = 0; y < KH; ++y)
        for (size_t xx = 0; xx < KW; ++xx)
          packed[((oc * KH + y) * KW + xx) * I + ic] = src[((oc * I + ic) * KH + y) * KW + xx];
  ET_TRY_ASSIGN(const uint32_t filter, constant(std::move(packed), {O, KH, KW, I}));
  uint32_t bias = XNN_INVALID_VALUE_ID;
  if (a[2]->is_tensor()) {
    XNN_CHECK(a[2]->to_tensor().numel() == static_cast<int64_t>(O), "%s %s: one bias per output channel",
              kXnnpackBackendName, op);
    ET_TRY_ASSIGN(bias, define({O}, floats(a[2])));
  }
  uint32_t out;
  const size_t Lo = one_d ? static_cast<size_t>(o.size(2)) : 0;
  if (one_d) {
    ET_TRY_ASSIGN(out, define({N, 1, Lo, O}));
  } else {
    ET_TRY_ASSIGN(out, output(a[9], true, op));
  }
  const uint32_t ph = static_cast<uint32_t>(v[2]), pw = static_cast<uint32_t>(v[3]);
  ET_TRY(status(
      xnn_define_convolution_2d(s_, ph, pw, ph, pw, static_cast<uint32_t>(KH), static_cast<uint32_t>(KW),
                                static_cast<uint32_t>(v[0]), static_cast<uint32_t>(v[1]), static_cast<uint32_t>(v[4]),
                                static_cast<uint32_t>(v[5]), static_cast<uint32_t>(groups), I,
                                O / static_cast<size_t>(groups), -INFINITY, INFINITY, in, filter, bias, out, 0),
      "xnn_define_convolution_2d"));
  if (!one_d) return written(a[9]);
  ET_TRY_ASSIGN(const uint32_t nlo, define({N, Lo, O}));
  const size_t shape[3] = {N, Lo, O}, swap[3] = {0, 2, 1};
  ET_TRY(status(xnn_define_static_reshape(s_, 3, shape, out, nlo, 0), "xnn_define_static_reshape"));
  ET_TRY_ASSIGN(const uint32_t y, output(a[9], false, op));
  return status(xnn_define_static_transpose(s_, 3, swap, nlo, y, 0), "xnn_define_static_transpose");
}

// max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode, out, indices), its
// indices unread; avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad,
// divisor_override, out) without padding counted. Channels-last.
Error SubgraphBuilder::pool(Span<EValue*> a, bool is_max, size_t i, const char* op) {
  EValue* out = a[is_max ? 6 : 7];
  ET_TRY(need_float(a[0], op));
  ET_TRY(need_float(out, op));
  const Tensor &x = a[0]->to_tensor(), &o = out->to_tensor();
  XNN_CHECK(x.dim() == 4 && o.dim() == 4, "%s %s: only 4-D tensors", kXnnpackBackendName, op);
  if (is_max) {
    XNN_CHECK(!used_elsewhere(a[7], i), "%s %s: its indices are read", kXnnpackBackendName, op);
  } else {
    XNN_CHECK(a[4]->is_bool() && !a[4]->to_bool() && a[6]->is_none(),
              "%s %s: only without ceil_mode and divisor_override", kXnnpackBackendName, op);
  }
  int64_t k[2], s[2], p[2], d[2] = {1, 1};
  for (size_t j = 0; j < 2; ++j) {
    ET_TRY_ASSIGN(k[j], pair_at(a[1], j, 1, op));
    ET_TRY_ASSIGN(s[j], pair_at(a[2], j, k[j], op));
    ET_TRY_ASSIGN(p[j], pair_at(a[3], j, 0, op));
    if (is_max) {
      ET_TRY_ASSIGN(d[j], pair_at(a[4], j, 1, op));
    }
    XNN_CHECK(k[j] >= 1 && s[j] >= 1 && p[j] >= 0 && d[j] >= 1 && k[j] <= 255 && s[j] <= 255 && p[j] <= 255,
              "%s %s: window, stride or padding out of range", kXnnpackBackendName, op);
  }
  if (!is_max) {
    XNN_CHECK((p[0] == 0 && p[1] == 0) || (a[5]->is_bool() && !a[5]->to_bool()),
              "%s %s: padding counted in the average", kXnnpackBackendName, op);
  }
  // ceil_mode's extra output row or column: padding at the bottom or right that no window reads
  // more of than torch's does (max pooling ignores padding).
  int64_t extra[2] = {0, 0};
  for (size_t j = 0; j < 2; ++j) {
    const int64_t in = x.size(2 + j), want = o.size(2 + j);
    const int64_t span = d[j] * (k[j] - 1) + 1;
    const int64_t floor_out = (in + 2 * p[j] - span) / s[j] + 1;
    extra[j] = std::max<int64_t>(0, (want - 1) * s[j] + span - (in + 2 * p[j]));
    XNN_CHECK(want == floor_out || (is_max && want == floor_out + 1), "%s %s: output size disagrees",
              kXnnpackBackendName, op);
  }
  ET_TRY_ASSIGN(const uint32_t in, nhwc(a[0], op));
  ET_TRY_ASSIGN(const uint32_t y, output(out, true, op));
  const auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  if (is_max) {
    ET_TRY(status(xnn_define_max_pooling_2d(s_, u(p[0]), u(p[1] + extra[1]), u(p[0] + extra[0]), u(p[1]), u(k[0]),
                                            u(k[1]), u(s[0]), u(s[1]), u(d[0]), u(d[1]), -INFINITY, INFINITY, in, y, 0),
                  "xnn_define_max_pooling_2d"));
  } else {
    ET_TRY(status(xnn_define_average_pooling_2d(s_, u(p[0]), u(p[1]), u(p[0]), u(p[1]), u(k[0]), u(k[1]), u(s[0]),
                                                u(s[1]), -INFINITY, INFINITY, in, y, 0),
                  "xnn_define_average_pooling_2d"));
  }
  return written(out);
}

// mean.dim(x, dims, keepdim, dtype, out), or _adaptive_avg_pool2d(x, [1, 1], out): a mean node,
// channels-last where the input is held so and the result's order allows it.
Error SubgraphBuilder::mean(Span<EValue*> a, const char* op) {
  const bool adaptive = a.size() == 3;
  EValue* out = a[a.size() - 1];
  ET_TRY(need_float(a[0], op));
  ET_TRY(need_float(out, op));
  const Tensor& x = a[0]->to_tensor();
  const int64_t rank = x.dim();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  bool keep = true;
  if (adaptive) {
    XNN_CHECK(rank == 4 && out->to_tensor().size(2) == 1 && out->to_tensor().size(3) == 1, "%s %s: only to 1x1",
              kXnnpackBackendName, op);
    reduced[2] = reduced[3] = true;
  } else {
    XNN_CHECK(a[1]->is_int_list() && a[2]->is_bool() && a[3]->is_none(), "%s %s: arguments", kXnnpackBackendName, op);
    keep = a[2]->to_bool();
    for (int64_t d : a[1]->to_int_list()) {
      XNN_CHECK(d >= -rank && d < rank, "%s %s: dimension out of range", kXnnpackBackendName, op);
      reduced[static_cast<size_t>(wrap(d, rank))] = true;
    }
    XNN_CHECK(!a[1]->to_int_list().empty(), "%s %s: a mean over every element", kXnnpackBackendName, op);
  }
  // Channels-last keeps the result's order where the dimensions left are in the same order.
  const bool cl = rank == 4 && held_nhwc(a[0]) && (keep || reduced[1] || (reduced[2] && reduced[3]));
  std::vector<size_t> axes;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[static_cast<size_t>(d)]) axes.push_back(cl ? kNhwcAxis[d] : static_cast<size_t>(d));
  }
  std::sort(axes.begin(), axes.end());
  ET_TRY_ASSIGN(const uint32_t in, in_layout(a[0], cl, op));
  const bool out_cl = cl && keep;
  ET_TRY_ASSIGN(const uint32_t y, output(out, out_cl, op));
  ET_TRY(status(
      xnn_define_static_reduce(s_, xnn_reduce_mean, axes.size(), axes.data(), in, y, keep ? XNN_FLAG_KEEP_DIMS : 0),
      "xnn_define_static_reduce"));
  return written(out);
}

// sum.dim_IntList(x, dims, keepdim, dtype, out), or sum / mean(x, dtype, out) over every element,
// in torch's layout.
Error SubgraphBuilder::reduce(Span<EValue*> a, xnn_reduce_operator kind, const char* op) {
  const bool all = a.size() == 3;
  EValue* out = a[a.size() - 1];
  ET_TRY(need_float(a[0], op));
  XNN_CHECK(a[a.size() - 2]->is_none(), "%s %s: a dtype argument", kXnnpackBackendName, op);
  const int64_t rank = a[0]->to_tensor().dim();
  std::vector<size_t> axes;
  bool keep = false;
  if (all || a[1]->is_none() || (a[1]->is_int_list() && a[1]->to_int_list().empty())) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(static_cast<size_t>(d));
    keep = !all && a[2]->is_bool() && a[2]->to_bool();
  } else {
    XNN_CHECK(a[1]->is_int_list() && a[2]->is_bool(), "%s %s: arguments", kXnnpackBackendName, op);
    keep = a[2]->to_bool();
    for (int64_t d : a[1]->to_int_list()) {
      XNN_CHECK(d >= -rank && d < rank, "%s %s: dimension out of range", kXnnpackBackendName, op);
      axes.push_back(static_cast<size_t>(wrap(d, rank)));
    }
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  }
  XNN_CHECK(rank > 0, "%s %s: a 0-d input", kXnnpackBackendName, op);
  ET_TRY_ASSIGN(const uint32_t in, torch(a[0], op));
  ET_TRY_ASSIGN(const uint32_t y, output(out, false, op));
  return status(xnn_define_static_reduce(s_, kind, axes.size(), axes.data(), in, y, keep ? XNN_FLAG_KEEP_DIMS : 0),
                "xnn_define_static_reduce");
}

// view, unsqueeze, squeeze, clone, alias: the same elements in torch's order, reshaped.
Error SubgraphBuilder::reshape(EValue* x, EValue* out, const char* op) {
  ET_TRY(need_float(x, op));
  ET_TRY(need_float(out, op));
  const Tensor &t = x->to_tensor(), &o = out->to_tensor();
  XNN_CHECK(t.numel() == o.numel(), "%s %s: element counts differ", kXnnpackBackendName, op);
  uint32_t in;
  // [N, C, 1, 1] held channels-last has torch's bytes already (a pooled feature map).
  if (t.dim() == 4 && t.size(2) == 1 && t.size(3) == 1 && held_nhwc(x) && held_[x].torch == XNN_INVALID_VALUE_ID) {
    in = held_[x].nhwc;
  } else {
    ET_TRY_ASSIGN(in, torch(x, op));
  }
  if (runtime::same_shape(t, o) && in == held_[x].torch && !external_.count(out)) return alias(out, in, false, op);
  ET_TRY_ASSIGN(const uint32_t y, output(out, false, op));
  const auto dims = dims_of(o);
  return status(xnn_define_static_reshape(s_, dims.size(), dims.data(), in, y, 0), "xnn_define_static_reshape");
}

// permute(x, dims, out): a transpose, or none where it converts between torch's layout and
// channels-last (ConvNeXt's blocks).
Error SubgraphBuilder::permute(Span<EValue*> a, const char* op) {
  ET_TRY(need_float(a[0], op));
  ET_TRY(need_float(a[2], op));
  const Tensor& t = a[0]->to_tensor();
  XNN_CHECK(a[1]->is_int_list() && static_cast<int64_t>(a[1]->to_int_list().size()) == t.dim(), "%s %s: arguments",
            kXnnpackBackendName, op);
  std::vector<size_t> perm;
  for (int64_t d : a[1]->to_int_list()) {
    XNN_CHECK(d >= -t.dim() && d < t.dim(), "%s %s: dimension out of range", kXnnpackBackendName, op);
    perm.push_back(static_cast<size_t>(wrap(d, t.dim())));
  }
  if (t.dim() == 4 && perm == std::vector<size_t>{0, 2, 3, 1} && held_nhwc(a[0])) {
    return alias(a[2], held_[a[0]].nhwc, false, op);
  }
  if (t.dim() == 4 && perm == std::vector<size_t>{0, 3, 1, 2} && !external_.count(a[2])) {
    ET_TRY_ASSIGN(const uint32_t in, torch(a[0], op));
    return alias(a[2], in, true, op);
  }
  ET_TRY_ASSIGN(const uint32_t in, torch(a[0], op));
  ET_TRY_ASSIGN(const uint32_t y, output(a[2], false, op));
  return status(xnn_define_static_transpose(s_, perm.size(), perm.data(), in, y, 0), "xnn_define_static_transpose");
}

// select.int(x, dim, index, out) / slice.Tensor(x, dim, start, end, step, out) with step 1.
Error SubgraphBuilder::slice(Span<EValue*> a, bool select, const char* op) {
  EValue* out = a[a.size() - 1];
  ET_TRY(need_float(a[0], op));
  ET_TRY(need_float(out, op));
  const Tensor &t = a[0]->to_tensor(), &o = out->to_tensor();
  XNN_CHECK(a[1]->is_int() && t.dim() > 0, "%s %s: arguments", kXnnpackBackendName, op);
  const int64_t dim = wrap(a[1]->to_int(), t.dim());
  XNN_CHECK(dim >= 0 && dim < t.dim(), "%s %s: dimension out of range", kXnnpackBackendName, op);
  const int64_t size = t.size(static_cast<int>(dim));
  int64_t first = 0;
  if (select) {
    XNN_CHECK(a[2]->is_int(), "%s %s: arguments", kXnnpackBackendName, op);
    first = wrap(a[2]->to_int(), size);
    XNN_CHECK(first >= 0 && first < size, "%s %s: index out of range", kXnnpackBackendName, op);
  } else {
    XNN_CHECK((a[2]->is_none() || a[2]->is_int()) && a[4]->is_int() && a[4]->to_int() == 1, "%s %s: only unit steps",
              kXnnpackBackendName, op);
    first = a[2]->is_none() ? 0 : std::min(std::max(wrap(a[2]->to_int(), size), int64_t{0}), size);
  }
  std::vector<size_t> offsets(static_cast<size_t>(t.dim()), 0), sizes = dims_of(t);
  offsets[static_cast<size_t>(dim)] = static_cast<size_t>(first);
  sizes[static_cast<size_t>(dim)] = select ? 1 : static_cast<size_t>(o.size(static_cast<int>(dim)));
  XNN_CHECK(first + static_cast<int64_t>(sizes[static_cast<size_t>(dim)]) <= size, "%s %s: slice out of range",
            kXnnpackBackendName, op);
  ET_TRY_ASSIGN(const uint32_t in, torch(a[0], op));
  if (!select) {
    ET_TRY_ASSIGN(const uint32_t y, output(out, false, op));
    return status(xnn_define_static_slice(s_, offsets.size(), offsets.data(), sizes.data(), in, y, 0),
                  "xnn_define_static_slice");
  }
  ET_TRY_ASSIGN(const uint32_t mid, define(sizes));
  ET_TRY(status(xnn_define_static_slice(s_, offsets.size(), offsets.data(), sizes.data(), in, mid, 0),
                "xnn_define_static_slice"));
  ET_TRY_ASSIGN(const uint32_t y, output(out, false, op));
  const auto dims = dims_of(o);
  return status(xnn_define_static_reshape(s_, dims.size(), dims.data(), mid, y, 0), "xnn_define_static_reshape");
}

// cat(tensors, dim, out): concatenate nodes of up to five pieces, chained for more.
Error SubgraphBuilder::cat(Span<EValue*> a, const char* op) {
  XNN_CHECK(a[0]->is_tensor_list() && a[1]->is_int(), "%s %s: arguments", kXnnpackBackendName, op);
  ET_TRY(need_float(a[2], op));
  const Tensor& o = a[2]->to_tensor();
  const int64_t rank = o.dim();
  const int64_t dim = wrap(a[1]->to_int(), rank);
  XNN_CHECK(rank > 0 && dim >= 0 && dim < rank, "%s %s: dimension out of range", kXnnpackBackendName, op);
  std::vector<EValue*> pieces;
  bool any_cl = false;
  for (EValue* p : a[0]->to_tensor_list()) {
    ET_TRY(need_float(p, op));
    XNN_CHECK(p->to_tensor().dim() == rank, "%s %s: pieces of another rank", kXnnpackBackendName, op);
    if (p->to_tensor().numel() == 0) continue;
    pieces.push_back(p);
    any_cl = any_cl || held_nhwc(p);
  }
  XNN_CHECK(!pieces.empty(), "%s %s: nothing to join", kXnnpackBackendName, op);
  const bool cl = rank == 4 && any_cl;
  const int32_t axis = static_cast<int32_t>(cl ? kNhwcAxis[dim] : static_cast<size_t>(dim));
  std::vector<uint32_t> ids;
  for (EValue* p : pieces) {
    ET_TRY_ASSIGN(const uint32_t id, in_layout(p, cl, op));
    ids.push_back(id);
  }
  if (ids.size() == 1) return alias(a[2], ids[0], cl, op);
  std::vector<size_t> extents;
  for (EValue* p : pieces) extents.push_back(static_cast<size_t>(p->to_tensor().size(static_cast<int>(dim))));
  ET_TRY_ASSIGN(const uint32_t y, output(a[2], cl, op));
  ET_TRY(join(ids, extents, static_cast<size_t>(axis), cl ? nhwc_dims(o) : dims_of(o), y));
  return written(a[2]);
}

// Values `ids` (extents along `axis`) joined into `out` (dims `dims`): concatenate nodes of up to
// five inputs, the first up to five, then that with the next up to four, ...
Error SubgraphBuilder::join(const std::vector<uint32_t>& ids, const std::vector<size_t>& extents, size_t axis,
                            const std::vector<size_t>& dims, uint32_t out) {
  size_t joined = 0, k = 0;
  uint32_t acc = XNN_INVALID_VALUE_ID;
  while (k < ids.size()) {
    std::vector<uint32_t> group;
    if (acc != XNN_INVALID_VALUE_ID) group.push_back(acc);
    while (group.size() < 5 && k < ids.size()) {
      joined += extents[k];
      group.push_back(ids[k++]);
    }
    uint32_t y = out;
    if (k < ids.size()) {
      std::vector<size_t> partial = dims;
      partial[axis] = joined;
      ET_TRY_ASSIGN(y, define(partial));
    }
    const int32_t at = static_cast<int32_t>(axis);
    xnn_status st = xnn_status_invalid_parameter;
    switch (group.size()) {
      case 2: st = xnn_define_concatenate2(s_, at, group[0], group[1], y, 0); break;
      case 3: st = xnn_define_concatenate3(s_, at, group[0], group[1], group[2], y, 0); break;
      case 4: st = xnn_define_concatenate4(s_, at, group[0], group[1], group[2], group[3], y, 0); break;
      case 5: st = xnn_define_concatenate5(s_, at, group[0], group[1], group[2], group[3], group[4], y, 0); break;
      default: break;
    }
    ET_TRY(status(st, "xnn_define_concatenate"));
    acc = y;
  }
  return Error::Ok;
}

// expand(x, sizes, implicit, out) of size-1 dimensions by up to kMaxExpand copies: x joined with
// itself along each (Llama's key/value heads repeated for grouped-query attention).
Error SubgraphBuilder::expand(Span<EValue*> a, const char* op) {
  constexpr int64_t kMaxExpand = 64;
  ET_TRY(need_float(a[0], op));
  ET_TRY(need_float(a[3], op));
  const Tensor &x = a[0]->to_tensor(), &o = a[3]->to_tensor();
  XNN_CHECK(x.dim() == o.dim() && x.dim() > 0, "%s %s: only to the same rank", kXnnpackBackendName, op);
  ET_TRY_ASSIGN(uint32_t cur, torch(a[0], op));
  std::vector<size_t> dims = dims_of(x);
  std::vector<size_t> grown;
  for (int d = 0; d < x.dim(); ++d) {
    if (x.size(d) == o.size(d)) continue;
    XNN_CHECK(x.size(d) == 1 && o.size(d) <= kMaxExpand, "%s %s: only size-1 dimensions, up to %lld times",
              kXnnpackBackendName, op, static_cast<long long>(kMaxExpand));
    grown.push_back(static_cast<size_t>(d));
  }
  if (grown.empty()) return alias(a[3], cur, false, op);
  for (size_t j = 0; j < grown.size(); ++j) {
    const size_t d = grown[j];
    const size_t copies = static_cast<size_t>(o.size(static_cast<int>(d)));
    dims[d] = copies;
    uint32_t y;
    if (j + 1 == grown.size()) {
      ET_TRY_ASSIGN(y, output(a[3], false, op));
    } else {
      ET_TRY_ASSIGN(y, define(dims));
    }
    ET_TRY(join(std::vector<uint32_t>(copies, cur), std::vector<size_t>(copies, 1), d, dims, y));
    cur = y;
  }
  return Error::Ok;
}

// constant_pad_nd(x, pad, value, out), pads not negative: in whichever layout x is held.
Error SubgraphBuilder::pad(Span<EValue*> a, const char* op) {
  ET_TRY(need_float(a[0], op));
  const Tensor& t = a[0]->to_tensor();
  const int64_t rank = t.dim();
  XNN_CHECK(a[1]->is_int_list() && a[1]->to_int_list().size() % 2 == 0 &&
                static_cast<int64_t>(a[1]->to_int_list().size()) <= 2 * rank && is_number(a[2]),
            "%s %s: arguments", kXnnpackBackendName, op);
  std::vector<size_t> pre(static_cast<size_t>(rank), 0), post(static_cast<size_t>(rank), 0);
  const auto p = a[1]->to_int_list();
  const bool cl = rank == 4 && held_nhwc(a[0]);
  for (size_t j = 0; j < p.size() / 2; ++j) {
    XNN_CHECK(p[2 * j] >= 0 && p[2 * j + 1] >= 0, "%s %s: negative padding", kXnnpackBackendName, op);
    const size_t d = static_cast<size_t>(rank - 1) - j;
    const size_t at = cl ? kNhwcAxis[d] : d;
    pre[at] = static_cast<size_t>(p[2 * j]), post[at] = static_cast<size_t>(p[2 * j + 1]);
  }
  ET_TRY_ASSIGN(const uint32_t in, in_layout(a[0], cl, op));
  ET_TRY_ASSIGN(const uint32_t y, output(a[3], cl, op));
  ET_TRY(status(xnn_define_static_constant_pad(s_, pre.data(), post.data(),
                                               static_cast<float>(a[2]->scalar_as_double()), in, y, 0),
                "xnn_define_static_constant_pad"));
  return written(a[3]);
}

// upsample_bilinear2d.vec(x, output_size, align_corners, scale_factors, out): channels-last,
// where the scale factors (if given) are exactly the sizes' ratio.
Error SubgraphBuilder::upsample(Span<EValue*> a, const char* op) {
  ET_TRY(need_float(a[0], op));
  ET_TRY(need_float(a[4], op));
  const Tensor &x = a[0]->to_tensor(), &o = a[4]->to_tensor();
  XNN_CHECK(x.dim() == 4 && o.dim() == 4 && a[2]->is_bool(), "%s %s: arguments", kXnnpackBackendName, op);
  if (!a[3]->is_none()) {
    XNN_CHECK(a[3]->tag() == EValue::Tag::DoubleList && a[3]->to_double_list().size() == 2, "%s %s: scale factors",
              kXnnpackBackendName, op);
    for (size_t d = 0; d < 2; ++d) {
      XNN_CHECK(static_cast<double>(x.size(2 + static_cast<int>(d))) * a[3]->to_double_list()[d] ==
                    static_cast<double>(o.size(2 + static_cast<int>(d))),
                "%s %s: scale factors that are not the sizes' ratio", kXnnpackBackendName, op);
    }
  }
  ET_TRY_ASSIGN(const uint32_t in, nhwc(a[0], op));
  ET_TRY_ASSIGN(const uint32_t y, output(a[4], true, op));
  ET_TRY(status(xnn_define_static_resize_bilinear_2d(s_, static_cast<size_t>(o.size(2)), static_cast<size_t>(o.size(3)),
                                                     in, y, a[2]->to_bool() ? XNN_FLAG_ALIGN_CORNERS : 0),
                "xnn_define_static_resize_bilinear_2d"));
  return written(a[4]);
}

// _softmax(x, dim, half_to_float, out) over the last dimension.
Error SubgraphBuilder::softmax(Span<EValue*> a, const char* op) {
  ET_TRY(need_float(a[0], op));
  const int64_t rank = a[0]->to_tensor().dim();
  XNN_CHECK(rank > 0 && a[1]->is_int() && wrap(a[1]->to_int(), rank) == rank - 1, "%s %s: only over the last dimension",
            kXnnpackBackendName, op);
  ET_TRY_ASSIGN(const uint32_t in, torch(a[0], op));
  ET_TRY_ASSIGN(const uint32_t y, output(a[3], false, op));
  return status(xnn_define_softmax(s_, in, y, 0), "xnn_define_softmax");
}

// native_layer_norm(x, shape, weight, bias, eps, out, mean, rstd), its mean and rstd unread:
// (x - mean) * rsqrt(mean((x - mean)^2) + eps) * weight + bias over the trailing dimensions.
Error SubgraphBuilder::layer_norm(Span<EValue*> a, size_t i, const char* op) {
  ET_TRY(need_float(a[0], op));
  const Tensor& x = a[0]->to_tensor();
  XNN_CHECK(a[1]->is_int_list() && is_number(a[4]), "%s %s: arguments", kXnnpackBackendName, op);
  const auto shape = a[1]->to_int_list();
  const int64_t rank = x.dim(), k = static_cast<int64_t>(shape.size());
  XNN_CHECK(k >= 1 && k <= rank, "%s %s: normalized shape", kXnnpackBackendName, op);
  for (int64_t j = 0; j < k; ++j) {
    XNN_CHECK(shape[static_cast<size_t>(j)] == x.size(static_cast<int>(rank - k + j)),
              "%s %s: normalized shape differs from the input's", kXnnpackBackendName, op);
  }
  XNN_CHECK(!used_elsewhere(a[6], i) && !used_elsewhere(a[7], i), "%s %s: its mean or rstd is read",
            kXnnpackBackendName, op);
  for (size_t j : {2, 3}) {
    XNN_CHECK(a[j]->is_none() || (is_float_tensor(a[j]) && is_constant(a[j])),
              "%s %s: weight and bias must be constants", kXnnpackBackendName, op);
  }
  const auto dims = dims_of(x);
  std::vector<size_t> kept = dims, axes;
  for (int64_t j = rank - k; j < rank; ++j) kept[static_cast<size_t>(j)] = 1, axes.push_back(static_cast<size_t>(j));
  ET_TRY_ASSIGN(const uint32_t in, torch(a[0], op));
  ET_TRY_ASSIGN(const uint32_t mu, define(kept));
  ET_TRY_ASSIGN(const uint32_t centered, define(dims));
  ET_TRY_ASSIGN(const uint32_t squared, define(dims));
  ET_TRY_ASSIGN(const uint32_t var, define(kept));
  ET_TRY_ASSIGN(const uint32_t rs, define(kept));
  ET_TRY_ASSIGN(const uint32_t eps, scalar(static_cast<float>(a[4]->scalar_as_double())));
  ET_TRY(status(xnn_define_static_reduce(s_, xnn_reduce_mean, axes.size(), axes.data(), in, mu, XNN_FLAG_KEEP_DIMS),
                "mean"));
  ET_TRY(status(xnn_define_binary(s_, xnn_binary_subtract, nullptr, in, mu, centered, 0), "subtract"));
  ET_TRY(status(xnn_define_unary(s_, xnn_unary_square, nullptr, centered, squared, 0), "square"));
  ET_TRY(
      status(xnn_define_static_reduce(s_, xnn_reduce_mean, axes.size(), axes.data(), squared, var, XNN_FLAG_KEEP_DIMS),
             "mean"));
  ET_TRY_ASSIGN(const uint32_t var_eps, define(kept));
  ET_TRY(status(xnn_define_binary(s_, xnn_binary_add, nullptr, var, eps, var_eps, 0), "add"));
  ET_TRY(status(xnn_define_unary(s_, xnn_unary_reciprocal_square_root, nullptr, var_eps, rs, 0), "rsqrt"));
  // The affine part, each step into the output where it is the last.
  std::vector<std::pair<xnn_binary_operator, EValue*>> steps = {{xnn_binary_multiply, nullptr}};
  if (a[2]->is_tensor()) steps.push_back({xnn_binary_multiply, a[2]});
  if (a[3]->is_tensor()) steps.push_back({xnn_binary_add, a[3]});
  uint32_t cur = centered;
  for (size_t j = 0; j < steps.size(); ++j) {
    uint32_t other = rs;
    if (steps[j].second) {
      const Tensor& p = steps[j].second->to_tensor();
      std::vector<size_t> pd(shape.begin(), shape.end());
      int64_t count = 1;
      for (int64_t e : shape) count *= e;
      XNN_CHECK(p.numel() == count, "%s %s: weight or bias not of the normalized shape", kXnnpackBackendName, op);
      ET_TRY_ASSIGN(other, define(pd, floats(steps[j].second)));
    }
    uint32_t y;
    if (j + 1 == steps.size()) {
      ET_TRY_ASSIGN(y, output(a[5], false, op));
    } else {
      ET_TRY_ASSIGN(y, define(dims));
    }
    ET_TRY(status(xnn_define_binary(s_, steps[j].first, nullptr, cur, other, y, 0), "xnn_define_binary"));
    cur = y;
  }
  return Error::Ok;
}

// scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa, out),
// 3-D or 4-D, as many key/value heads as query heads, no mask or an additive float one:
// softmax(q k^T * scale + mask) v in three nodes and a scale.
Error SubgraphBuilder::attention(Span<EValue*> a, const char* op) {
  for (size_t j : {0, 1, 2, 8}) ET_TRY(need_float(a[j], op));
  XNN_CHECK(is_number(a[4]) && a[4]->scalar_as_double() == 0 && a[5]->is_bool() && (a[6]->is_none() || is_number(a[6])),
            "%s %s: arguments", kXnnpackBackendName, op);
  const Tensor &q = a[0]->to_tensor(), &k = a[1]->to_tensor(), &v = a[2]->to_tensor();
  const int r = q.dim();
  XNN_CHECK((r == 3 || r == 4) && k.dim() == r && v.dim() == r, "%s %s: 3-D or 4-D operands", kXnnpackBackendName, op);
  for (int d = 0; d < r - 2; ++d) {
    XNN_CHECK(k.size(d) == q.size(d) && v.size(d) == q.size(d), "%s %s: as many key/value heads as query heads",
              kXnnpackBackendName, op);
  }
  const size_t T = static_cast<size_t>(q.size(r - 2)), U = static_cast<size_t>(k.size(r - 2));
  XNN_CHECK(k.size(r - 1) == q.size(r - 1) && v.size(r - 2) == k.size(r - 2), "%s %s: shapes disagree",
            kXnnpackBackendName, op);
  const bool causal = a[5]->to_bool();
  XNN_CHECK(a[3]->is_none() || (!causal && is_float_tensor(a[3])), "%s %s: only no mask or a float mask",
            kXnnpackBackendName, op);
  const float scale = a[6]->is_none() ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(q.size(r - 1))))
                                      : static_cast<float>(a[6]->scalar_as_double());
  std::vector<size_t> sd = dims_of(q);
  sd[static_cast<size_t>(r - 1)] = U;
  ET_TRY_ASSIGN(const uint32_t qi, torch(a[0], op));
  ET_TRY_ASSIGN(const uint32_t ki, torch(a[1], op));
  ET_TRY_ASSIGN(const uint32_t vi, torch(a[2], op));
  ET_TRY_ASSIGN(const uint32_t scores, define(sd));
  ET_TRY(status(xnn_define_batch_matrix_multiply(s_, qi, ki, scores, XNN_FLAG_TRANSPOSE_B), "batch matrix multiply"));
  ET_TRY_ASSIGN(const uint32_t c, scalar(scale));
  ET_TRY_ASSIGN(const uint32_t scaled, define(sd));
  ET_TRY(status(xnn_define_binary(s_, xnn_binary_multiply, nullptr, scores, c, scaled, 0), "multiply"));
  uint32_t logits = scaled;
  if (causal || a[3]->is_tensor()) {
    uint32_t mask;
    if (causal) {  // -inf above the diagonal, as torch aligns it (top left)
      std::vector<float> m(T * U, 0.f);
      for (size_t t = 0; t < T; ++t)
        for (size_t u = t + 1; u < U; ++u) m[t * U + u] = -INFINITY;
      ET_TRY_ASSIGN(mask, constant(std::move(m), {T, U}));
    } else {
      ET_TRY_ASSIGN(mask, torch(a[3], op));
    }
    ET_TRY_ASSIGN(logits, define(sd));
    ET_TRY(status(xnn_define_binary(s_, xnn_binary_add, nullptr, scaled, mask, logits, 0), "add"));
  }
  ET_TRY_ASSIGN(const uint32_t p, define(sd));
  ET_TRY(status(xnn_define_softmax(s_, logits, p, 0), "softmax"));
  ET_TRY_ASSIGN(const uint32_t y, output(a[8], false, op));
  return status(xnn_define_batch_matrix_multiply(s_, p, vi, y, 0), "batch matrix multiply");
}

// split_with_sizes(x, sizes, dim, out...): a slice per piece that is read.
Error SubgraphBuilder::split(Span<EValue*> a, size_t i, const char* op) {
  ET_TRY(need_float(a[0], op));
  const Tensor& x = a[0]->to_tensor();
  XNN_CHECK(a[1]->is_int_list() && a[2]->is_int() && a.size() == 3 + a[1]->to_int_list().size() && x.dim() > 0,
            "%s %s: arguments", kXnnpackBackendName, op);
  const int64_t dim = wrap(a[2]->to_int(), x.dim());
  XNN_CHECK(dim >= 0 && dim < x.dim(), "%s %s: dimension out of range", kXnnpackBackendName, op);
  const auto sizes = a[1]->to_int_list();
  int64_t at = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    EValue* piece = a[3 + k];
    ET_TRY(need_float(piece, op));
    XNN_CHECK(sizes[k] >= 0 && at + sizes[k] <= x.size(static_cast<int>(dim)) && piece->to_tensor().dim() == x.dim() &&
                  piece->to_tensor().size(static_cast<int>(dim)) == sizes[k],
              "%s %s: piece %zu does not fit the input", kXnnpackBackendName, op, k);
    if (used_elsewhere(piece, i) || external_.count(piece)) {
      std::vector<size_t> offsets(static_cast<size_t>(x.dim()), 0);
      offsets[static_cast<size_t>(dim)] = static_cast<size_t>(at);
      const auto dims = dims_of(piece->to_tensor());
      ET_TRY_ASSIGN(const uint32_t in, torch(a[0], op));
      ET_TRY_ASSIGN(const uint32_t y, output(piece, false, op));
      ET_TRY(status(xnn_define_static_slice(s_, dims.size(), offsets.data(), dims.data(), in, y, 0),
                    "xnn_define_static_slice"));
    }
    at += sizes[k];
  }
  XNN_CHECK(at == x.size(static_cast<int>(dim)), "%s %s: pieces do not cover the input", kXnnpackBackendName, op);
  return Error::Ok;
}

// executorch::rms_norm(x, weight, eps, out): x * rsqrt(mean(x^2, last) + eps) * weight.
Error SubgraphBuilder::rms_norm(Span<EValue*> a, const char* op) {
  ET_TRY(need_float(a[0], op));
  ET_TRY(need_float(a[1], op));
  const Tensor& x = a[0]->to_tensor();
  XNN_CHECK(x.dim() >= 1 && is_number(a[2]) && a[1]->to_tensor().dim() == 1 &&
                a[1]->to_tensor().size(0) == x.size(x.dim() - 1),
            "%s %s: arguments", kXnnpackBackendName, op);
  const auto dims = dims_of(x);
  std::vector<size_t> kept = dims;
  kept.back() = 1;
  const size_t axis = dims.size() - 1;
  ET_TRY_ASSIGN(const uint32_t in, torch(a[0], op));
  ET_TRY_ASSIGN(const uint32_t w, torch(a[1], op));
  ET_TRY_ASSIGN(const uint32_t eps, scalar(static_cast<float>(a[2]->scalar_as_double())));
  ET_TRY_ASSIGN(const uint32_t squared, define(dims));
  ET_TRY_ASSIGN(const uint32_t ms, define(kept));
  ET_TRY_ASSIGN(const uint32_t ms_eps, define(kept));
  ET_TRY_ASSIGN(const uint32_t rs, define(kept));
  ET_TRY_ASSIGN(const uint32_t normed, define(dims));
  ET_TRY_ASSIGN(const uint32_t y, output(a[3], false, op));
  ET_TRY(status(xnn_define_unary(s_, xnn_unary_square, nullptr, in, squared, 0), "square"));
  ET_TRY(status(xnn_define_static_reduce(s_, xnn_reduce_mean, 1, &axis, squared, ms, XNN_FLAG_KEEP_DIMS), "mean"));
  ET_TRY(status(xnn_define_binary(s_, xnn_binary_add, nullptr, ms, eps, ms_eps, 0), "add"));
  ET_TRY(status(xnn_define_unary(s_, xnn_unary_reciprocal_square_root, nullptr, ms_eps, rs, 0), "rsqrt"));
  ET_TRY(status(xnn_define_binary(s_, xnn_binary_multiply, nullptr, in, rs, normed, 0), "multiply"));
  return status(xnn_define_binary(s_, xnn_binary_multiply, nullptr, normed, w, y, 0), "multiply");
}

// executorch::rope(x, cos, sin, out): x * cos + cat(-x[..., D/2:], x[..., :D/2]) * sin.
Error SubgraphBuilder::rope(Span<EValue*> a, const char* op) {
  for (size_t k = 0; k < 4; ++k) ET_TRY(need_float(a[k], op));
  const Tensor& x = a[0]->to_tensor();
  XNN_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) % 2 == 0, "%s %s: the input needs an even last size",
            kXnnpackBackendName, op);
  const auto dims = dims_of(x);
  const size_t last = dims.size() - 1, half = dims[last] / 2;
  std::vector<size_t> halves = dims, lo(dims.size(), 0), hi(dims.size(), 0);
  halves[last] = half, hi[last] = half;
  ET_TRY_ASSIGN(const uint32_t in, torch(a[0], op));
  ET_TRY_ASSIGN(const uint32_t cos, torch(a[1], op));
  ET_TRY_ASSIGN(const uint32_t sin, torch(a[2], op));
  uint32_t first, second, negated, rotated, a_cos, r_sin;
  ET_TRY_ASSIGN(first, define(halves));
  ET_TRY_ASSIGN(second, define(halves));
  ET_TRY_ASSIGN(negated, define(halves));
  ET_TRY_ASSIGN(rotated, define(dims));
  ET_TRY_ASSIGN(a_cos, define(dims));
  ET_TRY_ASSIGN(r_sin, define(dims));
  ET_TRY_ASSIGN(const uint32_t y, output(a[3], false, op));
  ET_TRY(status(xnn_define_static_slice(s_, dims.size(), lo.data(), halves.data(), in, first, 0), "slice"));
  ET_TRY(status(xnn_define_static_slice(s_, dims.size(), hi.data(), halves.data(), in, second, 0), "slice"));
  ET_TRY(status(xnn_define_unary(s_, xnn_unary_negate, nullptr, second, negated, 0), "negate"));
  ET_TRY(status(xnn_define_concatenate2(s_, static_cast<int32_t>(last), negated, first, rotated, 0), "concatenate"));
  ET_TRY(status(xnn_define_binary(s_, xnn_binary_multiply, nullptr, in, cos, a_cos, 0), "multiply"));
  ET_TRY(status(xnn_define_binary(s_, xnn_binary_multiply, nullptr, rotated, sin, r_sin, 0), "multiply"));
  return status(xnn_define_binary(s_, xnn_binary_add, nullptr, a_cos, r_sin, y, 0), "add");
}

// Columns [first, first + count) of a [B, N] value: a static slice into a new value.
Result<uint32_t> SubgraphBuilder::columns(uint32_t x, size_t rows, size_t first, size_t count) {
  ET_TRY_ASSIGN(const uint32_t y, define({rows, count}));
  const size_t offsets[2] = {0, first}, sizes[2] = {rows, count};
  ET_TRY(status(xnn_define_static_slice(s_, 2, offsets, sizes, x, y, 0), "xnn_define_static_slice"));
  return y;
}

// A new [rows, cols] value: `kind` of x (unary) or of x and y (binary, y valid).
Result<uint32_t> SubgraphBuilder::apply(int kind, bool is_binary, uint32_t x, uint32_t y, size_t rows, size_t cols,
                                        uint32_t out) {
  uint32_t z = out;
  if (z == XNN_INVALID_VALUE_ID) {
    ET_TRY_ASSIGN(z, define({rows, cols}));
  }
  if (is_binary) {
    ET_TRY(status(xnn_define_binary(s_, static_cast<xnn_binary_operator>(kind), nullptr, x, y, z, 0), "binary"));
  } else {
    ET_TRY(status(xnn_define_unary(s_, static_cast<xnn_unary_operator>(kind), nullptr, x, z, 0), "unary"));
  }
  return z;
}

// The gates' and the state's shapes of a recurrent cell: input_gates and hidden_gates [B, k*H],
// state [B, H]; returns B and H.
Result<std::pair<size_t, size_t>> SubgraphBuilder::cell_shape(Span<EValue*> a, int gates, const char* op) {
  for (size_t k = 0; k < a.size(); ++k) ET_TRY(need_float(a[k], op));
  const Tensor &ig = a[0]->to_tensor(), &hg = a[1]->to_tensor(), &state = a[2]->to_tensor();
  XNN_CHECK(ig.dim() == 2 && runtime::same_shape(ig, hg) && state.dim() == 2 && state.size(0) == ig.size(0) &&
                ig.size(1) == gates * state.size(1),
            "%s %s: gates [B, %d*H] and a state [B, H] expected", kXnnpackBackendName, op, gates);
  return std::make_pair(static_cast<size_t>(state.size(0)), static_cast<size_t>(state.size(1)));
}

// executorch::lstm_cell(input_gates, hidden_gates, cell, h_out, c_out): gates i, f, g, o;
// c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c').
Error SubgraphBuilder::lstm_cell(Span<EValue*> a, const char* op) {
  ET_TRY_ASSIGN(const auto shape, cell_shape(a, 4, op));
  const auto [B, H] = shape;
  ET_TRY_ASSIGN(const uint32_t ig, torch(a[0], op));
  ET_TRY_ASSIGN(const uint32_t hg, torch(a[1], op));
  ET_TRY_ASSIGN(const uint32_t c, torch(a[2], op));
  ET_TRY_ASSIGN(const uint32_t h_out, output(a[3], false, op));
  ET_TRY_ASSIGN(const uint32_t c_out, output(a[4], false, op));
  ET_TRY_ASSIGN(const uint32_t sum, apply(xnn_binary_add, true, ig, hg, B, 4 * H));
  ET_TRY_ASSIGN(const uint32_t sig, apply(xnn_unary_sigmoid, false, sum, 0, B, 4 * H));
  ET_TRY_ASSIGN(const uint32_t i, columns(sig, B, 0, H));
  ET_TRY_ASSIGN(const uint32_t f, columns(sig, B, H, H));
  ET_TRY_ASSIGN(const uint32_t g_pre, columns(sum, B, 2 * H, H));
  ET_TRY_ASSIGN(const uint32_t o, columns(sig, B, 3 * H, H));
  ET_TRY_ASSIGN(const uint32_t g, apply(xnn_unary_tanh, false, g_pre, 0, B, H));
  ET_TRY_ASSIGN(const uint32_t fc, apply(xnn_binary_multiply, true, f, c, B, H));
  ET_TRY_ASSIGN(const uint32_t ig2, apply(xnn_binary_multiply, true, i, g, B, H));
  ET_TRY_ASSIGN(const uint32_t c2, apply(xnn_binary_add, true, fc, ig2, B, H, c_out));
  ET_TRY_ASSIGN(const uint32_t tc, apply(xnn_unary_tanh, false, c2, 0, B, H));
  ET_TRY(apply(xnn_binary_multiply, true, o, tc, B, H, h_out).error());
  return Error::Ok;
}

// executorch::gru_cell(input_gates, hidden_gates, hidden, out): gates r, z, n;
// r, z = sigmoid(x_rz + h_rz), n = tanh(x_n + r h_n), h' = n + z (h - n).
Error SubgraphBuilder::gru_cell(Span<EValue*> a, const char* op) {
  ET_TRY_ASSIGN(const auto shape, cell_shape(a, 3, op));
  const auto [B, H] = shape;
  ET_TRY_ASSIGN(const uint32_t ig, torch(a[0], op));
  ET_TRY_ASSIGN(const uint32_t hg, torch(a[1], op));
  ET_TRY_ASSIGN(const uint32_t h, torch(a[2], op));
  ET_TRY_ASSIGN(const uint32_t out, output(a[3], false, op));
  ET_TRY_ASSIGN(const uint32_t x_rz, columns(ig, B, 0, 2 * H));
  ET_TRY_ASSIGN(const uint32_t h_rz, columns(hg, B, 0, 2 * H));
  ET_TRY_ASSIGN(const uint32_t rz_pre, apply(xnn_binary_add, true, x_rz, h_rz, B, 2 * H));
  ET_TRY_ASSIGN(const uint32_t rz, apply(xnn_unary_sigmoid, false, rz_pre, 0, B, 2 * H));
  ET_TRY_ASSIGN(const uint32_t r, columns(rz, B, 0, H));
  ET_TRY_ASSIGN(const uint32_t z, columns(rz, B, H, H));
  ET_TRY_ASSIGN(const uint32_t x_n, columns(ig, B, 2 * H, H));
  ET_TRY_ASSIGN(const uint32_t h_n, columns(hg, B, 2 * H, H));
  ET_TRY_ASSIGN(const uint32_t rh, apply(xnn_binary_multiply, true, r, h_n, B, H));
  ET_TRY_ASSIGN(const uint32_t n_pre, apply(xnn_binary_add, true, x_n, rh, B, H));
  ET_TRY_ASSIGN(const uint32_t nn, apply(xnn_unary_tanh, false, n_pre, 0, B, H));
  ET_TRY_ASSIGN(const uint32_t diff, apply(xnn_binary_subtract, true, h, nn, B, H));
  ET_TRY_ASSIGN(const uint32_t zd, apply(xnn_binary_multiply, true, z, diff, B, H));
  ET_TRY(apply(xnn_binary_add, true, nn, zd, B, H, out).error());
  return Error::Ok;
}

Result<std::vector<std::string>> explain_instructions(Span<const uint8_t> program) {
  ET_CHECK_OR_RETURN(xnn_initialize(nullptr) == xnn_status_success, Error::NotSupported,
                     "%s: XNNPACK does not initialize on this CPU", kXnnpackBackendName);
  ET_TRY_ASSIGN(auto loader, runtime::OwnedBufferDataLoader::copy_of(program.data(), program.size()));
  ET_TRY_ASSIGN(auto loaded, runtime::Program::load(std::move(loader)));
  ET_TRY_ASSIGN(auto method, loaded->load_method(loaded->method_name(0)));
  xnn_subgraph_t s = nullptr;
  ET_CHECK_OR_RETURN(xnn_create_subgraph(0, 0, &s) == xnn_status_success, Error::MemoryAllocationFailed,
                     "%s: xnn_create_subgraph failed", kXnnpackBackendName);
  std::unique_ptr<xnn_subgraph, xnn_status (*)(xnn_subgraph_t)> owned(s, xnn_delete_subgraph);
  std::vector<std::unique_ptr<float[]>> statics;
  SubgraphBuilder builder(*method, s, SubgraphBuilder::Mode::Explain, &statics);
  std::vector<std::string> reasons;
  for (size_t k = 0; k < method->num_instructions(); ++k) {
    runtime::clear_error();
    const Error e = builder.node(k);
    const char* why = runtime::last_error_message();
    reasons.emplace_back(e == Error::Ok ? "" : *why ? why : "refused");
  }
  return reasons;
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
