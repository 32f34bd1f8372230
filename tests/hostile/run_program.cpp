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
  ET_TRY_ASSIGN(auto loader, runtime::OwnedBufferDataLoader::copy_of(data, size));
  ET_TRY_ASSIGN(auto program, runtime::Program::load(std::move(loader)));
  for (size_t i = 0; i < program->num_methods(); ++i) {
    const char* name = program->method_name(i);
    if (options.max_planned_bytes != 0) {
      ET_TRY_ASSIGN(const uint64_t total, program->planned_bytes(name));
      if (total > options.max_planned_bytes) {
        return ET_ERROR(Error::MemoryAllocationFailed, "planned memory over the harness limit");
      }
    }
    ET_TRY_ASSIGN(auto method, program->load_method(name));
    runtime::Method& m = *method;
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
