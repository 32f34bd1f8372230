#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <executorch/runtime/core/result.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/executor/data_loader.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/program_state.h>
#include <executorch/runtime/platform/export.h>

namespace executorch_flatbuffer {
struct Program;
}

namespace executorch {
namespace runtime {

class Method;

// The container around the FlatBuffer (docs/program_format.md).
constexpr char kProgramMagic[4] = {'X', 'T', 'P', 'F'};
constexpr uint32_t kProgramContainerVersion = 1;
constexpr uint32_t kProgramVersion = 1;
constexpr size_t kProgramHeaderSize = 32;
constexpr size_t kSegmentAlignment = 16;

// A loaded .pte: verified once at load, then read without further parsing.
class EXECUTORCH_API Program final {
 public:
  // Verifies the container header, the FlatBuffer (verifier, identifier, version) and that every
  // segment lies inside the file. Errors: InvalidProgram with the reason in last_error_message().
  static Result<std::unique_ptr<Program>> load(std::unique_ptr<DataLoader> loader);

  size_t num_methods() const;
  // The name of method `index`, or nullptr when out of range.
  const char* method_name(size_t index) const;
  bool has_method(const char* name) const;

  // Prepares method `name` for execution: values, planned memory (from `memory_manager`, or owned
  // by the Method when null), kernels, delegates. Every index and size is checked here.
  // `state`: the mutable buffers the method updates (ProgramState::create(*this)), shared by the
  // methods loaded with it; null gives the method a state of its own.
  Result<std::unique_ptr<Method>> load_method(const char* name, const MemoryManager* memory_manager = nullptr,
                                              std::shared_ptr<ProgramState> state = nullptr) const;

  // Bytes of each planned buffer method `name` needs (to provide them through a MemoryManager).
  Result<std::vector<uint64_t>> planned_buffer_sizes(const char* name) const;

  // Their sum, saturating at UINT64_MAX (a hostile program may claim exabytes per buffer).
  Result<uint64_t> planned_bytes(const char* name) const;

  // The mutable buffers the program declares (docs/program_format.md, "Program state"): how many,
  // and each one's name and size in bytes (index below num_mutable_buffers()).
  size_t num_mutable_buffers() const;
  const char* mutable_buffer_name(size_t index) const;
  uint64_t mutable_buffer_size(size_t index) const;

  // metadata["key"], or nullptr.
  const char* metadata(const char* key) const;

  // Bytes [offset, offset + size) of segment `index`, bounds-checked.
  Result<Span<const uint8_t>> segment_data(size_t index, uint64_t offset, uint64_t size) const;

  const executorch_flatbuffer::Program* flatbuffer() const { return program_; }

 private:
  Program(std::unique_ptr<DataLoader> loader, const executorch_flatbuffer::Program* program,
          Span<const uint8_t> segments)
      : loader_(std::move(loader)), program_(program), segments_(segments) {}

  std::unique_ptr<DataLoader> loader_;
  const executorch_flatbuffer::Program* program_;
  Span<const uint8_t> segments_;  // from the segment base to the end of the file
};

}  // namespace runtime
}  // namespace executorch
