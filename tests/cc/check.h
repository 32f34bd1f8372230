#pragma once

// Minimal assertions for C++ tests (plain cc_test binaries: exit 0 passes). A failed CHECK prints
// the expression and location and marks the test failed; the test keeps running.
#include <cstdio>

namespace executorch {
namespace testing {

inline int& failures() {
  static int count = 0;
  return count;
}

inline int finish(const char* name) {
  if (failures()) {
    std::printf("%s: %d check(s) FAILED\n", name, failures());
    return 1;
  }
  std::printf("%s: all checks passed\n", name);
  return 0;
}

}  // namespace testing
}  // namespace executorch

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::printf("%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++::executorch::testing::failures();                                 \
    }                                                                      \
  } while (0)
