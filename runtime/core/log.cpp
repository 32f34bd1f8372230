#include <executorch/runtime/core/log.h>

#include <cstdarg>
#include <cstdio>

namespace executorch {
namespace runtime {
namespace {
thread_local char last_message[512] = "";
}  // namespace

const char* last_error_message() { return last_message; }

Error set_error(Error error, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(last_message, sizeof(last_message), format, args);
  va_end(args);
  return error;
}

void clear_error() { last_message[0] = '\0'; }

}  // namespace runtime
}  // namespace executorch
