#include <executorch/runtime/core/error.h>

#include <cstdio>
#include <cstdlib>

#include <executorch/runtime/core/result.h>

namespace executorch {
namespace runtime {

const char* to_string(Error error) {
  switch (error) {
    case Error::Ok: return "Ok";
    case Error::Internal: return "Internal";
    case Error::InvalidState: return "InvalidState";
    case Error::InvalidArgument: return "InvalidArgument";
    case Error::NotFound: return "NotFound";
    case Error::NotSupported: return "NotSupported";
    case Error::NotImplemented: return "NotImplemented";
    case Error::MemoryAllocationFailed: return "MemoryAllocationFailed";
    case Error::InvalidProgram: return "InvalidProgram";
    case Error::DelegateInvalidCompatibility: return "DelegateInvalidCompatibility";
    case Error::DelegateMemoryAllocationFailed: return "DelegateMemoryAllocationFailed";
    case Error::DelegateInvalidHandle: return "DelegateInvalidHandle";
    case Error::RegistrationExceedingMaxKernels: return "RegistrationExceedingMaxKernels";
    case Error::RegistrationAlreadyRegistered: return "RegistrationAlreadyRegistered";
  }
  return "Unknown";
}

namespace internal {
void get_on_error(Error error) {
  std::fprintf(stderr, "executorch: Result::get() on a failed Result (%s)\n", to_string(error));
  std::abort();
}
}  // namespace internal

}  // namespace runtime
}  // namespace executorch
