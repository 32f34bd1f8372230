// Softmax, log-softmax, layer norm, RMS norm, group norm and inference batch norm.
#include <algorithm>
#include <cmath>

#include <executorch/kernels/kernel_util.h>
#include <executorch/kernels/vector_math.h>

namespace executorch {
namespace kernels {
namespace {

Error softmax_impl(Args args, const char* op, bool log) {
  Tensor *in, *out;
  ET_TRY(input_output(args, 4, op, &in, &out));
  int64_t dim;
  ET_TRY(int_at(args, 1, op, &dim));
  ET_TRY(normalize_dim(dim, in->dim(), op, &dim));
  ET_TRY(check_dtype(*in, ScalarType::Float, op, "input"));
  ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  KCHECK(same_shape(*in, *out), "%s: output shape differs from input", op);
  int64_t outer, size, inner;
  split_at(*in, dim, &outer, &size, &inner);
  const float* x = in->data_ptr<float>();
  float* y = out->data_ptr<float>();
  extension::threadpool::parallel_for(0, outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(size, 1)),
                                      [&](int64_t r0, int64_t r1) {
                                        for (int64_t r = r0; r < r1; ++r) {
                                          const int64_t o = r / inner, i = r % inner;
                                          const float* xs = x + o * size * inner + i;
                                          float* ys = y + o * size * inner + i;
                                          float mx = -INFINITY;
                                          for (int64_t j = 0; j < size; ++j) mx = std::max(mx, xs[j * inner]);
                                          float sum = 0.f;
                                          if (inner == 1 && !(log && xs == ys)) {
                                            // A contiguous row: the vector exponential (log-softmax
                                            // overwrites the exponentials below).
                                            sum = exp_shifted(xs, mx, ys, size);
                                          } else {
                                            for (int64_t j = 0; j < size; ++j) {
                                              const float e = std::exp(xs[j * inner] - mx);
                                              sum += e;
                                              if (!log) ys[j * inner] = e;
                                            }
                                          }
                                          if (log) {
                                            const float lse = mx + std::log(sum);
                                            for (int64_t j = 0; j < size; ++j) ys[j * inner] = xs[j * inner] - lse;
                                          } else {
                                            const float inv = 1.f / sum;
                                            for (int64_t j = 0; j < size; ++j) ys[j * inner] *= inv;
                                          }
                                        }
                                      });
  return Error::Ok;
}

// _softmax(self, dim, half_to_float)
Error softmax(KernelRuntimeContext&, Args args) { return softmax_impl(args, "aten::_softmax", false); }
Error log_softmax(KernelRuntimeContext&, Args args) { return softmax_impl(args, "aten::_log_softmax", true); }

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
Error layer_norm(KernelRuntimeContext&, Args args) {
  const char* op = "aten::native_layer_norm";
  Tensor *in, *out, *mean, *rstd, *w = nullptr, *b = nullptr;
  Span<const int64_t> shape;
  double eps;
  ET_TRY(read_args(args, op, 8, at(0, &in), at(1, &shape), optional_at(2, &w), optional_at(3, &b), at(4, &eps),
                   at(5, &out), at(6, &mean), at(7, &rstd)));
  KCHECK(shape.size() >= 1 && static_cast<int>(shape.size()) <= in->dim(), "%s: bad normalized_shape", op);
  int64_t inner = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int d = in->dim() - static_cast<int>(shape.size()) + static_cast<int>(i);
    KCHECK(in->size(d) == shape[i], "%s: normalized_shape does not match the input's trailing sizes", op);
    inner *= shape[i];
  }
  for (const Tensor* t : {in, out, mean, rstd}) ET_TRY(check_dtype(*t, ScalarType::Float, op, "tensor"));
  KCHECK(same_shape(*in, *out), "%s: output shape differs from input", op);
  const int64_t outer = inner == 0 ? 0 : in->numel() / inner;
  ET_TRY(check_numel(*mean, outer, op, "mean"));
  ET_TRY(check_numel(*rstd, outer, op, "rstd"));
  if (w) ET_TRY(check_numel(*w, inner, op, "weight"));
  if (b) ET_TRY(check_numel(*b, inner, op, "bias"));
  if (w) ET_TRY(check_dtype(*w, ScalarType::Float, op, "weight"));
  if (b) ET_TRY(check_dtype(*b, ScalarType::Float, op, "bias"));
  const float* x = in->data_ptr<float>();
  float* y = out->data_ptr<float>();
  extension::threadpool::parallel_for(0, outer, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * inner;
      float* yr = y + r * inner;
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < inner; ++i) sum += xr[i];
      const double mu = sum / static_cast<double>(inner);
      for (int64_t i = 0; i < inner; ++i) sq += (xr[i] - mu) * (xr[i] - mu);
      const float rs = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(inner) + eps));
      const float m = static_cast<float>(mu);
      for (int64_t i = 0; i < inner; ++i) {
        float v = (xr[i] - m) * rs;
        if (w) v *= w->data_ptr<float>()[i];
        if (b) v += b->data_ptr<float>()[i];
        yr[i] = v;
      }
      mean->data_ptr<float>()[r] = m;
      rstd->data_ptr<float>()[r] = rs;
    }
  });
  return Error::Ok;
}

