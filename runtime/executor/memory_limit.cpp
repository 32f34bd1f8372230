#include <executorch/runtime/executor/memory_limit.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include <executorch/runtime/core/log.h>

namespace executorch {
namespace runtime {

namespace {

// Parsed by hand: glibc >= 2.38 headers redirect strtoull to a symbol older systems lack.
uint64_t limit_from_environment() {
  const char* text = std::getenv("EXECUTORCH_MAX_PLANNED_BYTES");
  if (text == nullptr || *text == '\0') return 0;
  uint64_t value = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    const bool digit = *p >= '0' && *p <= '9';
    if (!digit || value > (UINT64_MAX - 9) / 10) {
      std::fprintf(stderr, "executorch: EXECUTORCH_MAX_PLANNED_BYTES=%s is not a number of bytes; no limit is set\n",
                   text);
      return 0;
    }
    value = value * 10 + static_cast<uint64_t>(*p - '0');
  }
  return value;
}

std::atomic<uint64_t>& limit() {
  static std::atomic<uint64_t> value{limit_from_environment()};
  return value;
}

}  // namespace

uint64_t max_planned_bytes() { return limit().load(std::memory_order_relaxed); }

void set_max_planned_bytes(uint64_t bytes) { limit().store(bytes, std::memory_order_relaxed); }

Error check_planned_bytes(uint64_t bytes, const char* what) {
  const uint64_t cap = max_planned_bytes();
  ET_CHECK_OR_RETURN(cap == 0 || bytes <= cap, Error::MemoryAllocationFailed,
                     "%s plans %llu bytes, more than the limit of %llu (EXECUTORCH_MAX_PLANNED_BYTES, "
                     "Runtime.max_planned_bytes)",
                     what, static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(cap));
  return Error::Ok;
}

}  // namespace runtime
}  // namespace executorch
