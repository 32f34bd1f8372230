#pragma once

#include <cstdint>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace runtime {

// The most bytes a program may make the runtime allocate for one method's planned memory, for one
// program state, or for one delegate's planned memory (CudaBackend's device buffers). The sizes come
// from the file, so without a limit a program asking for gigabytes loads wherever they can be
// reserved. 0 means no limit. The first call reads EXECUTORCH_MAX_PLANNED_BYTES (decimal bytes);
// memory a caller provides through a MemoryManager is the caller's choice and is not limited.
EXECUTORCH_API uint64_t max_planned_bytes();
EXECUTORCH_API void set_max_planned_bytes(uint64_t bytes);

// a + b, or UINT64_MAX where that overflows: for summing sizes a hostile program may claim in exabytes.
inline uint64_t add_saturating(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

// The sum of a range of sizes, saturating as add_saturating does.
template <typename Sizes>
uint64_t sum_saturating(const Sizes& sizes) {
  uint64_t total = 0;
  for (uint64_t s : sizes) total = add_saturating(total, s);
  return total;
}

// Ok, or MemoryAllocationFailed naming `what` (printf-style "method 'forward'"), both sizes and
// how the limit is set.
EXECUTORCH_API Error check_planned_bytes(uint64_t bytes, const char* what);

}  // namespace runtime
}  // namespace executorch
