// CPU kernels called directly through the kernel registry, against reference values computed here
// with plain loops: matrix products (sizes that exercise every GEMM edge tile), convolution with
// groups/stride/padding/dilation, softmax, layer norm, broadcasting add, and argument validation.
#include <cmath>
#include <random>
#include <vector>

#include <executorch/runtime/core/log.h>
#include <executorch/runtime/kernel/kernel_registry.h>
#include <executorch/tests/cc/check.h>

namespace rt = executorch::runtime;
using rt::Error;
using rt::EValue;

namespace {

// A float tensor that owns its shape and data.
struct T {
  std::vector<int64_t> sizes, strides;
  std::vector<float> data;
  rt::Tensor tensor;
  explicit T(std::vector<int64_t> s, std::vector<float> d = {}) : sizes(std::move(s)) {
    strides.assign(sizes.size(), 1);
    for (size_t i = sizes.size(); i-- > 1;) strides[i - 1] = strides[i] * sizes[i];
    int64_t n = 1;
    for (int64_t v : sizes) n *= v;
    data = d.empty() ? std::vector<float>(static_cast<size_t>(n)) : std::move(d);
    tensor =
        rt::Tensor(rt::ScalarType::Float, static_cast<int>(sizes.size()), sizes.data(), strides.data(), data.data());
  }
};

std::vector<float> random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

Error call(const char* op, std::vector<EValue> args) {
  ET_TRY_ASSIGN(const auto fn, rt::get_op_function(op));
  std::vector<EValue*> ptrs;
  for (auto& a : args) ptrs.push_back(&a);
  rt::KernelRuntimeContext ctx;
  return fn(ctx, {ptrs.data(), ptrs.size()});
}

bool close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(a[i] - b[i]) > tol * (1.f + std::fabs(b[i]))) {
      std::printf("  mismatch at %zu: %g vs %g\n", i, a[i], b[i]);
      return false;
    }
  }
  return true;
}

void test_mm_sizes() {
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 17}, {97, 300, 33}, {200, 5, 130}};
  for (const auto& shape : shapes) {
    const int64_t m = shape[0], k = shape[1], n = shape[2];
    T a({m, k}, random(static_cast<size_t>(m * k), 1)), b({k, n}, random(static_cast<size_t>(k * n), 2)), out({m, n});
    CHECK(call("aten::mm", {EValue(a.tensor), EValue(b.tensor), EValue(out.tensor)}) == Error::Ok);
    std::vector<float> ref(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += double(a.data[i * k + p]) * b.data[p * n + j];
        ref[i * n + j] = static_cast<float>(s);
      }
    CHECK(close(out.data, ref, 1e-4f));
  }
  T a({2, 3}), b({4, 5}), out({2, 5});
  CHECK(call("aten::mm", {EValue(a.tensor), EValue(b.tensor), EValue(out.tensor)}) == Error::InvalidArgument);
  CHECK(call("aten::mm", {EValue(a.tensor), EValue(b.tensor)}) == Error::InvalidArgument);
}

void test_convolution() {
  const int64_t n = 2, c = 4, h = 9, w = 8, oc = 6, kh = 3, kw = 2, groups = 2, s = 2, p = 1, d = 2;
  const int64_t oh = (h + 2 * p - d * (kh - 1) - 1) / s + 1, ow = (w + 2 * p - d * (kw - 1) - 1) / s + 1;
  T x({n, c, h, w}, random(static_cast<size_t>(n * c * h * w), 3));
  T wt({oc, c / groups, kh, kw}, random(static_cast<size_t>(oc * c / groups * kh * kw), 4));
  T bias({oc}, random(static_cast<size_t>(oc), 5)), out({n, oc, oh, ow});
  const int64_t pair_s[] = {s, s}, pair_p[] = {p, p}, pair_d[] = {d, d}, none[] = {0, 0};
  CHECK(call("aten::convolution",
             {EValue(x.tensor), EValue(wt.tensor), EValue(bias.tensor), EValue::int_list({pair_s, 2}),
              EValue::int_list({pair_p, 2}), EValue::int_list({pair_d, 2}), EValue(false), EValue::int_list({none, 2}),
              EValue(int64_t{groups}), EValue(out.tensor)}) == Error::Ok);
  std::vector<float> ref(out.data.size());
  const int64_t cg = c / groups, ocg = oc / groups;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double acc = bias.data[o];
          const int64_t g = o / ocg;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = y * s - p + ky * d, ix = xx * s - p + kx * d;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                acc += double(x.data[((b * c + g * cg + ci) * h + iy) * w + ix]) *
                       wt.data[((o * cg + ci) * kh + ky) * kw + kx];
              }
          ref[((b * oc + o) * oh + y) * ow + xx] = static_cast<float>(acc);
        }
  CHECK(close(out.data, ref, 1e-4f));
}

void test_softmax_layer_norm_add() {
  T x({3, 5}, random(15, 6)), out({3, 5});
  CHECK(call("aten::_softmax", {EValue(x.tensor), EValue(int64_t{-1}), EValue(false), EValue(out.tensor)}) ==
        Error::Ok);
  for (int r = 0; r < 3; ++r) {
    float sum = 0, mx = -1e30f;
    for (int j = 0; j < 5; ++j) mx = std::max(mx, x.data[r * 5 + j]);
    for (int j = 0; j < 5; ++j) sum += std::exp(x.data[r * 5 + j] - mx);
    for (int j = 0; j < 5; ++j) CHECK(std::fabs(out.data[r * 5 + j] - std::exp(x.data[r * 5 + j] - mx) / sum) < 1e-6f);
  }
  CHECK(call("aten::_softmax", {EValue(x.tensor), EValue(int64_t{2}), EValue(false), EValue(out.tensor)}) ==
        Error::InvalidArgument);

  T ln({3, 5}), mean({3, 1}), rstd({3, 1});
  const int64_t shape[] = {5};
  CHECK(call("aten::native_layer_norm", {EValue(x.tensor), EValue::int_list({shape, 1}), EValue(), EValue(),
                                         EValue(1e-5), EValue(ln.tensor), EValue(mean.tensor), EValue(rstd.tensor)}) ==
        Error::Ok);
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 5; ++j) m += x.data[r * 5 + j] / 5.0;
    for (int j = 0; j < 5; ++j) v += (x.data[r * 5 + j] - m) * (x.data[r * 5 + j] - m) / 5.0;
    for (int j = 0; j < 5; ++j)
      CHECK(std::fabs(ln.data[r * 5 + j] - (x.data[r * 5 + j] - m) / std::sqrt(v + 1e-5)) < 1e-5);
  }

  T a({2, 1, 3}, {1, 2, 3, 4, 5, 6}), b({4, 1}, {10, 20, 30, 40}), sum({2, 4, 3});
  CHECK(call("aten::add.Tensor", {EValue(a.tensor), EValue(b.tensor), EValue(int64_t{2}), EValue(sum.tensor)}) ==
        Error::Ok);
  CHECK(sum.data[0] == 21 && sum.data[3 * 3 + 2] == 83 && sum.data[(1 * 4 + 2) * 3 + 1] == 65);
  T bad({2, 4, 4});
  CHECK(call("aten::add.Tensor", {EValue(a.tensor), EValue(b.tensor), EValue(int64_t{1}), EValue(bad.tensor)}) ==
        Error::InvalidArgument);
}

}  // namespace

int main() {
  test_mm_sizes();
  test_convolution();
  test_softmax_layer_norm_add();
  return executorch::testing::finish("kernels_test");
}
