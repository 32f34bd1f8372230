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
  // Where a delegate keeps a buffer while it runs (device memory), made by the first delegate call
  // that updates the buffer and found by the others through device_copy(). The state owns it, so
  // every method sharing the state updates the one copy; reset() and read() go through it.
  class EXECUTORCH_API DeviceCopy {
   public:
    virtual ~DeviceCopy();
    // The copy's memory, as the delegate addresses it (of the buffer's size).
    virtual Span<uint8_t> memory() = 0;
    // The buffer's contents from host memory to the copy, or back.
    virtual Error upload(Span<const uint8_t> host) = 0;
    virtual Error download(Span<uint8_t> host) = 0;
    // The copy set to zeros, as `zeroed_host` (the buffer, zeroed) holds; an upload unless the device
    // can clear its memory in place.
    virtual Error zero(Span<const uint8_t> zeroed_host) { return upload(zeroed_host); }
  };

  // One allocation per buffer of `program`, filled with its initial contents. Errors:
  // InvalidProgram for initial data outside its segment, MemoryAllocationFailed.
  static Result<std::shared_ptr<ProgramState>> create(const Program& program);

  // A state of `program` over memory the caller owns and keeps alive (one span per buffer, of the
  // declared size, in the program's order): a delegate's payload run on its device copies. reset()
  // and read() leave such memory alone. InvalidArgument where the spans do not fit the program.
  static Result<std::shared_ptr<ProgramState>> over(const Program& program, Span<const Span<uint8_t>> memory);

  size_t num_buffers() const { return buffers_.size(); }
  const char* buffer_name(size_t index) const { return names_[index].c_str(); }
  // The buffer's host memory. Where a device copy exists it is the copy that methods update: read()
  // gives the current contents.
  Span<uint8_t> buffer(size_t index) const { return {buffers_[index].get(), sizes_[index]}; }
  // The index of the buffer named `name`. NotFound otherwise.
  Result<size_t> find(const char* name) const;

  // Buffer `index`'s device copy, or nullptr.
  DeviceCopy* device_copy(size_t index) const { return index < copies_.size() ? copies_[index].get() : nullptr; }
  // Makes `copy` buffer `index`'s device copy and uploads the buffer's contents to it. InvalidArgument
  // where the buffer has one already or `copy` has another size.
  Error set_device_copy(size_t index, std::unique_ptr<DeviceCopy> copy);

  // Buffer `index`'s current contents (fetched from its device copy first, where it has one).
  Result<Span<const uint8_t>> read(size_t index);

  // Every buffer back to its initial contents (a new conversation), device copies included.
  Error reset();

  // Whether this state was made for `program` (its buffers have the sizes the program declares).
  bool belongs_to(const Program& program) const { return program_ == &program; }

 private:
  explicit ProgramState(const Program& program) : program_(&program) {}

  const Program* program_;
  bool external_ = false;  // made by over(): the memory is the caller's
  std::vector<std::string> names_;
  std::vector<size_t> sizes_;
  std::vector<Span<const uint8_t>> initial_;  // empty: zeros
  std::vector<std::unique_ptr<uint8_t, void (*)(void*)>> buffers_;
  std::vector<std::unique_ptr<DeviceCopy>> copies_;  // per buffer, null where none
};

}  // namespace runtime
}  // namespace executorch
