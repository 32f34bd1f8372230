#pragma once

// Programmatic dependent launch (Hopper and newer). A kernel launched through launch_dependent() may
// start while the kernel before it on the stream is still running, once every block of that kernel
// has called allow_dependents() or exited. Until it calls wait_for_prerequisites() it may read only
// what no earlier kernel writes (a layer's weights); the wait returns when the earlier kernel has
// finished and its writes are visible. In a CUDA graph the same launches become programmatic edges.
// Elsewhere (older GPUs, or a kernel image built below sm_90) the launch is an ordinary one.

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace executorch {
namespace backends {
namespace cuda {

__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_prerequisites() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Asks L2 to fetch the 128-byte line holding p (no registers wait for it).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Whether `kernel`, as loaded on the current device, was compiled with the wait above: its PTX is
// for sm_90 or newer (a kernel JIT-compiled from older PTX has no wait, and must not overlap).
// Known once per device and kernel signature: kernels sharing one are built for the same
// architectures (--cuda_archs applies to every cuda_library).
template <typename Kernel>
bool overlaps_prerequisites(Kernel* kernel) {
  constexpr int kDevices = 64;
  static std::atomic<int8_t> known[kDevices];  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return false;
  int8_t state = known[device].load(std::memory_order_relaxed);
  if (state == 0) {
    cudaFuncAttributes attributes{};
    state = cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess && attributes.ptxVersion >= 90 ? 2 : 1;
    known[device].store(state, std::memory_order_relaxed);
  }
  return state == 2;
}

// Launches kernel<<<grid, block, shared_bytes, stream>>>(args...) allowed to overlap the previous
// kernel's tail where overlaps_prerequisites(kernel); the kernel must call wait_for_prerequisites().
template <typename... Params, typename... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                             Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = overlaps_prerequisites(kernel) ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
