// A library that exports only part of the container ABI (no AOTInductorModelContainerRun): the
// loader must refuse it by name.
#include <cstddef>
#include <cstdint>

extern "C" __attribute__((visibility("default"))) int32_t AOTInductorModelContainerCreateWithDevice(void**, size_t,
                                                                                                    const char*,
                                                                                                    const char*) {
  return 1;
}
