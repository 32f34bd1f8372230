#pragma once

// Reductions across the 32 lanes of a warp (butterfly shuffles): every lane gets the result.
namespace executorch {
namespace backends {
namespace cuda {

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
