#pragma once

// Reporting a skipped C++ test to Bazel: a cc_test has no skip status of its own, so the test writes
// the JUnit XML that Bazel would otherwise generate, with the case marked skipped and the reason.
#include <cstdio>
#include <cstdlib>

namespace executorch {
namespace testing {

// Prints "SKIPPED: <reason>", records it in $XML_OUTPUT_FILE and returns 0 for main() to return.
inline int skip_test(const char* name, const char* reason) {
  std::printf("SKIPPED: %s\n", reason);
  if (const char* xml = std::getenv("XML_OUTPUT_FILE")) {
    if (std::FILE* f = std::fopen(xml, "w")) {
      std::fprintf(f,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites><testsuite name=\"%s\" "
                   "tests=\"1\" skipped=\"1\"><testcase name=\"%s\" classname=\"%s\"><skipped "
                   "message=\"%s\"/></testcase></testsuite></testsuites>\n",
                   name, name, name, reason);
      std::fclose(f);
    }
  }
  return 0;
}

}  // namespace testing
}  // namespace executorch
