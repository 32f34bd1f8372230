#pragma once

#include <cstdint>

#include <executorch/runtime/core/span.h>
#include <executorch/runtime/core/tensor.h>

namespace executorch {
namespace runtime {

// A value of a program: an operator argument, input or output.
class EValue {
 public:
  enum class Tag : uint8_t { None, Int, Double, Bool, String, Tensor, IntList, DoubleList, BoolList, TensorList };

  EValue() = default;
  explicit EValue(int64_t v) : tag_(Tag::Int) { payload_.i = v; }
  explicit EValue(double v) : tag_(Tag::Double) { payload_.d = v; }
  explicit EValue(bool v) : tag_(Tag::Bool) { payload_.b = v; }
  explicit EValue(const Tensor& t) : tag_(Tag::Tensor) { payload_.t = t; }
  static EValue string(const char* s, size_t n) { return tagged(Tag::String, &Payload::s, Span<const char>(s, n)); }
  static EValue int_list(Span<const int64_t> v) { return tagged(Tag::IntList, &Payload::il, v); }
  static EValue double_list(Span<const double> v) { return tagged(Tag::DoubleList, &Payload::dl, v); }
  static EValue bool_list(Span<const bool> v) { return tagged(Tag::BoolList, &Payload::bl, v); }
  static EValue tensor_list(Span<EValue* const> v) { return tagged(Tag::TensorList, &Payload::tl, v); }

  Tag tag() const { return tag_; }
  bool is_none() const { return tag_ == Tag::None; }
  bool is_int() const { return tag_ == Tag::Int; }
  bool is_double() const { return tag_ == Tag::Double; }
  bool is_bool() const { return tag_ == Tag::Bool; }
  bool is_scalar() const { return is_int() || is_double() || is_bool(); }
  bool is_tensor() const { return tag_ == Tag::Tensor; }
  bool is_int_list() const { return tag_ == Tag::IntList; }
  bool is_tensor_list() const { return tag_ == Tag::TensorList; }

  int64_t to_int() const { return payload_.i; }
  double to_double() const { return payload_.d; }
  bool to_bool() const { return payload_.b; }
  // An Int, Double or Bool as a double.
  double scalar_as_double() const {
    return is_double() ? payload_.d : is_int() ? static_cast<double>(payload_.i) : payload_.b ? 1.0 : 0.0;
  }
  Tensor& to_tensor() { return payload_.t; }
  const Tensor& to_tensor() const { return payload_.t; }
  Span<const char> to_string() const { return payload_.s; }
  Span<const int64_t> to_int_list() const { return payload_.il; }
  Span<const double> to_double_list() const { return payload_.dl; }
  Span<const bool> to_bool_list() const { return payload_.bl; }
  Span<EValue* const> to_tensor_list() const { return payload_.tl; }

 private:
  Tag tag_ = Tag::None;
  union Payload {
    Payload() : i(0) {}
    int64_t i;
    double d;
    bool b;
    Tensor t;
    Span<const char> s;
    Span<const int64_t> il;
    Span<const double> dl;
    Span<const bool> bl;
    Span<EValue* const> tl;
  } payload_;

  // An EValue of `tag` holding v in the payload's `field`.
  template <typename V>
  static EValue tagged(Tag tag, V Payload::*field, V v) {
    EValue e;
    e.tag_ = tag;
    e.payload_.*field = v;
    return e;
  }
};

}  // namespace runtime
}  // namespace executorch
