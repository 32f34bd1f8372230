#pragma once

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace runtime {

// The detail behind the last error this thread returned ("operator aten::foo.out is not
// registered"). Error codes say what kind of failure; this says which thing failed. Never null.
EXECUTORCH_API const char* last_error_message();

// Records a printf-style message as this thread's last error detail and returns `error`.
EXECUTORCH_API Error set_error(Error error, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Puts a printf-style context before this thread's last error detail and returns `error`, so that
// each layer a failure passes through says where it was ("method 'forward': instruction 3
// (aten::mm.out): ...") once: a context the detail already starts with is not repeated.
EXECUTORCH_API Error add_error_context(Error error, const char* format, ...) __attribute__((format(printf, 2, 3)));

EXECUTORCH_API void clear_error();

}  // namespace runtime
}  // namespace executorch

// return ET_ERROR(Error::InvalidArgument, "input %zu has %zu dims, expected %zu", i, got, want);
#define ET_ERROR(error, ...) ::executorch::runtime::set_error((error), __VA_ARGS__)

// return ET_ERROR_CONTEXT(e, "instruction %zu (%s)", k, name);  // after a callee's ET_ERROR
#define ET_ERROR_CONTEXT(error, ...) ::executorch::runtime::add_error_context((error), __VA_ARGS__)

// Fails the enclosing function with `error` and a message when `cond` does not hold.
#define ET_CHECK_OR_RETURN(cond, error, ...) \
  do {                                       \
    if (!(cond)) {                           \
      return ET_ERROR((error), __VA_ARGS__); \
    }                                        \
  } while (0)
