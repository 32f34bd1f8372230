// XnnpackBackend on payloads built here: out = relu(x + y) (program_builder's program) becomes an
// XNNPACK subgraph that computes it, again after the thread pool is replaced; arguments of the
// wrong shape, and payloads with an operator it does not run, are errors naming what. A two-layer
// MLP with constant weights (make_xnnpack_payload.py: addmm, relu, mm, a residual add) matches its
// float64 reference.
//
//   xnnpack_backend_test PAYLOAD.pte REFERENCE.bin
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include <executorch/backends/xnnpack/runtime/xnnpack_backend.h>
#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/log.h>
#include <executorch/tests/cc/check.h>
#include <executorch/tests/cc/program_builder.h>

namespace {

namespace rt = executorch::runtime;
using executorch::testing::build_program;
using rt::Error;

bool message_contains(const char* text) { return std::strstr(rt::last_error_message(), text) != nullptr; }

void test_add_relu() {
  rt::BackendInterface* backend = rt::get_backend_class("XnnpackBackend");
  CHECK(backend != nullptr && backend->is_available());
  if (backend == nullptr) return;
  const std::vector<uint8_t> payload = build_program();
  rt::BackendInitContext context;
  auto handle = backend->init(context, {payload.data(), payload.size()}, {});
  CHECK(handle.ok());
  if (!handle.ok()) return (void)std::printf("init: %s\n", rt::last_error_message());
  std::vector<int64_t> sizes = {2, 3}, strides = {3, 1}, wrong = {3, 2};
  float x[6] = {1, -2, 3, -4, 5, -6}, y[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 10}, out[6] = {};
  rt::Tensor tx(rt::ScalarType::Float, 2, sizes.data(), strides.data(), x),
      ty(rt::ScalarType::Float, 2, sizes.data(), strides.data(), y),
      to(rt::ScalarType::Float, 2, sizes.data(), strides.data(), out),
      tw(rt::ScalarType::Float, 2, wrong.data(), strides.data(), out);
  rt::EValue ex(tx), ey(ty), eo(to), ew(tw);
  const float want[6] = {1.5f, 0, 3.5f, 0, 5.5f, 4};
  for (size_t threads : {2, 1}) {  // a new pool: the runtime is made again on it
    executorch::extension::threadpool::set_num_threads(threads);
    std::memset(out, 0xff, sizeof(out));
    rt::EValue* args[] = {&ex, &ey, &eo};
    CHECK(backend->execute(handle.get(), {args, 3}) == Error::Ok);
    for (int i = 0; i < 6; ++i) CHECK(std::fabs(out[i] - want[i]) < 1e-6f);
  }
  rt::EValue* bad[] = {&ex, &ey, &ew};
  CHECK(backend->execute(handle.get(), {bad, 3}) == Error::InvalidArgument && message_contains("argument 2 differs"));
  rt::EValue* few[] = {&ex, &ey};
  CHECK(backend->execute(handle.get(), {few, 2}) == Error::InvalidArgument && message_contains("2 arguments"));
  backend->destroy(handle.get());

  executorch::testing::Options other;
  other.op = "aten::masked_fill", other.overload = "Scalar";  // a CPU kernel, no XNNPACK node
  const std::vector<uint8_t> refused = build_program(other);
  auto none = backend->init(context, {refused.data(), refused.size()}, {});
  if (none.ok() || none.error() != Error::NotSupported) std::printf("refused: %s\n", rt::last_error_message());
  CHECK(!none.ok() && none.error() == Error::NotSupported && message_contains("does not run aten::masked_fill.Scalar"));
  const std::vector<uint8_t> truncated(payload.begin(), payload.begin() + static_cast<long>(payload.size() / 2));
  CHECK(!backend->init(context, {truncated.data(), truncated.size()}, {}).ok());
}

std::vector<uint8_t> read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void test_mlp(const char* payload_path, const char* reference_path) {
  rt::BackendInterface* backend = rt::get_backend_class("XnnpackBackend");
  const std::vector<uint8_t> payload = read_file(payload_path), reference = read_file(reference_path);
  CHECK(backend != nullptr && !payload.empty() && reference.size() == 2 * 3 * 8 * sizeof(float));
  if (backend == nullptr || reference.size() != 2 * 3 * 8 * sizeof(float)) return;
  rt::BackendInitContext context;
  auto handle = backend->init(context, {payload.data(), payload.size()}, {});
  CHECK(handle.ok());
  if (!handle.ok()) return (void)std::printf("init: %s\n", rt::last_error_message());
  std::vector<float> x(24), want(24), out(24, NAN);
  std::memcpy(x.data(), reference.data(), 24 * sizeof(float));
  std::memcpy(want.data(), reference.data() + 24 * sizeof(float), 24 * sizeof(float));
  std::vector<int64_t> sizes = {3, 8}, strides = {8, 1};
  rt::Tensor tx(rt::ScalarType::Float, 2, sizes.data(), strides.data(), x.data()),
      to(rt::ScalarType::Float, 2, sizes.data(), strides.data(), out.data());
  rt::EValue ex(tx), eo(to);
  rt::EValue* args[] = {&ex, &eo};
  CHECK(backend->execute(handle.get(), {args, 2}) == Error::Ok);
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double diff = std::fabs(out[i] - want[i]);
    if (!(diff <= worst)) worst = std::isnan(diff) ? INFINITY : diff;
  }
  std::printf("MLP through XnnpackBackend: worst |ours - float64| = %.3g\n", worst);
  CHECK(worst < 1e-4);
  backend->destroy(handle.get());
}

}  // namespace

int main(int argc, char** argv) {
  test_add_relu();
  CHECK(argc == 3);
  if (argc == 3) test_mlp(argv[1], argv[2]);
  return executorch::testing::finish("xnnpack_backend_test");
}
