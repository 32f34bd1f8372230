#include <executorch/runtime/core/log.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace executorch {
namespace runtime {
namespace {
thread_local char last_message[512] = "";
}  // namespace

const char* last_error_message() { return last_message; }

Error set_error(Error error, const char* format, ...) {
  // Formatted aside first: the arguments may include last_error_message() itself.
  char message[sizeof(last_message)];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  std::memcpy(last_message, message, sizeof(message));
  return error;
}

void clear_error() { last_message[0] = '\0'; }

}  // namespace runtime
}  // namespace executorch
