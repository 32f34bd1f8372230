#pragma once

// Loads a .pte from bytes and runs every method once with inputs filled from their declared dtype
// and shape: what a program from an untrusted source goes through. Returns the first error.
#include <cstddef>
#include <cstdint>

#include <executorch/runtime/core/error.h>

namespace executorch {
namespace testing {

// Planned buffers larger than this are refused before allocation (a fuzzer must not spend its time
// in multi-gigabyte memsets); 0 means no limit, as in the runtime itself.
struct RunOptions {
  uint64_t max_planned_bytes = 0;
};

runtime::Error load_and_run(const uint8_t* data, size_t size, const RunOptions& options = {});

}  // namespace testing
}  // namespace executorch
