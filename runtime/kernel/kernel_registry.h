#pragma once

#include <cstddef>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace runtime {

// What a kernel may need besides its arguments (reserved for scratch memory and the like).
struct KernelRuntimeContext {};

// A kernel: reads its inputs from `args` and writes into the output tensors that follow them, whose
// shapes and memory the program planned. Returns an Error (with set_error's detail) on bad input.
using OpFunction = Error (*)(KernelRuntimeContext& context, Span<EValue*> args);

struct Kernel {
  const char* name;  // "aten::add.Tensor": operator name, '.', overload
  OpFunction op;
};

constexpr size_t kMaxRegisteredKernels = 512;

// Adds kernels to the process-wide kernel registry (in libexecutorch.so.1). A name registered
// twice is RegistrationAlreadyRegistered; a full registry RegistrationExceedingMaxKernels.
EXECUTORCH_API Error register_kernels(Span<const Kernel> kernels);

// The kernel registered as `name`, or NotFound.
EXECUTORCH_API Result<OpFunction> get_op_function(const char* name);

EXECUTORCH_API size_t get_num_registered_kernels();

// The name of the index-th registered kernel, or nullptr when out of range.
EXECUTORCH_API const char* get_kernel_name(size_t index);

}  // namespace runtime
}  // namespace executorch
