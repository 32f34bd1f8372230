#include <executorch/runtime/kernel/kernel_registry.h>

#include <executorch/runtime/core/log.h>
#include <executorch/runtime/core/named_registry.h>

namespace executorch {
namespace runtime {
namespace {

// The one kernel registry of the process; kernel libraries fill it from static initializers.
internal::NamedRegistry<Kernel, kMaxRegisteredKernels>& registry() {
  static internal::NamedRegistry<Kernel, kMaxRegisteredKernels> instance("kernel");
  return instance;
}

}  // namespace

Error register_kernels(Span<const Kernel> kernels) {
  for (const Kernel& k : kernels) {
    if (k.name == nullptr || k.op == nullptr) {
      return ET_ERROR(Error::InvalidArgument, "kernel with a null name or function");
    }
    ET_TRY(registry().add(k));
  }
  return Error::Ok;
}

Result<OpFunction> get_op_function(const char* name) {
  Kernel found{};
  if (name != nullptr && registry().find(name, &found)) return found.op;
  return ET_ERROR(Error::NotFound, "no kernel registered for operator %s", name ? name : "(null)");
}

size_t get_num_registered_kernels() { return registry().size(); }

const char* get_kernel_name(size_t index) { return registry().name_at(index); }

}  // namespace runtime
}  // namespace executorch
