#include <executorch/runtime/executor/data_loader.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <executorch/runtime/core/log.h>

namespace executorch {
namespace runtime {

DataLoader::~DataLoader() = default;

Result<std::unique_ptr<OwnedBufferDataLoader>> OwnedBufferDataLoader::copy_of(const void* data, size_t size) {
  // 64-byte alignment covers the FlatBuffer's and every tensor's needs.
  const size_t rounded = (size + 63) / 64 * 64;
  auto* bytes = static_cast<uint8_t*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (bytes == nullptr) {
    return ET_ERROR(Error::MemoryAllocationFailed, "cannot allocate %zu bytes for a program", size);
  }
  if (size) std::memcpy(bytes, data, size);
  return std::unique_ptr<OwnedBufferDataLoader>(new OwnedBufferDataLoader(bytes, size));
}

OwnedBufferDataLoader::~OwnedBufferDataLoader() { std::free(bytes_); }

Result<std::unique_ptr<FileDataLoader>> FileDataLoader::from(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return ET_ERROR(Error::NotFound, "cannot open %s: %s", path, std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return ET_ERROR(Error::InvalidArgument, "%s is not a regular file", path);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return ET_ERROR(Error::InvalidProgram, "%s is empty", path);
  }
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    return ET_ERROR(Error::MemoryAllocationFailed, "cannot map %s: %s", path, std::strerror(errno));
  }
  return std::unique_ptr<FileDataLoader>(new FileDataLoader(map, size));
}

FileDataLoader::~FileDataLoader() { ::munmap(map_, size_); }

}  // namespace runtime
}  // namespace executorch
