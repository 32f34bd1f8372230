// libFuzzer target: CudaBackend's payload checks (backends/cuda/runtime/payload.h) on arbitrary
// bytes, on the CPU: everything init does before it allocates device memory.
#include <cstddef>
#include <cstdint>

#include <executorch/backends/cuda/runtime/payload.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)executorch::backends::cuda::check_payload({data, size}, 64 << 20);
  return 0;
}
