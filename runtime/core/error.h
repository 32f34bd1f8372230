#pragma once

#include <cstdint>

#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace runtime {

// Status codes returned across library boundaries; no exception ever crosses one. Discarding one
// is a warning: a failure is handled or passed on.
enum class [[nodiscard]] Error : uint32_t{
    Ok = 0,
    Internal = 1,
    InvalidState = 2,
    InvalidArgument = 0x12,
    NotFound = 0x13,
    NotSupported = 0x14,
    NotImplemented = 0x15,
    MemoryAllocationFailed = 0x21,
    InvalidProgram = 0x23,
    DelegateInvalidCompatibility = 0x30,
    DelegateMemoryAllocationFailed = 0x31,
    DelegateInvalidHandle = 0x32,
    RegistrationExceedingMaxKernels = 0x40,
    RegistrationAlreadyRegistered = 0x41,
};

// A short, stable name for `error` ("InvalidArgument"); never null.
EXECUTORCH_API const char* to_string(Error error);

}  // namespace runtime
}  // namespace executorch
