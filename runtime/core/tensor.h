#pragma once

#include <cstddef>
#include <cstdint>

#include <executorch/runtime/core/scalar_type.h>

namespace executorch {
namespace runtime {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = 0;
};

constexpr int kTensorDimensionLimit = 16;

// A view of a contiguous (row-major) tensor: element type, shape, data and where the data lives.
// It owns nothing: sizes, strides and data belong to the Method or TensorPtr that made it.
class Tensor {
 public:
  Tensor() = default;
  Tensor(ScalarType dtype, int dim, const int64_t* sizes, const int64_t* strides, void* data, Device device = {})
      : dtype_(dtype), dim_(dim), sizes_(sizes), strides_(strides), data_(data), device_(device) {
    numel_ = 1;
    for (int i = 0; i < dim; ++i) numel_ *= sizes[i];
  }

  ScalarType scalar_type() const { return dtype_; }
  int dim() const { return dim_; }
  const int64_t* sizes() const { return sizes_; }
  const int64_t* strides() const { return strides_; }
  int64_t size(int d) const { return sizes_[d]; }
  int64_t numel() const { return numel_; }
  size_t element_size() const { return runtime::element_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * element_size(); }
  Device device() const { return device_; }
  bool is_cuda() const { return device_.type == DeviceType::CUDA; }

  void* mutable_data_ptr() const { return data_; }
  const void* const_data_ptr() const { return data_; }
  template <typename T>
  T* data_ptr() const {
    return static_cast<T*>(data_);
  }
  void set_data(void* data) { data_ = data; }
  void set_device(Device device) { device_ = device; }

 private:
  ScalarType dtype_ = ScalarType::Float;
  int dim_ = 0;
  const int64_t* sizes_ = nullptr;
  const int64_t* strides_ = nullptr;
  void* data_ = nullptr;
  Device device_;
  int64_t numel_ = 1;
};

// The same rank and sizes (dtypes aside).
inline bool same_shape(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) return false;
  for (int d = 0; d < a.dim(); ++d) {
    if (a.size(d) != b.size(d)) return false;
  }
  return true;
}

// Element strides of `t` broadcast to a shape of `out_rank` dimensions (0 where `t` is broadcast);
// false where the shapes do not broadcast. Shared by the CPU kernels and the CUDA delegate.
inline bool broadcast_strides(const Tensor& t, int out_rank, const int64_t* out_sizes, int64_t* strides) {
  const int shift = out_rank - t.dim();
  if (shift < 0) return false;
  int64_t stride = 1;
  for (int d = out_rank - 1; d >= 0; --d) {
    if (d < shift) {
      strides[d] = 0;
      continue;
    }
    const int64_t size = t.size(d - shift);
    if (size != out_sizes[d] && size != 1) return false;
    strides[d] = size == 1 ? 0 : stride;
    stride *= size;
  }
  return true;
}

}  // namespace runtime
}  // namespace executorch
