// main() for fuzz targets built without libFuzzer: runs LLVMFuzzerTestOneInput on each file named
// on the command line, or on each file of each directory named, so that seeds and minimized
// crashers run as ordinary tests (also under --config=asan and ubsan).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int run_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 1;
  }
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  size_t count = 0;
  int failed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) failed |= run_file(entry.path()), ++count;
      }
    } else {
      failed |= run_file(arg), ++count;
    }
  }
  std::printf("replayed %zu inputs without a crash\n", count);
  return failed || count == 0;
}
