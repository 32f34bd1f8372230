// A model container with the ABI of PyTorch's AOTInductor (torch/csrc/inductor/aoti_runtime/
// interface.h) on host memory, for the CPU tests of the loader: y = x * scale + shift, float32,
// with two constants ("scale", "shift", one element each) handed in by UpdateConstantBuffer. Its
// tensors come from the aoti_torch_* shims, as generated code's do, and it takes its input handles
// over (deletes them) as generated code does.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

#include <executorch/backends/cuda/shims/shims.h>

namespace {

struct Container {
  std::string device;
  float scale = 0.f, shift = 0.f;
  bool ready = false;
};

constexpr const char* kConstants[] = {"scale", "shift"};

float first_float(AtenTensorHandle t) {
  void* p = nullptr;
  return aoti_torch_get_data_ptr(t, &p) == 0 ? *static_cast<float*>(p) : 0.f;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int32_t AOTInductorModelContainerCreateWithDevice(void** container,
                                                                                         size_t num_models,
                                                                                         const char* device,
                                                                                         const char*) {
  if (container == nullptr || num_models != 1 || device == nullptr || std::strcmp(device, "cpu") != 0) return 1;
  *container = new Container{device};
  return 0;
}

__attribute__((visibility("default"))) int32_t AOTInductorModelContainerDelete(void* container) {
  delete static_cast<Container*>(container);
  return 0;
}

__attribute__((visibility("default"))) int32_t AOTInductorModelContainerGetNumInputs(void*, size_t* count) {
  *count = 1;
  return 0;
}

__attribute__((visibility("default"))) int32_t AOTInductorModelContainerGetNumOutputs(void*, size_t* count) {
  *count = 1;
  return 0;
}

__attribute__((visibility("default"))) int32_t AOTInductorModelContainerGetNumConstants(void*, size_t* count) {
  *count = 2;
  return 0;
}

__attribute__((visibility("default"))) int32_t AOTInductorModelContainerGetConstantName(void*, size_t index,
                                                                                        const char** name) {
  if (index >= 2) return 1;
  *name = kConstants[index];
  return 0;
}

__attribute__((visibility("default"))) int32_t AOTInductorModelContainerUpdateConstantBuffer(void* container,
                                                                                             void* constants, bool,
                                                                                             bool validate_full) {
  auto* c = static_cast<Container*>(container);
  const auto& map = *static_cast<std::unordered_map<std::string, AtenTensorHandle>*>(constants);
  const auto scale = map.find("scale"), shift = map.find("shift");
  if (validate_full && (scale == map.end() || shift == map.end())) return 1;
  c->scale = first_float(scale->second);
  c->shift = first_float(shift->second);
  c->ready = true;
  return 0;
}

__attribute__((visibility("default"))) int32_t AOTInductorModelContainerRun(void* container, AtenTensorHandle* inputs,
                                                                            size_t num_inputs,
                                                                            AtenTensorHandle* outputs,
                                                                            size_t num_outputs, void*, void*) {
  const auto* c = static_cast<Container*>(container);
  if (!c->ready || num_inputs != 1 || num_outputs != 1) return 1;
  // The input handle is the container's now, as generated code steals it: deleted on return.
  struct Owned {
    AtenTensorHandle t;
    ~Owned() { aoti_torch_delete_tensor_object(t); }
  } input{inputs[0]};
  const bool grad = aoti_torch_grad_mode_is_enabled();  // generated code runs with grad mode off
  aoti_torch_grad_mode_set_enabled(false);
  struct Restore {
    bool grad;
    ~Restore() { aoti_torch_grad_mode_set_enabled(grad); }
  } restore{grad};
  int64_t dim = 0, *sizes = nullptr, numel = 0;
  int32_t dtype = 0;
  void* in = nullptr;
  if (aoti_torch_get_dim(inputs[0], &dim) != 0 || aoti_torch_get_sizes(inputs[0], &sizes) != 0 ||
      aoti_torch_get_numel(inputs[0], &numel) != 0 || aoti_torch_get_dtype(inputs[0], &dtype) != 0 ||
      dtype != aoti_torch_dtype_float32() || aoti_torch_get_data_ptr(inputs[0], &in) != 0) {
    return 1;
  }
  AtenTensorHandle out = nullptr;
  void* o = nullptr;
  if (aoti_torch_empty_strided(dim, sizes, nullptr, dtype, aoti_torch_device_type_cpu(), 0, &out) != 0 ||
      aoti_torch_get_data_ptr(out, &o) != 0) {
    return 1;
  }
  for (int64_t k = 0; k < numel; ++k) static_cast<float*>(o)[k] = static_cast<float*>(in)[k] * c->scale + c->shift;
  outputs[0] = out;
  return 0;
}

}  // extern "C"