// executorch::rms_norm(x, weight, eps) -> out: each row of the last dimension times
// rsqrt(mean of its squares + eps), times weight (docs/program_format.md).
Error rms_norm(KernelRuntimeContext&, Args args) {
  const char* op = "executorch::rms_norm";
  Tensor *in, *w, *out;
  double eps;
  ET_TRY(read_args(args, op, 4, at(0, &in), at(1, &w), at(2, &eps), at(3, &out)));
  for (const Tensor* t : {in, w, out}) ET_TRY(check_dtype(*t, ScalarType::Float, op, "tensor"));
  KCHECK(in->dim() >= 1, "%s: input needs a dimension", op);
  KCHECK(same_shape(*in, *out), "%s: output shape differs from input", op);
  const int64_t inner = in->size(in->dim() - 1);
  ET_TRY(check_numel(*w, inner, op, "weight"));
  const int64_t outer = inner == 0 ? 0 : in->numel() / inner;
  const float* x = in->data_ptr<float>();
  const float* wv = w->data_ptr<float>();
  float* y = out->data_ptr<float>();
  extension::threadpool::parallel_for(0, outer, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * inner;
      float* yr = y + r * inner;
      double sq = 0;
      for (int64_t i = 0; i < inner; ++i) sq += static_cast<double>(xr[i]) * xr[i];
      const float rs = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(inner) + eps));
      for (int64_t i = 0; i < inner; ++i) yr[i] = wv[i] * (xr[i] * rs);
    }
  });
  return Error::Ok;
}

// _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var, momentum,
// eps) -> (out, save_mean, save_invstd); the last two are empty in inference.
Error batch_norm(KernelRuntimeContext&, Args args) {
  const char* op = "aten::_native_batch_norm_legit_no_training";
  Tensor *in, *rm, *rv, *out, *w = nullptr, *b = nullptr;
  double eps;
  ET_TRY(read_args(args, op, 10, at(0, &in), optional_at(1, &w), optional_at(2, &b), at(3, &rm), at(4, &rv),
                   at(6, &eps), at(7, &out)));
  KCHECK(in->dim() >= 2, "%s: input needs a channel dimension", op);
  KCHECK(same_shape(*in, *out), "%s: output shape differs from input", op);
  const int64_t c = in->size(1);
  for (const Tensor* t : {rm, rv}) {
    ET_TRY(check_numel(*t, c, op, "running statistics"));
    ET_TRY(check_dtype(*t, ScalarType::Float, op, "running statistics"));
  }
  if (w) ET_TRY(check_numel(*w, c, op, "weight"));
  if (b) ET_TRY(check_numel(*b, c, op, "bias"));
  ET_TRY(check_dtype(*in, ScalarType::Float, op, "input"));
  ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  const int64_t n = in->size(0), inner = c == 0 || n == 0 ? 0 : in->numel() / (n * c);
  const float* x = in->data_ptr<float>();
  float* y = out->data_ptr<float>();
  extension::threadpool::parallel_for(0, n * c, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t ch = p % c;
      const float scale =
          (w ? w->data_ptr<float>()[ch] : 1.f) / std::sqrt(rv->data_ptr<float>()[ch] + static_cast<float>(eps));
      const float shift = (b ? b->data_ptr<float>()[ch] : 0.f) - rm->data_ptr<float>()[ch] * scale;
      for (int64_t i = 0; i < inner; ++i) y[p * inner + i] = x[p * inner + i] * scale + shift;
    }
  });
  return Error::Ok;
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean [N, group], rstd)
Error group_norm(KernelRuntimeContext&, Args args) {
  const char* op = "aten::native_group_norm";
  Tensor *in, *out, *mean, *rstd, *weight = nullptr, *bias = nullptr;
  int64_t n, c, hw, groups;
  double eps;
  ET_TRY(read_args(args, op, 11, at(0, &in), optional_at(1, &weight), optional_at(2, &bias), at(8, &out), at(9, &mean),
                   at(10, &rstd), at(3, &n), at(4, &c), at(5, &hw), at(6, &groups), at(7, &eps)));
  for (const Tensor* t : {in, out, mean, rstd}) ET_TRY(check_dtype(*t, ScalarType::Float, op, "tensor"));
  KCHECK(n >= 0 && c > 0 && hw >= 0 && groups > 0 && c % groups == 0, "%s: %lld channels do not split into %lld groups",
         op, static_cast<long long>(c), static_cast<long long>(groups));
  KCHECK(in->dim() >= 2 && in->size(0) == n && in->size(1) == c && in->numel() == n * c * hw && same_shape(*in, *out),
         "%s: input shape does not match N, C, HxW", op);
  ET_TRY(check_numel(*mean, n * groups, op, "mean"));
  ET_TRY(check_numel(*rstd, n * groups, op, "rstd"));
  for (Tensor* t : {weight, bias}) {
    if (t) {
      ET_TRY(check_dtype(*t, ScalarType::Float, op, "weight/bias"));
      ET_TRY(check_numel(*t, c, op, "weight/bias"));
    }
  }
  const int64_t cg = c / groups, span = cg * hw;
  const float* x = in->data_ptr<float>();
  float* y = out->data_ptr<float>();
  const float* w = weight ? weight->data_ptr<float>() : nullptr;
  const float* b = bias ? bias->data_ptr<float>() : nullptr;
  extension::threadpool::parallel_for(0, n * groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const float* xs = x + g * span;
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < span; ++i) sum += xs[i];
      const double mu = span ? sum / span : 0;
      for (int64_t i = 0; i < span; ++i) sq += (xs[i] - mu) * (xs[i] - mu);
      const float r = static_cast<float>(1.0 / std::sqrt((span ? sq / span : 0) + eps));
      mean->data_ptr<float>()[g] = static_cast<float>(mu);
      rstd->data_ptr<float>()[g] = r;
      for (int64_t ch = 0; ch < cg; ++ch) {
        const int64_t channel = (g % groups) * cg + ch;
        const float scale = r * (w ? w[channel] : 1.f);
        const float shift = (b ? b[channel] : 0.f) - static_cast<float>(mu) * scale;
        const float* xc = xs + ch * hw;
        float* yc = y + g * span + ch * hw;
        for (int64_t i = 0; i < hw; ++i) yc[i] = xc[i] * scale + shift;
      }
    }
  });
  return Error::Ok;
}

