#include <executorch/runtime/kernel/kernel_registry.h>

#include <cstring>
#include <mutex>

#include <executorch/runtime/core/log.h>

namespace executorch {
namespace runtime {
namespace {

// The one kernel registry of the process; kernel libraries fill it from static initializers.
struct Registry {
  std::mutex mutex;
  Kernel entries[kMaxRegisteredKernels] = {};
  size_t size = 0;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

Error register_kernels(Span<const Kernel> kernels) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const Kernel& k : kernels) {
    if (k.name == nullptr || k.op == nullptr) {
      return ET_ERROR(Error::InvalidArgument, "kernel with a null name or function");
    }
    for (size_t i = 0; i < r.size; ++i) {
      if (std::strcmp(r.entries[i].name, k.name) == 0) {
        return ET_ERROR(Error::RegistrationAlreadyRegistered, "kernel %s registered twice", k.name);
      }
    }
    if (r.size == kMaxRegisteredKernels) {
      return ET_ERROR(Error::RegistrationExceedingMaxKernels, "kernel registry full at %zu", r.size);
    }
    r.entries[r.size++] = k;
  }
  return Error::Ok;
}

Result<OpFunction> get_op_function(const char* name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (size_t i = 0; i < r.size; ++i) {
    if (std::strcmp(r.entries[i].name, name) == 0) return r.entries[i].op;
  }
  return ET_ERROR(Error::NotFound, "no kernel registered for operator %s", name);
}

size_t get_num_registered_kernels() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.size;
}

const char* get_kernel_name(size_t index) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return index < r.size ? r.entries[index].name : nullptr;
}

}  // namespace runtime
}  // namespace executorch
