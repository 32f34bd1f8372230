#include <executorch/runtime/core/log.h>

#include <cstdarg>
#include <cstdio>
#include <string>

namespace executorch {
namespace runtime {
namespace {

// A hostile program's names end up in messages: the chain is capped.
constexpr size_t kMaxMessage = 2048;

thread_local std::string last_message;

std::string vformat(const char* format, va_list args) {
  char small[256];
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(small, sizeof(small), format, args);
  std::string out;
  if (n < 0) {
    out = format;
  } else if (static_cast<size_t>(n) < sizeof(small)) {
    out.assign(small, static_cast<size_t>(n));
  } else {
    out.resize(static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data(), out.size(), format, again);
    out.resize(static_cast<size_t>(n));
  }
  va_end(again);
  if (out.size() > kMaxMessage) out.resize(kMaxMessage);
  return out;
}

}  // namespace

const char* last_error_message() { return last_message.c_str(); }

Error set_error(Error error, const char* format, ...) {
  // Formatted aside first: the arguments may include last_error_message() itself.
  va_list args;
  va_start(args, format);
  std::string message = vformat(format, args);
  va_end(args);
  last_message = std::move(message);
  return error;
}

Error add_error_context(Error error, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::string context = vformat(format, args);
  va_end(args);
  const bool said = last_message == context ||
                    (last_message.size() > context.size() && last_message.compare(0, context.size(), context) == 0 &&
                     last_message[context.size()] == ':');
  if (last_message.empty()) {
    last_message = std::move(context);
  } else if (!said) {
    last_message = context + ": " + last_message;
    if (last_message.size() > kMaxMessage) last_message.resize(kMaxMessage);
  }
  return error;
}

void clear_error() { last_message.clear(); }

}  // namespace runtime
}  // namespace executorch
