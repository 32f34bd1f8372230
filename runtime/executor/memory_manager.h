#pragma once

#include <cstdint>

#include <executorch/runtime/core/span.h>

namespace executorch {
namespace runtime {

// The planned buffers a Method runs in: buffer i must hold at least the program's
// non_const_buffer_sizes[i] bytes. The caller owns the memory. Without a MemoryManager, a Method
// allocates (and owns) its planned buffers itself.
class MemoryManager {
 public:
  explicit MemoryManager(Span<Span<uint8_t>> planned_buffers) : planned_buffers_(planned_buffers) {}
  Span<Span<uint8_t>> planned_buffers() const { return planned_buffers_; }

 private:
  Span<Span<uint8_t>> planned_buffers_;
};

}  // namespace runtime
}  // namespace executorch
