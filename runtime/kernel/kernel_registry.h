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

// The argument kinds an operator takes, from its schema: one letter per argument in schema order,
// '>', then one per output (docs/program_format.md, "Argument kinds"). A method's instructions are
// checked against them when it loads, so a program passing an int where a tensor belongs is refused
// then rather than at its first execute. "aten::add.Tensor" is "NNd>T".
struct KernelSignature {
  const char* name;
  const char* kinds;
};

// A name given twice is RegistrationAlreadyRegistered; a full table RegistrationExceedingMaxKernels.
EXECUTORCH_API Error register_kernel_signatures(Span<const KernelSignature> signatures);

// The kinds registered for `name`, or nullptr (then only the kernel checks its arguments, at execute).
EXECUTORCH_API const char* get_kernel_signature(const char* name);

// Ok when `args` (the instruction's values, outputs last) fit `kinds`; else InvalidProgram naming the
// first argument that does not.
EXECUTORCH_API Error check_kernel_arguments(const char* kinds, Span<const EValue* const> args);

// The name of the index-th registered kernel, or nullptr when out of range.
EXECUTORCH_API const char* get_kernel_name(size_t index);

}  // namespace runtime
}  // namespace executorch