// _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps)
//   -> (out, mean [C], rstd [C]): batch statistics of each channel over the batch and spatial
// dimensions (instance norm reaches here with the batch folded into the channels).
Error batch_norm_batch_stats(KernelRuntimeContext&, Args args) {
  const char* op = "aten::_native_batch_norm_legit.no_stats";
  Tensor *in, *out, *mean, *rstd, *weight = nullptr, *bias = nullptr;
  double eps;
  ET_TRY(read_args(args, op, 9, at(0, &in), optional_at(1, &weight), optional_at(2, &bias), at(6, &out), at(7, &mean),
                   at(8, &rstd), at(5, &eps)));
  for (const Tensor* t : {in, out, mean, rstd}) ET_TRY(check_dtype(*t, ScalarType::Float, op, "tensor"));
  KCHECK(in->dim() >= 2 && same_shape(*in, *out), "%s: input needs a channel dimension", op);
  const int64_t n = in->size(0), c = in->size(1), inner = n * c == 0 ? 0 : in->numel() / (n * c);
  ET_TRY(check_numel(*mean, c, op, "mean"));
  ET_TRY(check_numel(*rstd, c, op, "rstd"));
  for (Tensor* t : {weight, bias}) {
    if (t) {
      ET_TRY(check_dtype(*t, ScalarType::Float, op, "weight/bias"));
      ET_TRY(check_numel(*t, c, op, "weight/bias"));
    }
  }
  const float* x = in->data_ptr<float>();
  float* y = out->data_ptr<float>();
  extension::threadpool::parallel_for(0, c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      double sum = 0, sq = 0;
      for (int64_t b = 0; b < n; ++b) {
        const float* xs = x + (b * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i) sum += xs[i];
      }
      const double count = static_cast<double>(n * inner), mu = count ? sum / count : 0;
      for (int64_t b = 0; b < n; ++b) {
        const float* xs = x + (b * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i) sq += (xs[i] - mu) * (xs[i] - mu);
      }
      const float r = static_cast<float>(1.0 / std::sqrt((count ? sq / count : 0) + eps));
      mean->data_ptr<float>()[ch] = static_cast<float>(mu);
      rstd->data_ptr<float>()[ch] = r;
      const float scale = r * (weight ? weight->data_ptr<float>()[ch] : 1.f);
      const float shift = (bias ? bias->data_ptr<float>()[ch] : 0.f) - static_cast<float>(mu) * scale;
      for (int64_t b = 0; b < n; ++b) {
        const float* xs = x + (b * c + ch) * inner;
        float* ys = y + (b * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i) ys[i] = xs[i] * scale + shift;
      }
    }
  });
  return Error::Ok;
}

const runtime::Kernel kKernels[] = {
    {"aten::_softmax", softmax},
    {"aten::_log_softmax", log_softmax},
    {"aten::native_layer_norm", layer_norm},
    {"aten::native_group_norm", group_norm},
    {"executorch::rms_norm", rms_norm},
    {"aten::_native_batch_norm_legit.no_stats", batch_norm_batch_stats},
    {"aten::_native_batch_norm_legit_no_training", batch_norm},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
