#include <executorch/extension/tensor/tensor_ptr.h>

namespace executorch {
namespace extension {
namespace {

// What a TensorPtr keeps alive: shape, strides, and owned bytes if any.
struct Storage {
  std::vector<int64_t> sizes, strides;
  std::vector<uint8_t> bytes;
  runtime::Tensor tensor;
};

TensorPtr make(std::vector<int64_t> sizes, std::vector<uint8_t> bytes, void* data, runtime::ScalarType type,
               runtime::Device device) {
  auto s = std::make_shared<Storage>();
  s->sizes = std::move(sizes);
  s->strides.assign(s->sizes.size(), 1);
  for (size_t d = s->sizes.size(); d-- > 1;) s->strides[d - 1] = s->strides[d] * s->sizes[d];
  s->bytes = std::move(bytes);
  if (data == nullptr) data = s->bytes.data();
  s->tensor =
      runtime::Tensor(type, static_cast<int>(s->sizes.size()), s->sizes.data(), s->strides.data(), data, device);
  return TensorPtr(s, &s->tensor);
}

}  // namespace

TensorPtr make_tensor_ptr(std::vector<int64_t> sizes, void* data, runtime::ScalarType type, runtime::Device device) {
  return make(std::move(sizes), {}, data, type, device);
}

TensorPtr make_tensor_ptr_owning(std::vector<int64_t> sizes, std::vector<uint8_t> bytes, runtime::ScalarType type) {
  int64_t numel = 1;
  for (int64_t s : sizes) {
    if (s < 0) return nullptr;
    numel *= s;
  }
  if (static_cast<size_t>(numel) * runtime::element_size(type) != bytes.size()) return nullptr;
  return make(std::move(sizes), std::move(bytes), nullptr, type, {});
}

}  // namespace extension
}  // namespace executorch
