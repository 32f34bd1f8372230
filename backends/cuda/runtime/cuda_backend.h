#pragma once

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace backends {
namespace cuda {

// The name programs use to delegate to this backend.
inline constexpr const char kCudaBackendName[] = "CudaBackend";

// The process's CudaBackend instance, the one registered under kCudaBackendName.
EXECUTORCH_API runtime::BackendInterface& cuda_backend();

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
