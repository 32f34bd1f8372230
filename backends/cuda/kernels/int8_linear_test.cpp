// Runs launch_int8_linear on the GPU and compares with a CPU reference. Without a CUDA device it
// reports a skip (CI has no GPU); on a GPU machine every element must match.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <cuda_runtime_api.h>

#include <executorch/backends/cuda/kernels/int8_linear.h>
#include <executorch/tests/cc/test_skip.h>

namespace {

int fail(const char* what, cudaError_t e) {
  std::fprintf(stderr, "FAILED: %s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    return executorch::testing::skip_test("int8_linear_test", "no CUDA device");
  }
  const int n = 300, k = 1028;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_real_distribution<float> s(0.001f, 0.1f);
  std::vector<int8_t> w(n * k), x(k);
  std::vector<float> w_scale(n), y(n), ref(n);
  for (auto& v : w) v = static_cast<int8_t>(q(rng));
  for (auto& v : x) v = static_cast<int8_t>(q(rng));
  for (auto& v : w_scale) v = s(rng);
  const float x_scale = 0.02f;
  for (int r = 0; r < n; ++r) {
    long long acc = 0;
    for (int c = 0; c < k; ++c) acc += w[r * k + c] * x[c];
    ref[r] = static_cast<float>(acc) * w_scale[r] * x_scale;
  }
  int8_t *dw, *dx;
  float *ds, *dy;
  cudaError_t e;
  if ((e = cudaMalloc(reinterpret_cast<void**>(&dw), w.size())) ||
      (e = cudaMalloc(reinterpret_cast<void**>(&dx), x.size())) ||
      (e = cudaMalloc(reinterpret_cast<void**>(&ds), n * sizeof(float))) ||
      (e = cudaMalloc(reinterpret_cast<void**>(&dy), n * sizeof(float))))
    return fail("cudaMalloc", e);
  cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dx, x.data(), x.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(ds, w_scale.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  if ((e = executorch::backends::cuda::launch_int8_linear(dw, ds, dx, x_scale, dy, n, k, nullptr)))
    return fail("launch", e);
  if ((e = cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost)))
    return fail("copy back", e);
  cudaFree(dw), cudaFree(dx), cudaFree(ds), cudaFree(dy);
  if (executorch::backends::cuda::launch_int8_linear(dw, ds, dx, x_scale, dy, n, 6, nullptr) !=
      cudaErrorInvalidValue) {
    std::fprintf(stderr, "FAILED: k=6 accepted\n");
    return 1;
  }
  for (int r = 0; r < n; ++r) {
    if (std::fabs(y[r] - ref[r]) > 1e-5f * std::fabs(ref[r]) + 1e-6f) {
      std::fprintf(stderr, "FAILED: row %d: got %g, want %g\n", r, y[r], ref[r]);
      return 1;
    }
  }
  std::printf("PASSED: %d rows x %d int8 (dp4a) match the CPU reference\n", n, k);
  return 0;
}
