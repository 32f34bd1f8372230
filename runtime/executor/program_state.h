#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/core/result.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace runtime {

class Program;

// The mutable buffers of one Program (docs/program_format.md, "Program state"): the memory its
// methods update in place and keep between executions, such as a language model's key/value
// cache. Methods loaded with the same ProgramState share it (a prefill and a decode method);
// each holds a reference, so the state outlives every method that uses it. Not thread-safe:
// methods sharing a state run one at a time.
class EXECUTORCH_API ProgramState final {
 public:
  // One allocation per buffer of `program`, filled with its initial contents. Errors:
  // InvalidProgram for initial data outside its segment, MemoryAllocationFailed.
  static Result<std::shared_ptr<ProgramState>> create(const Program& program);

  size_t num_buffers() const { return buffers_.size(); }
  const char* buffer_name(size_t index) const { return names_[index].c_str(); }
  Span<uint8_t> buffer(size_t index) const { return {buffers_[index].get(), sizes_[index]}; }

  // Every buffer back to its initial contents (a new conversation).
  void reset();

  // Whether this state was made for `program` (its buffers have the sizes the program declares).
  bool belongs_to(const Program& program) const { return program_ == &program; }

 private:
  explicit ProgramState(const Program& program) : program_(&program) {}

  const Program* program_;
  std::vector<std::string> names_;
  std::vector<size_t> sizes_;
  std::vector<Span<const uint8_t>> initial_;  // empty: zeros
  std::vector<std::unique_ptr<uint8_t, void (*)(void*)>> buffers_;
};

}  // namespace runtime
}  // namespace executorch
