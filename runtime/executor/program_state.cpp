#include <executorch/runtime/executor/program_state.h>

#include <cstdlib>
#include <cstring>

#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/memory_limit.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/schema/program_generated.h>

namespace executorch {
namespace runtime {

namespace fb = executorch_flatbuffer;

namespace {
// As planned buffers: a size from the file is refused beyond this rather than attempted.
constexpr uint64_t kMaxStateBufferBytes = uint64_t{1} << 40;

void keep(void*) {}  // over(): the caller frees its memory
}  // namespace

ProgramState::DeviceCopy::~DeviceCopy() = default;

Result<std::shared_ptr<ProgramState>> ProgramState::create(const Program& program) {
  std::shared_ptr<ProgramState> state(new ProgramState(program));
  const size_t count = program.num_mutable_buffers();
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) total = add_saturating(total, program.mutable_buffer_size(i));
  ET_TRY(check_planned_bytes(total, "the program state (its mutable buffers)"));
  const auto* list = program.flatbuffer()->mutable_buffers();
  for (size_t i = 0; i < count; ++i) {
    const fb::MutableBuffer* b = list->Get(static_cast<flatbuffers::uoffset_t>(i));
    const uint64_t size = b->size();
    ET_CHECK_OR_RETURN(size <= kMaxStateBufferBytes, Error::InvalidProgram, "mutable buffer %zu asks for %llu bytes", i,
                       static_cast<unsigned long long>(size));
    Span<const uint8_t> initial;
    if (b->data_segment() >= 0) {
      auto bytes = program.segment_data(static_cast<size_t>(b->data_segment()), b->data_offset(), size);
      if (!bytes.ok()) return ET_ERROR_CONTEXT(bytes.error(), "mutable buffer %zu (initial data)", i);
      initial = *bytes;
    }
    const size_t rounded = static_cast<size_t>((size + 63) / 64 * 64);
    auto* data = static_cast<uint8_t*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
    ET_CHECK_OR_RETURN(data != nullptr, Error::MemoryAllocationFailed,
                       "cannot allocate mutable buffer %zu of %llu bytes", i, static_cast<unsigned long long>(size));
    state->buffers_.emplace_back(data, std::free);
    state->names_.emplace_back(program.mutable_buffer_name(i));
    state->sizes_.push_back(static_cast<size_t>(size));
    state->initial_.push_back(initial);
  }
  state->copies_.resize(count);
  ET_TRY(state->reset());
  return state;
}

Result<std::shared_ptr<ProgramState>> ProgramState::over(const Program& program, Span<const Span<uint8_t>> memory) {
  const size_t count = program.num_mutable_buffers();
  ET_CHECK_OR_RETURN(memory.size() == count, Error::InvalidArgument,
                     "the program declares %zu mutable buffers; %zu were given", count, memory.size());
  std::shared_ptr<ProgramState> state(new ProgramState(program));
  state->external_ = true;
  for (size_t i = 0; i < count; ++i) {
    ET_CHECK_OR_RETURN(memory[i].size() == program.mutable_buffer_size(i) && (memory[i].data() || !memory[i].size()),
                       Error::InvalidArgument, "mutable buffer %zu ('%s'): %llu bytes declared, %zu given", i,
                       program.mutable_buffer_name(i), static_cast<unsigned long long>(program.mutable_buffer_size(i)),
                       memory[i].size());
    state->buffers_.emplace_back(memory[i].data(), keep);
    state->names_.emplace_back(program.mutable_buffer_name(i));
    state->sizes_.push_back(memory[i].size());
    state->initial_.emplace_back();
  }
  state->copies_.resize(count);
  return state;
}

Result<size_t> ProgramState::find(const char* name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return i;
  }
  return ET_ERROR(Error::NotFound, "the program state has no buffer '%s'", name);
}

Error ProgramState::set_device_copy(size_t index, std::unique_ptr<DeviceCopy> copy) {
  ET_CHECK_OR_RETURN(index < buffers_.size() && copy != nullptr && !external_, Error::InvalidArgument,
                     "no buffer %zu to copy", index);
  ET_CHECK_OR_RETURN(copies_[index] == nullptr, Error::InvalidArgument, "buffer '%s' has a device copy already",
                     names_[index].c_str());
  ET_CHECK_OR_RETURN(copy->memory().size() == sizes_[index], Error::InvalidArgument,
                     "buffer '%s': %zu bytes, its device copy %zu", names_[index].c_str(), sizes_[index],
                     copy->memory().size());
  ET_TRY(copy->upload(buffer(index)));
  copies_[index] = std::move(copy);
  return Error::Ok;
}

Result<Span<const uint8_t>> ProgramState::read(size_t index) {
  ET_CHECK_OR_RETURN(index < buffers_.size() && !external_, Error::InvalidArgument, "no buffer %zu to read", index);
  if (copies_[index] != nullptr) ET_TRY(copies_[index]->download(buffer(index)));
  return Span<const uint8_t>(buffers_[index].get(), sizes_[index]);
}

Error ProgramState::reset() {
  if (external_) return Error::Ok;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (sizes_[i] == 0) continue;
    if (initial_[i].size() == sizes_[i]) {
      std::memcpy(buffers_[i].get(), initial_[i].data(), sizes_[i]);
      if (copies_[i] != nullptr) ET_TRY(copies_[i]->upload(buffer(i)));
    } else {
      std::memset(buffers_[i].get(), 0, sizes_[i]);
      if (copies_[i] != nullptr) ET_TRY(copies_[i]->zero(buffer(i)));
    }
  }
  return Error::Ok;
}

}  // namespace runtime
}  // namespace executorch
