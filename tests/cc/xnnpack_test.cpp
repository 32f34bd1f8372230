// XNNPACK as built from Debian's source tarball (tools/debian/xnnpack.BUILD), on our thread pool: a
// subgraph of a fully connected layer (with bias) and a clamp, made into a runtime with a workspace
// and a weights cache, run on threadpool::pthreadpool_handle(), against a loop in double. Rows
// and features off the microkernels' tiles; run twice (the second run reuses the packed weights).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <xnnpack.h>

#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/tests/cc/check.h>

namespace {

constexpr size_t kRows = 5, kIn = 37, kOut = 19;
constexpr float kLow = -1.5f, kHigh = 2.f;

void run_once(xnn_runtime_t runtime, const std::vector<float>& x, const std::vector<double>& want) {
  std::vector<float> y(kRows * kOut, NAN);
  const xnn_external_value values[] = {{0, const_cast<float*>(x.data())}, {1, y.data()}};
  CHECK(xnn_reshape_runtime(runtime) == xnn_status_success);
  CHECK(xnn_setup_runtime_v2(runtime, 2, values) == xnn_status_success);
  CHECK(xnn_invoke_runtime(runtime) == xnn_status_success);
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double diff = std::fabs(y[i] - want[i]);
    if (!(diff <= worst)) worst = std::isnan(diff) ? INFINITY : diff;  // NaN (unwritten) counts as wrong
  }
  std::printf("fully connected + clamp: worst |xnnpack - reference| = %.3g\n", worst);
  CHECK(worst < 1e-4);
}

}  // namespace

int main() {
  namespace tp = executorch::extension::threadpool;
  tp::set_num_threads(2);
  CHECK(xnn_initialize(nullptr) == xnn_status_success);

  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(kRows * kIn), w(kOut * kIn), b(kOut);
  for (auto* v : {&x, &w, &b}) {
    for (float& e : *v) e = d(rng);
  }
  std::vector<double> want(kRows * kOut);
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t o = 0; o < kOut; ++o) {
      double acc = b[o];
      for (size_t i = 0; i < kIn; ++i) acc += double(x[r * kIn + i]) * w[o * kIn + i];
      want[r * kOut + o] = std::min<double>(kHigh, std::max<double>(kLow, acc));
    }
  }

  xnn_subgraph_t graph = nullptr;
  CHECK(xnn_create_subgraph(2, 0, &graph) == xnn_status_success);
  const size_t x_dims[] = {kRows, kIn}, w_dims[] = {kOut, kIn}, b_dims[] = {kOut}, y_dims[] = {kRows, kOut};
  uint32_t xi = 0, wi = 0, bi = 0, hi = 0, yi = 0;
  CHECK(xnn_define_tensor_value(graph, xnn_datatype_fp32, 2, x_dims, nullptr, 0, XNN_VALUE_FLAG_EXTERNAL_INPUT, &xi) ==
        xnn_status_success);
  CHECK(xnn_define_tensor_value(graph, xnn_datatype_fp32, 2, w_dims, w.data(), XNN_INVALID_VALUE_ID, 0, &wi) ==
        xnn_status_success);
  CHECK(xnn_define_tensor_value(graph, xnn_datatype_fp32, 1, b_dims, b.data(), XNN_INVALID_VALUE_ID, 0, &bi) ==
        xnn_status_success);
  CHECK(xnn_define_tensor_value(graph, xnn_datatype_fp32, 2, y_dims, nullptr, XNN_INVALID_VALUE_ID, 0, &hi) ==
        xnn_status_success);
  CHECK(xnn_define_tensor_value(graph, xnn_datatype_fp32, 2, y_dims, nullptr, 1, XNN_VALUE_FLAG_EXTERNAL_OUTPUT, &yi) ==
        xnn_status_success);
  CHECK(xnn_define_fully_connected(graph, -INFINITY, INFINITY, xi, wi, bi, hi, 0) == xnn_status_success);
  xnn_unary_params clamp{};
  clamp.clamp.min = kLow, clamp.clamp.max = kHigh;
  CHECK(xnn_define_unary(graph, xnn_unary_clamp, &clamp, hi, yi, 0) == xnn_status_success);

  xnn_workspace_t workspace = nullptr;
  xnn_weights_cache_t cache = nullptr;
  xnn_runtime_t runtime = nullptr;
  CHECK(xnn_create_workspace(&workspace) == xnn_status_success);
  CHECK(xnn_create_weights_cache(&cache) == xnn_status_success);
  auto* pool = static_cast<pthreadpool_t>(tp::pthreadpool_handle());
  CHECK(pool != nullptr && pthreadpool_get_threads_count(pool) == 2);
  CHECK(xnn_create_runtime_v4(graph, cache, workspace, pool, 0, &runtime) == xnn_status_success);
  CHECK(runtime != nullptr);
  // The weights are packed into the cache while the runtime is made; it is then sealed for reading.
  CHECK(xnn_finalize_weights_cache(cache, xnn_weights_cache_finalization_kind_hard) == xnn_status_success);
  if (runtime != nullptr) {
    run_once(runtime, x, want);
    run_once(runtime, x, want);
    CHECK(xnn_delete_runtime(runtime) == xnn_status_success);
  }
  CHECK(xnn_delete_weights_cache(cache) == xnn_status_success);
  CHECK(xnn_release_workspace(workspace) == xnn_status_success);
  CHECK(xnn_delete_subgraph(graph) == xnn_status_success);
  CHECK(xnn_deinitialize() == xnn_status_success);
  return executorch::testing::finish("xnnpack_test");
}
