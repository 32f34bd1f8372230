#include <executorch/backends/cuda/runtime/cuda_backend.h>

#include <cstdio>

#include <cuda_runtime_api.h>

#include <executorch/runtime/core/log.h>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

class CudaBackend final : public runtime::BackendInterface {
 public:
  bool is_available() const override {
    int devices = 0;
    // No driver, no device, or a driver older than the runtime all mean "not here".
    return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  }

  runtime::Result<runtime::DelegateHandle*> init(runtime::Span<const uint8_t> /*processed*/,
                                                 runtime::Span<const runtime::CompileSpec> /*specs*/) const override {
    if (!is_available()) {
      return ET_ERROR(runtime::Error::DelegateInvalidCompatibility, "%s: no usable CUDA device", kCudaBackendName);
    }
    // The delegate payload format (subgraph, constants, device memory plan) is not built yet.
    return ET_ERROR(runtime::Error::NotImplemented, "%s cannot execute delegate payloads yet", kCudaBackendName);
  }

  runtime::Error execute(runtime::DelegateHandle* /*handle*/, runtime::Span<runtime::EValue*> /*args*/) const override {
    return ET_ERROR(runtime::Error::NotImplemented, "%s cannot execute delegate payloads yet", kCudaBackendName);
  }

  void destroy(runtime::DelegateHandle* /*handle*/) const override {}
};

// Registers at load time: linking (or dlopen-ing) this library is all a program has to do.
// Consumers keep the library in DT_NEEDED (--no-as-needed) so that this runs.
const bool registered = [] {
  const runtime::Error error = runtime::register_backend({kCudaBackendName, &cuda_backend()});
  if (error != runtime::Error::Ok) {
    std::fprintf(stderr, "executorch: registering %s failed: %s\n", kCudaBackendName,
                 runtime::to_string(error));
  }
  return error == runtime::Error::Ok;
}();

}  // namespace

runtime::BackendInterface& cuda_backend() {
  static CudaBackend instance;
  return instance;
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
