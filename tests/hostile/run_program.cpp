#include <executorch/tests/hostile/run_program.h>

#include <cstring>
#include <vector>

#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/data_loader.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

namespace executorch {
namespace testing {

using runtime::Error;

Error load_and_run(const uint8_t* data, size_t size, const RunOptions& options) {
  auto loader = runtime::OwnedBufferDataLoader::copy_of(data, size);
  if (!loader.ok()) return loader.error();
  auto program = runtime::Program::load(std::move(loader.get()));
  if (!program.ok()) return program.error();
  for (size_t i = 0; i < program.get()->num_methods(); ++i) {
    const char* name = program.get()->method_name(i);
    if (options.max_planned_bytes != 0) {
      auto total = program.get()->planned_bytes(name);
      if (!total.ok()) return total.error();
      if (total.get() > options.max_planned_bytes) {
        return ET_ERROR(Error::MemoryAllocationFailed, "planned memory over the harness limit");
      }
    }
    auto method = program.get()->load_method(name);
    if (!method.ok()) return method.error();
    runtime::Method& m = *method.get();
    std::vector<std::vector<uint8_t>> storage(m.num_inputs());
    for (size_t k = 0; k < m.num_inputs(); ++k) {
      const runtime::EValue& declared = m.input(k);
      if (!declared.is_tensor()) continue;
      runtime::Tensor t = declared.to_tensor();
      storage[k].assign(t.nbytes(), 0);  // zeros: in range for indices, finite for floats
      t.set_data(storage[k].data());
      const Error e = m.set_input(k, runtime::EValue(t));
      if (e != Error::Ok) return e;
    }
    const Error e = m.execute();
    if (e != Error::Ok) return e;
  }
  return Error::Ok;
}

}  // namespace testing
}  // namespace executorch
