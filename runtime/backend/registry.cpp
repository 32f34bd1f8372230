#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/named_registry.h>

namespace executorch {
namespace runtime {

BackendInterface::~BackendInterface() = default;

namespace {

// The one backend registry of the process: it lives in libexecutorch.so.1 and nowhere else.
// Constructed on first use, so static initializers of other libraries may register.
internal::NamedRegistry<Backend, kMaxRegisteredBackends>& registry() {
  static internal::NamedRegistry<Backend, kMaxRegisteredBackends> instance("backend");
  return instance;
}

}  // namespace

Error register_backend(const Backend& backend) {
  if (backend.name == nullptr || backend.backend == nullptr) {
    return set_error(Error::InvalidArgument, "backend with a null name or object");
  }
  return registry().add(backend);
}

BackendInterface* get_backend_class(const char* name) {
  Backend found{};
  return name != nullptr && registry().find(name, &found) ? found.backend : nullptr;
}

size_t get_num_registered_backends() { return registry().size(); }

const char* get_backend_name(size_t index) { return registry().name_at(index); }

}  // namespace runtime
}  // namespace executorch
