#pragma once

#include <optional>

#include <cuda_runtime_api.h>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace extension {
namespace cuda {

// The stream the caller wants CUDA work on, on this thread; empty: the backend chooses its own.
// Lives in libexecutorch_extension_cuda.so.1, so the delegate, the shims and the application see
// the same value.
EXECUTORCH_API std::optional<cudaStream_t> current_stream();

// Makes `stream` the current stream for this thread until the guard goes out of scope, then
// restores what was current before (guards nest).
class EXECUTORCH_API StreamGuard {
 public:
  explicit StreamGuard(cudaStream_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  std::optional<cudaStream_t> previous_;
};

// Makes `device` current (cudaSetDevice) until the guard goes out of scope. ok() tells whether the
// switch succeeded (the device exists).
class EXECUTORCH_API DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const { return ok_; }

 private:
  int previous_ = -1;
  bool ok_ = false;
};

// Maps a CUDA status to an Error (Ok for cudaSuccess) and records "what: CUDA's message" as the
// thread's error detail. Out-of-memory becomes MemoryAllocationFailed; no device or driver,
// DelegateInvalidCompatibility; anything else, Internal.
EXECUTORCH_API runtime::Error to_error(cudaError_t status, const char* what);

}  // namespace cuda
}  // namespace extension
}  // namespace executorch
