#pragma once

// What the example programs share on the command line: the usage line and the error exits.
#include <cstdio>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/log.h>

namespace executorch {
namespace examples {

// "usage: PROGRAM OPTIONS" on stderr; returns exit status 2.
inline int usage(const char* argv0, const char* options) {
  std::fprintf(stderr, "usage: %s %s\n", argv0, options);
  return 2;
}

// "error: WHAT" on stderr; returns exit status 1.
inline int fail(const char* what) {
  std::fprintf(stderr, "error: %s\n", what);
  return 1;
}

// "error: WHAT: ERROR: the runtime's message" on stderr; returns exit status 1.
inline int fail(const char* what, runtime::Error e) {
  std::fprintf(stderr, "error: %s: %s: %s\n", what, runtime::to_string(e), runtime::last_error_message());
  return 1;
}

}  // namespace examples
}  // namespace executorch
