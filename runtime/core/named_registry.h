#pragma once

// A fixed-capacity, thread-safe table of entries with a `const char* name` member: the shape of the
// kernel registry and the backend registry. Internal to libexecutorch.so.1.
#include <cstddef>
#include <cstring>
#include <mutex>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/log.h>

namespace executorch {
namespace runtime {
namespace internal {

template <typename Entry, size_t Capacity>
class NamedRegistry {
 public:
  // `what` names the kind of entry in error messages ("kernel", "backend").
  explicit NamedRegistry(const char* what) : what_(what) {}

  // Errors: RegistrationAlreadyRegistered (name taken), RegistrationExceedingMaxKernels (full).
  Error add(const Entry& entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < size_; ++i) {
      if (std::strcmp(entries_[i].name, entry.name) == 0) {
        return set_error(Error::RegistrationAlreadyRegistered, "%s %s registered twice", what_, entry.name);
      }
    }
    if (size_ == Capacity) {
      return set_error(Error::RegistrationExceedingMaxKernels, "%s registry full at %zu", what_, size_);
    }
    entries_[size_++] = entry;
    return Error::Ok;
  }

  // A copy of the entry registered as `name`; false when there is none.
  bool find(const char* name, Entry* out) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < size_; ++i) {
      if (std::strcmp(entries_[i].name, name) == 0) {
        *out = entries_[i];
        return true;
      }
    }
    return false;
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return size_;
  }

  const char* name_at(size_t index) {
    std::lock_guard<std::mutex> lock(mutex_);
    return index < size_ ? entries_[index].name : nullptr;
  }

 private:
  const char* what_;
  std::mutex mutex_;
  Entry entries_[Capacity] = {};
  size_t size_ = 0;
};

}  // namespace internal
}  // namespace runtime
}  // namespace executorch
