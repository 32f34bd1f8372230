#pragma once

// Element loads and stores in float32, whatever the element type: the kernels compute in float32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace executorch {
namespace backends {
namespace cuda {

__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ float ld(__half v) { return __half2float(v); }
__device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T st(float v);
template <>
__device__ __forceinline__ float st<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half st<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 st<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
