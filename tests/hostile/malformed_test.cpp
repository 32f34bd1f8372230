// Every case of the malformed-program corpus through the C++ runtime: invalid programs must fail to
// load or run with an error and a message; damaged ones may run; nothing may crash, hang or leak
// (run under --config=asan to check the last).
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <executorch/runtime/core/log.h>
#include <executorch/tests/cc/check.h>
#include <executorch/tests/hostile/corpus.h>
#include <executorch/tests/hostile/run_program.h>

namespace rt = executorch::runtime;
namespace et = executorch::testing;

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : std::getenv("MALFORMED_CORPUS");
  std::vector<et::CorpusCase> corpus;
  if (path == nullptr || !et::read_corpus(path, &corpus)) {
    std::printf("cannot read the corpus %s\n", path ? path : "(none given)");
    return 1;
  }
  size_t refused = 0, damaged_ran = 0;
  for (const auto& c : corpus) {
    const rt::Error e = et::load_and_run(c.data.data(), c.data.size());
    if (e == rt::Error::Ok) {
      if (c.invalid) {
        std::printf("%s: invalid program loaded and ran\n", c.name.c_str());
        CHECK(e != rt::Error::Ok);
      }
      ++damaged_ran;
      continue;
    }
    ++refused;
    if (rt::last_error_message()[0] == '\0') {
      std::printf("%s: error %s without a message\n", c.name.c_str(), rt::to_string(e));
      CHECK(rt::last_error_message()[0] != '\0');
    }
  }
  std::printf("%zu cases: %zu refused with an error, %zu damaged programs ran\n", corpus.size(), refused, damaged_ran);
  CHECK(corpus.size() >= 300);
  return et::finish("malformed_test");
}
