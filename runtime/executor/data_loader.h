#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <executorch/runtime/core/result.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace runtime {

// The bytes of a .pte file. The whole file is addressable; Program bounds-checks every access.
class EXECUTORCH_API DataLoader {
 public:
  virtual ~DataLoader();
  virtual Span<const uint8_t> data() const = 0;
};

// Memory the caller owns and keeps alive (and 16-byte aligned) while the Program lives.
class EXECUTORCH_API BufferDataLoader final : public DataLoader {
 public:
  BufferDataLoader(const void* data, size_t size) : data_(static_cast<const uint8_t*>(data), size) {}
  Span<const uint8_t> data() const override { return data_; }

 private:
  Span<const uint8_t> data_;
};

// A copy of a buffer, owned and suitably aligned.
class EXECUTORCH_API OwnedBufferDataLoader final : public DataLoader {
 public:
  static Result<std::unique_ptr<OwnedBufferDataLoader>> copy_of(const void* data, size_t size);
  ~OwnedBufferDataLoader() override;
  Span<const uint8_t> data() const override { return {bytes_, size_}; }

 private:
  OwnedBufferDataLoader(uint8_t* bytes, size_t size) : bytes_(bytes), size_(size) {}
  uint8_t* bytes_;
  size_t size_;
};

// A file mapped into memory (copy-on-write: nothing ever writes the file).
class EXECUTORCH_API FileDataLoader final : public DataLoader {
 public:
  static Result<std::unique_ptr<FileDataLoader>> from(const char* path);
  ~FileDataLoader() override;
  FileDataLoader(const FileDataLoader&) = delete;
  FileDataLoader& operator=(const FileDataLoader&) = delete;
  Span<const uint8_t> data() const override { return {static_cast<const uint8_t*>(map_), size_}; }

 private:
  FileDataLoader(void* map, size_t size) : map_(map), size_(size) {}
  void* map_;
  size_t size_;
};

}  // namespace runtime
}  // namespace executorch
