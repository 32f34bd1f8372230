#include <cstring>
#include <mutex>

#include <executorch/runtime/backend/interface.h>

namespace executorch {
namespace runtime {

BackendInterface::~BackendInterface() = default;

namespace {

// The one registry of the process: it lives in libexecutorch.so.1 and nowhere else.
struct Registry {
  std::mutex mutex;
  Backend entries[kMaxRegisteredBackends] = {};
  size_t size = 0;
};

Registry& registry() {
  static Registry instance;  // constructed on first use, so static initializers may register
  return instance;
}

}  // namespace

Error register_backend(const Backend& backend) {
  if (backend.name == nullptr || backend.backend == nullptr) {
    return Error::InvalidArgument;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (size_t i = 0; i < r.size; ++i) {
    if (std::strcmp(r.entries[i].name, backend.name) == 0) {
      return Error::RegistrationAlreadyRegistered;
    }
  }
  if (r.size == kMaxRegisteredBackends) {
    return Error::RegistrationExceedingMaxKernels;
  }
  r.entries[r.size++] = backend;
  return Error::Ok;
}

BackendInterface* get_backend_class(const char* name) {
  if (name == nullptr) {
    return nullptr;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (size_t i = 0; i < r.size; ++i) {
    if (std::strcmp(r.entries[i].name, name) == 0) {
      return r.entries[i].backend;
    }
  }
  return nullptr;
}

size_t get_num_registered_backends() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.size;
}

const char* get_backend_name(size_t index) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return index < r.size ? r.entries[index].name : nullptr;
}

}  // namespace runtime
}  // namespace executorch
