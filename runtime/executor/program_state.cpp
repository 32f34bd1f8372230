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
}  // namespace

Result<std::shared_ptr<ProgramState>> ProgramState::create(const Program& program) {
  std::shared_ptr<ProgramState> state(new ProgramState(program));
  const auto* list = program.flatbuffer()->mutable_buffers();
  const size_t count = list ? list->size() : 0;
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i)
    total = add_saturating(total, list->Get(static_cast<flatbuffers::uoffset_t>(i))->size());
  ET_TRY(check_planned_bytes(total, "the program state (its mutable buffers)"));
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
    state->names_.emplace_back(b->name() ? b->name()->str() : "");
    state->sizes_.push_back(static_cast<size_t>(size));
    state->initial_.push_back(initial);
  }
  state->reset();
  return state;
}

void ProgramState::reset() {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (sizes_[i] == 0) continue;
    if (initial_[i].size() == sizes_[i]) {
      std::memcpy(buffers_[i].get(), initial_[i].data(), sizes_[i]);
    } else {
      std::memset(buffers_[i].get(), 0, sizes_[i]);
    }
  }
}

}  // namespace runtime
}  // namespace executorch
