// libFuzzer target: a .pte from arbitrary bytes, loaded and run as an untrusted program would be.
#include <cstddef>
#include <cstdint>

#include <executorch/tests/hostile/run_program.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  executorch::testing::RunOptions options;
  options.max_planned_bytes = 64 << 20;  // larger plans only cost the fuzzer time
  (void)executorch::testing::load_and_run(data, size, options);
  return 0;
}
