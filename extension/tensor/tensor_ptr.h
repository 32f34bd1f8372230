#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <executorch/runtime/core/scalar_type.h>
#include <executorch/runtime/core/tensor.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace extension {

// A tensor that owns its shape and, when made from a vector, its data. Shared, so it can be passed
// around cheaply; the Tensor it points to is what Method::set_input and Module::forward take.
using TensorPtr = std::shared_ptr<runtime::Tensor>;

template <typename T>
struct scalar_type_of;
template <>
struct scalar_type_of<float> {
  static constexpr auto value = runtime::ScalarType::Float;
};
template <>
struct scalar_type_of<double> {
  static constexpr auto value = runtime::ScalarType::Double;
};
template <>
struct scalar_type_of<int64_t> {
  static constexpr auto value = runtime::ScalarType::Long;
};
template <>
struct scalar_type_of<int32_t> {
  static constexpr auto value = runtime::ScalarType::Int;
};
template <>
struct scalar_type_of<int8_t> {
  static constexpr auto value = runtime::ScalarType::Char;
};
template <>
struct scalar_type_of<uint8_t> {
  static constexpr auto value = runtime::ScalarType::Byte;
};
template <>
struct scalar_type_of<bool> {
  static constexpr auto value = runtime::ScalarType::Bool;
};

// Wraps memory the caller owns (CPU, or CUDA memory with device = {DeviceType::CUDA, index}).
EXECUTORCH_API TensorPtr make_tensor_ptr(std::vector<int64_t> sizes, void* data, runtime::ScalarType type,
                                         runtime::Device device = {});

// Wraps typed memory the caller owns, e.g. a float* into host or device memory.
template <typename T>
TensorPtr make_tensor_ptr(std::vector<int64_t> sizes, T* data, runtime::Device device = {}) {
  return make_tensor_ptr(std::move(sizes), static_cast<void*>(data), scalar_type_of<T>::value, device);
}

// Owns `data` (moved in); its size must match the shape, else the result is null.
EXECUTORCH_API TensorPtr make_tensor_ptr_owning(std::vector<int64_t> sizes, std::vector<uint8_t> bytes,
                                                runtime::ScalarType type);

template <typename T>
TensorPtr make_tensor_ptr(std::vector<int64_t> sizes, std::vector<T> data) {
  std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t*>(data.data()),
                             reinterpret_cast<const uint8_t*>(data.data()) + data.size() * sizeof(T));
  return make_tensor_ptr_owning(std::move(sizes), std::move(bytes), scalar_type_of<T>::value);
}

}  // namespace extension
}  // namespace executorch
