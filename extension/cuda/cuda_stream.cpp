#include <executorch/extension/cuda/cuda_stream.h>

#include <executorch/runtime/core/log.h>

namespace executorch {
namespace extension {
namespace cuda {
namespace {
thread_local std::optional<cudaStream_t> stream_of_thread;
thread_local bool checks_deferred = false;
}  // namespace

std::optional<cudaStream_t> current_stream() { return stream_of_thread; }

StreamGuard::StreamGuard(cudaStream_t stream) : previous_(stream_of_thread) { stream_of_thread = stream; }

StreamGuard::~StreamGuard() { stream_of_thread = previous_; }

bool deferred_index_checks() { return checks_deferred; }

DeferIndexChecks::DeferIndexChecks() : previous_(checks_deferred) { checks_deferred = true; }

DeferIndexChecks::~DeferIndexChecks() { checks_deferred = previous_; }

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  ok_ = cudaSetDevice(device) == cudaSuccess;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

runtime::Error to_error(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return runtime::Error::Ok;
  // The runtime also keeps a failure as its "last error", which the next kernel launch's check would
  // report as its own (a failed cudaMalloc in init made the next execute fail): the error is
  // reported here, so consume it. Sticky errors (a faulted context) stay, as they must.
  cudaGetLastError();
  runtime::Error error = runtime::Error::Internal;
  switch (status) {
    case cudaErrorMemoryAllocation: error = runtime::Error::MemoryAllocationFailed; break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorNoKernelImageForDevice: error = runtime::Error::DelegateInvalidCompatibility; break;
    default: break;
  }
  return runtime::set_error(error, "%s: %s (%s)", what, cudaGetErrorString(status), cudaGetErrorName(status));
}

}  // namespace cuda
}  // namespace extension
}  // namespace executorch
