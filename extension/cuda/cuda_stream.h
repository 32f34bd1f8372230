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

// Whether delegates may leave the check of this thread's calls for indices out of range (met on the
// device: an embedding's token, an index_put's position) to the next call, rather than wait for
// the device before returning. Set by a caller that makes its indices itself (a generation loop
// feeding back argmax tokens) and wants a call to return once its work is queued.
EXECUTORCH_API bool deferred_index_checks();

// Defers index checks on this thread (deferred_index_checks) until the guard goes out of scope.
class EXECUTORCH_API DeferIndexChecks {
 public:
  DeferIndexChecks();
  ~DeferIndexChecks();
  DeferIndexChecks(const DeferIndexChecks&) = delete;
  DeferIndexChecks& operator=(const DeferIndexChecks&) = delete;

 private:
  bool previous_;
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
