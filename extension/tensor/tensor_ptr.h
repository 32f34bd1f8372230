#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include <executorch/runtime/core/scalar_type.h>
#include <executorch/runtime/core/tensor.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace extension {

// A tensor that owns its shape and, when made from a vector, its data. Shared, so it can be passed
// around cheaply; the Tensor it points to is what Method::set_input and Module::forward take.
using TensorPtr = std::shared_ptr<runtime::Tensor>;

namespace internal {
// The position of T among Types; a type not among them fails to compile.
template <typename T, typename First, typename... Rest>
constexpr int index_of() {
  if constexpr (std::is_same_v<T, First>) {
    return 0;
  } else {
    return 1 + index_of<T, Rest...>();
  }
}
}  // namespace internal

// The ScalarType of a C++ element type (float, double, int64_t, int32_t, int8_t, uint8_t, bool).
template <typename T>
constexpr runtime::ScalarType scalar_type_of() {
  using runtime::ScalarType;
  constexpr ScalarType kTypes[] = {ScalarType::Float, ScalarType::Double, ScalarType::Long, ScalarType::Int,
                                   ScalarType::Char,  ScalarType::Byte,   ScalarType::Bool};
  return kTypes[internal::index_of<T, float, double, int64_t, int32_t, int8_t, uint8_t, bool>()];
}

// Wraps memory the caller owns (CPU, or CUDA memory with device = {DeviceType::CUDA, index}).
EXECUTORCH_API TensorPtr make_tensor_ptr(std::vector<int64_t> sizes, void* data, runtime::ScalarType type,
                                         runtime::Device device = {});

// Wraps typed memory the caller owns, e.g. a float* into host or device memory.
template <typename T>
TensorPtr make_tensor_ptr(std::vector<int64_t> sizes, T* data, runtime::Device device = {}) {
  return make_tensor_ptr(std::move(sizes), static_cast<void*>(data), scalar_type_of<T>(), device);
}

// Owns `data` (moved in); its size must match the shape, else the result is null.
EXECUTORCH_API TensorPtr make_tensor_ptr_owning(std::vector<int64_t> sizes, std::vector<uint8_t> bytes,
                                                runtime::ScalarType type);

template <typename T>
TensorPtr make_tensor_ptr(std::vector<int64_t> sizes, std::vector<T> data) {
  std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t*>(data.data()),
                             reinterpret_cast<const uint8_t*>(data.data()) + data.size() * sizeof(T));
  return make_tensor_ptr_owning(std::move(sizes), std::move(bytes), scalar_type_of<T>());
}

}  // namespace extension
}  // namespace executorch
