#pragma once

#include <cstddef>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace runtime {

class ProgramState;

// What init learns of the method a delegate call belongs to.
struct BackendInitContext {
  // The method's program state (its mutable buffers, shared with the program's other methods
  // loaded with it). A payload that updates buffers names them; the backend keeps its copy of each
  // here (ProgramState::DeviceCopy), so that every delegate call updating one sees the same.
  ProgramState* state = nullptr;
};

// A key/value option the exporter attached to a delegate call.
struct CompileSpec {
  const char* key;
  Span<const uint8_t> value;
};

// Whatever a backend keeps for one delegate call site between init and destroy.
using DelegateHandle = void;

// A delegate: runs the parts of a program lowered to it. Implementations live in their own
// libraries and register one instance with register_backend() from a static initializer.
class EXECUTORCH_API BackendInterface {
 public:
  virtual ~BackendInterface();

  // Whether this backend can run here (e.g. a usable GPU exists). Never throws.
  virtual bool is_available() const = 0;

  // Prepares `processed` (the exporter's payload; valid only during this call) for execution.
  virtual Result<DelegateHandle*> init(BackendInitContext& context, Span<const uint8_t> processed,
                                       Span<const CompileSpec> compile_specs) const = 0;

  // Runs a prepared delegate call: `args` are its inputs followed by its outputs.
  virtual Error execute(DelegateHandle* handle, Span<EValue*> args) const = 0;

  // Releases what init made. Called once per successful init.
  virtual void destroy(DelegateHandle* handle) const = 0;
};

// A name and the backend registered under it. `name` must outlive the registry (a literal).
struct Backend {
  const char* name;
  BackendInterface* backend;
};

// Most backends a process can register.
constexpr size_t kMaxRegisteredBackends = 16;

// Adds `backend` to the process-wide registry. Errors: InvalidArgument (null name or backend),
// RegistrationAlreadyRegistered (name taken), RegistrationExceedingMaxKernels (registry full).
EXECUTORCH_API Error register_backend(const Backend& backend);

// The backend registered as `name`, or nullptr.
EXECUTORCH_API BackendInterface* get_backend_class(const char* name);

EXECUTORCH_API size_t get_num_registered_backends();

// The name of the index-th registered backend, or nullptr when out of range.
EXECUTORCH_API const char* get_backend_name(size_t index);

}  // namespace runtime
}  // namespace executorch
