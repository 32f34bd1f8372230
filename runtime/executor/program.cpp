#include <executorch/runtime/executor/program.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/memory_limit.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/schema/program_generated.h>

namespace executorch {
namespace runtime {

namespace fb = executorch_flatbuffer;

namespace {

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

uint64_t read_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The FlatBuffers verifier checks vectors for 4-byte alignment only; vectors of 8-byte numbers
// are read in place (sizes, int lists, buffer sizes), so they must be 8-byte aligned too.
template <typename T>
bool aligned(const flatbuffers::Vector<T>* v) {
  return v == nullptr || reinterpret_cast<uintptr_t>(v->data()) % alignof(T) == 0;
}

Error check_vector_alignment(const fb::Program* program) {
  for (const fb::ExecutionPlan* plan : *program->execution_plan()) {
    ET_CHECK_OR_RETURN(aligned(plan->non_const_buffer_sizes()), Error::InvalidProgram,
                       "planned buffer sizes are misaligned");
    if (plan->values() == nullptr) continue;
    for (size_t i = 0; i < plan->values()->size(); ++i) {
      const fb::EValue* v = plan->values()->Get(static_cast<flatbuffers::uoffset_t>(i));
      bool ok = true;
      if (const auto* t = v->val_as_Tensor()) ok = aligned(t->sizes());
      if (const auto* l = v->val_as_IntList()) ok = aligned(l->items());
      if (const auto* l = v->val_as_DoubleList()) ok = aligned(l->items());
      ET_CHECK_OR_RETURN(ok, Error::InvalidProgram, "value %zu: a list of 8-byte numbers is misaligned", i);
    }
  }
  return Error::Ok;
}

}  // namespace

Result<std::unique_ptr<Program>> Program::load(std::unique_ptr<DataLoader> loader) {
  if (loader == nullptr) return ET_ERROR(Error::InvalidArgument, "no data loader");
  const Span<const uint8_t> file = loader->data();
  ET_CHECK_OR_RETURN(file.size() >= kProgramHeaderSize, Error::InvalidProgram,
                     "file of %zu bytes is shorter than the %zu-byte header", file.size(), kProgramHeaderSize);
  ET_CHECK_OR_RETURN(std::memcmp(file.data(), kProgramMagic, 4) == 0, Error::InvalidProgram,
                     "not an executorch program (bad magic)");
  ET_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(file.data()) % kSegmentAlignment == 0, Error::InvalidArgument,
                     "program buffer is not %zu-byte aligned", kSegmentAlignment);
  const uint32_t container_version = read_u32(file.data() + 4);
  ET_CHECK_OR_RETURN(container_version == kProgramContainerVersion, Error::InvalidProgram,
                     "container version %u is not supported (expected %u)", container_version,
                     kProgramContainerVersion);
  const uint64_t program_size = read_u64(file.data() + 8);
  const uint64_t segment_base = read_u64(file.data() + 16);
  const uint64_t segment_size = read_u64(file.data() + 24);
  const uint64_t available = file.size() - kProgramHeaderSize;
  ET_CHECK_OR_RETURN(program_size > 0 && program_size <= available, Error::InvalidProgram,
                     "program size %llu does not fit in a file of %zu bytes",
                     static_cast<unsigned long long>(program_size), file.size());
  ET_CHECK_OR_RETURN(segment_base % kSegmentAlignment == 0 && segment_base >= kProgramHeaderSize + program_size &&
                         segment_base <= file.size() && segment_size <= file.size() - segment_base,
                     Error::InvalidProgram, "segment area [%llu, +%llu) is misaligned or outside the file",
                     static_cast<unsigned long long>(segment_base), static_cast<unsigned long long>(segment_size));

