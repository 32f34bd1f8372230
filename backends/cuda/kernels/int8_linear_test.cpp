// Runs the int8 linear kernels (per-row quantization, then the dp4a product) on the GPU and
// compares with a CPU reference of the same arithmetic. Without a CUDA device it reports a skip (CI
// has no GPU); on a GPU machine the quantized activations must match exactly and every output to
// 1e-5 relative.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <cuda_runtime_api.h>

#include <executorch/backends/cuda/kernels/int8_linear.h>
#include <executorch/tests/cc/test_skip.h>

namespace {

namespace ecuda = executorch::backends::cuda;

int fail(const char* what, cudaError_t e) {
  std::fprintf(stderr, "FAILED: %s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

// Device copy of a host vector, freed with its owner.
template <typename T>
struct Device {
  T* ptr = nullptr;
  cudaError_t status;
  explicit Device(const std::vector<T>& host) {
    status = cudaMalloc(reinterpret_cast<void**>(&ptr), host.size() * sizeof(T) + 4);
    if (status == cudaSuccess) status = cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~Device() { cudaFree(ptr); }
  std::vector<T> read(size_t n) const {
    std::vector<T> out(n);
    cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return out;
  }
};

// One case: m rows of activations (one all zero, to check the zero-scale path) against n x k weights.
int check(int m, int n, int k, bool with_bias, std::mt19937& rng) {
  std::uniform_int_distribution<int> qd(-127, 127);
  std::normal_distribution<float> xd(0.f, 3.f);
  std::uniform_real_distribution<float> sd(0.001f, 0.1f);
  std::vector<int8_t> w(static_cast<size_t>(n) * k);
  std::vector<float> x(static_cast<size_t>(m) * k), ws(n), bias(n);
  for (auto& v : w) v = static_cast<int8_t>(qd(rng));
  for (auto& v : x) v = xd(rng);
  for (auto& v : ws) v = sd(rng);
  for (auto& v : bias) v = xd(rng);
  std::fill(x.begin(), x.begin() + k, 0.f);

  // The reference: round half to even (nearbyint), products in int64, scales applied in float32.
  std::vector<int8_t> q(x.size());
  std::vector<float> xs(m), ref(static_cast<size_t>(m) * n);
  for (int r = 0; r < m; ++r) {
    float amax = 0.f;
    for (int c = 0; c < k; ++c) amax = std::max(amax, std::fabs(x[r * k + c]));
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    for (int c = 0; c < k; ++c) {
      q[r * k + c] = static_cast<int8_t>(std::clamp(static_cast<int>(std::nearbyint(x[r * k + c] * inv)), -127, 127));
    }
    xs[r] = amax / 127.f;
    for (int j = 0; j < n; ++j) {
      long long acc = 0;
      for (int c = 0; c < k; ++c) acc += static_cast<int>(q[r * k + c]) * w[static_cast<size_t>(j) * k + c];
      ref[static_cast<size_t>(r) * n + j] = static_cast<float>(acc) * xs[r] * ws[j] + (with_bias ? bias[j] : 0.f);
    }
  }

  Device<float> dx(x), dws(ws), dbias(bias), dxs{std::vector<float>(m)},
      dy{std::vector<float>(static_cast<size_t>(m) * n)};
  Device<int8_t> dw(w), dq{std::vector<int8_t>(q.size())};
  for (cudaError_t s : {dx.status, dws.status, dbias.status, dxs.status, dy.status, dw.status, dq.status}) {
    if (s != cudaSuccess) return fail("cudaMalloc", s);
  }
  cudaError_t e;
  if ((e = ecuda::launch_quantize_rows(dx.ptr, dq.ptr, dxs.ptr, m, k, nullptr))) return fail("quantize", e);
  if ((e = ecuda::launch_int8_linear(dq.ptr, dxs.ptr, dw.ptr, dws.ptr, with_bias ? dbias.ptr : nullptr, dy.ptr, m, n, k,
                                     nullptr))) {
    return fail("int8 linear", e);
  }
  if ((e = cudaDeviceSynchronize())) return fail("run", e);
  const std::vector<int8_t> got_q = dq.read(q.size());
  const std::vector<float> got_xs = dxs.read(m), y = dy.read(ref.size());
  for (size_t i = 0; i < q.size(); ++i) {
    if (got_q[i] != q[i]) {
      std::fprintf(stderr, "FAILED: m=%d: q[%zu] = %d, want %d\n", m, i, got_q[i], q[i]);
      return 1;
    }
  }
  for (int r = 0; r < m; ++r) {
    if (got_xs[r] != xs[r]) {
      std::fprintf(stderr, "FAILED: m=%d: scale[%d] = %g, want %g\n", m, r, got_xs[r], xs[r]);
      return 1;
    }
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::fabs(y[i] - ref[i]) > 1e-5f * std::fabs(ref[i]) + 1e-6f) {
      std::fprintf(stderr, "FAILED: m=%d: y[%zu] = %g, want %g\n", m, i, y[i], ref[i]);
      return 1;
    }
  }
  std::printf("ok: %d x %d rows of %d int8 (dp4a, %s kernel, %s bias) match the CPU reference\n", m, n, k,
              m <= 8 ? "warp-per-output" : "tiled", with_bias ? "with" : "no");
  return 0;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    return executorch::testing::skip_test("int8_linear_test", "no CUDA device");
  }
  std::mt19937 rng(7);
  // Shapes off the tile sizes on purpose: partial tiles in rows, columns and k.
  const int cases[][3] = {{1, 300, 1028}, {5, 77, 64}, {100, 300, 1028}, {130, 65, 36}};
  for (const auto& c : cases) {
    if (check(c[0], c[1], c[2], c[0] != 5, rng)) return 1;
  }
  if (ecuda::launch_int8_linear(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 8, 6, nullptr) !=
      cudaErrorInvalidValue) {
    std::fprintf(stderr, "FAILED: k=6 accepted\n");
    return 1;
  }
  std::printf("PASSED: int8 linear kernels match the CPU reference\n");
  return 0;
}
