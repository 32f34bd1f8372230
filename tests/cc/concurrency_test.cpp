// Concurrency (run under --config=tsan too): many threads each run their own Method of one shared
// Program, with the thread pool busy inside the kernels, while other threads register backends and
// look them up. Every result must be right and the sanitizer must see no race.
#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/tests/cc/check.h>
#include <executorch/tests/cc/program_builder.h>

namespace rt = executorch::runtime;

namespace {

class Idle final : public rt::BackendInterface {
 public:
  bool is_available() const override { return false; }
  rt::Result<rt::DelegateHandle*> init(rt::BackendInitContext&, rt::Span<const uint8_t>,
                                       rt::Span<const rt::CompileSpec>) const override {
    return rt::Error::NotSupported;
  }
  rt::Error execute(rt::DelegateHandle*, rt::Span<rt::EValue*>) const override { return rt::Error::NotSupported; }
  void destroy(rt::DelegateHandle*) const override {}
};

}  // namespace

int main() {
  auto program = executorch::testing::load(executorch::testing::build_program());
  CHECK(program.ok());
  if (!program.ok()) return executorch::testing::finish("concurrency_test");
  const rt::Program& shared = *program.get();

  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto method = shared.load_method("forward");
      if (!method.ok()) {
        ++errors;
        return;
      }
      std::vector<int64_t> sizes = {2, 3}, strides = {3, 1};
      for (int i = 0; i < 300; ++i) {
        float x[6], y[6];
        for (int k = 0; k < 6; ++k) x[k] = static_cast<float>(t * 1000 + i + k), y[k] = -static_cast<float>(k);
        rt::Tensor tx(rt::ScalarType::Float, 2, sizes.data(), strides.data(), x);
        rt::Tensor ty(rt::ScalarType::Float, 2, sizes.data(), strides.data(), y);
        if (method.get()->set_input(0, rt::EValue(tx)) != rt::Error::Ok ||
            method.get()->set_input(1, rt::EValue(ty)) != rt::Error::Ok || method.get()->execute() != rt::Error::Ok) {
          ++errors;
          continue;
        }
        const float* out = method.get()->get_output(0).to_tensor().data_ptr<float>();
        for (int k = 0; k < 6; ++k) {
          if (std::fabs(out[k] - std::max(0.f, x[k] + y[k])) > 1e-6f) ++wrong;
        }
        // Work for the pool from every thread at once.
        std::atomic<int64_t> sum{0};
        executorch::extension::threadpool::parallel_for(0, 4096, 64, [&](int64_t b, int64_t e) { sum += e - b; });
        if (sum != 4096) ++wrong;
      }
    });
  }
  static Idle idle;
  static std::string names[4 * 3];
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        names[t * 3 + i] = "Idle" + std::to_string(t * 3 + i);
        if (rt::register_backend({names[t * 3 + i].c_str(), &idle}) != rt::Error::Ok) ++errors;
      }
    });
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        const size_t n = rt::get_num_registered_backends();
        for (size_t k = 0; k < n; ++k) {
          const char* name = rt::get_backend_name(k);
          if (name == nullptr || rt::get_backend_class(name) == nullptr) ++wrong;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(errors == 0);
  CHECK(wrong == 0);
  CHECK(rt::get_num_registered_backends() == 12);
  return executorch::testing::finish("concurrency_test");
}