  const uint8_t* fb_data = file.data() + kProgramHeaderSize;
  flatbuffers::Verifier::Options options;
  options.max_depth = 64;
  options.max_tables = 10'000'000;
  flatbuffers::Verifier verifier(fb_data, static_cast<size_t>(program_size), options);
  ET_CHECK_OR_RETURN(fb::ProgramBufferHasIdentifier(fb_data), Error::InvalidProgram, "FlatBuffer identifier is not %s",
                     fb::ProgramIdentifier());
  // The verifier says only pass or fail; name what it checks so the reader knows what broke.
  ET_CHECK_OR_RETURN(fb::VerifyProgramBuffer(verifier), Error::InvalidProgram,
                     "the FlatBuffer (%llu bytes at file offset %zu) failed verification: an offset, vector "
                     "length or string points outside it, a table is misaligned, or tables nest deeper than %d "
                     "(truncated or corrupt)",
                     static_cast<unsigned long long>(program_size), kProgramHeaderSize,
                     static_cast<int>(options.max_depth));
  const fb::Program* program = fb::GetProgram(fb_data);
  ET_CHECK_OR_RETURN(program->version() == kProgramVersion, Error::InvalidProgram,
                     "program version %u is not supported (expected %u)", program->version(), kProgramVersion);
  const Span<const uint8_t> segments(file.data() + segment_base, static_cast<size_t>(segment_size));
  if (const auto* list = program->segments()) {
    for (size_t i = 0; i < list->size(); ++i) {
      const fb::DataSegment* s = list->Get(i);
      ET_CHECK_OR_RETURN(s->offset() % kSegmentAlignment == 0 && s->offset() <= segments.size() &&
                             s->size() <= segments.size() - s->offset(),
                         Error::InvalidProgram, "segment %zu [%llu, +%llu) is misaligned or outside the segment area",
                         i, static_cast<unsigned long long>(s->offset()), static_cast<unsigned long long>(s->size()));
    }
    // Segments are disjoint: a file whose tensors share bytes with a delegate payload is malformed.
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const fb::DataSegment* s : *list) {
      if (s->size() > 0) spans.emplace_back(s->offset(), s->offset() + s->size());
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      ET_CHECK_OR_RETURN(
          spans[i].first >= spans[i - 1].second, Error::InvalidProgram,
          "segments [%llu, %llu) and [%llu, %llu) overlap", static_cast<unsigned long long>(spans[i - 1].first),
          static_cast<unsigned long long>(spans[i - 1].second), static_cast<unsigned long long>(spans[i].first),
          static_cast<unsigned long long>(spans[i].second));
    }
  }
  ET_CHECK_OR_RETURN(program->execution_plan() != nullptr && program->execution_plan()->size() > 0,
                     Error::InvalidProgram, "program has no methods");
  ET_TRY(check_vector_alignment(program));
  return std::unique_ptr<Program>(new Program(std::move(loader), program, segments));
}

size_t Program::num_methods() const { return program_->execution_plan()->size(); }

const char* Program::method_name(size_t index) const {
  if (index >= num_methods()) return nullptr;
  const auto* name = program_->execution_plan()->Get(index)->name();
  return name ? name->c_str() : "";
}

bool Program::has_method(const char* name) const {
  for (size_t i = 0; i < num_methods(); ++i) {
    if (std::strcmp(method_name(i), name) == 0) return true;
  }
  return false;
}

size_t Program::num_mutable_buffers() const {
  const auto* list = program_->mutable_buffers();
  return list ? list->size() : 0;
}

const char* Program::mutable_buffer_name(size_t index) const {
  const auto* name = program_->mutable_buffers()->Get(static_cast<flatbuffers::uoffset_t>(index))->name();
  return name ? name->c_str() : "";
}

uint64_t Program::mutable_buffer_size(size_t index) const {
  return program_->mutable_buffers()->Get(static_cast<flatbuffers::uoffset_t>(index))->size();
}

const char* Program::metadata(const char* key) const {
  if (const auto* list = program_->metadata()) {
    for (const fb::ProgramMetadata* m : *list) {
      if (m->key() && m->value() && std::strcmp(m->key()->c_str(), key) == 0) return m->value()->c_str();
    }
  }
  return nullptr;
}

Result<Span<const uint8_t>> Program::segment_data(size_t index, uint64_t offset, uint64_t size) const {
  const auto* list = program_->segments();
  ET_CHECK_OR_RETURN(list != nullptr && index < list->size(), Error::InvalidProgram, "segment %zu does not exist",
                     index);
  const fb::DataSegment* s = list->Get(static_cast<flatbuffers::uoffset_t>(index));
  ET_CHECK_OR_RETURN(offset <= s->size() && size <= s->size() - offset, Error::InvalidProgram,
                     "bytes [%llu, +%llu) lie outside segment %zu of %llu bytes",
                     static_cast<unsigned long long>(offset), static_cast<unsigned long long>(size), index,
                     static_cast<unsigned long long>(s->size()));
  return Span<const uint8_t>(segments_.data() + s->offset() + offset, static_cast<size_t>(size));
}

Result<std::vector<uint64_t>> Program::planned_buffer_sizes(const char* name) const {
  for (size_t i = 0; i < num_methods(); ++i) {
    if (std::strcmp(method_name(i), name) == 0) {
      std::vector<uint64_t> sizes;
      if (const auto* list =
              program_->execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(i))->non_const_buffer_sizes()) {
        sizes.assign(list->begin(), list->end());
      }
      return sizes;
    }
  }
  return ET_ERROR(Error::NotFound, "the program has no method named '%s'", name);
}

Result<uint64_t> Program::planned_bytes(const char* name) const {
  ET_TRY_ASSIGN(const auto sizes, planned_buffer_sizes(name));
  return sum_saturating(sizes);
}

Result<std::unique_ptr<Method>> Program::load_method(const char* name, const MemoryManager* memory_manager,
                                                     std::shared_ptr<ProgramState> state) const {
  for (size_t i = 0; i < num_methods(); ++i) {
    if (std::strcmp(method_name(i), name) == 0) {
      return Method::load(*this, program_->execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(i)),
                          memory_manager, std::move(state));
    }
  }
  return ET_ERROR(Error::NotFound, "the program has no method named '%s'", name);
}

}  // namespace runtime
}  // namespace executorch
