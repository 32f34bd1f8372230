// 1-D and 2-D convolution (im2col + sgemm; transposed through col2im; depthwise directly) and pooling.
#include <algorithm>
#include <cfloat>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

// Two spatial parameters from an int list of one or two entries.
Error pair_at(Args args, size_t i, const char* op, const char* what, int64_t fallback, int64_t out[2]) {
  Span<const int64_t> v;
  ET_TRY(int_list_at(args, i, op, &v));
  if (v.size() == 0) {
    out[0] = out[1] = fallback;
  } else {
    KCHECK(v.size() == 1 || v.size() == 2, "%s: %s must have 1 or 2 entries", op, what);
    out[0] = v[0];
    out[1] = v.size() == 2 ? v[1] : v[0];
  }
  // Real windows are small; the bound keeps the output-size arithmetic from overflowing.
  constexpr int64_t kMaxWindow = int64_t{1} << 20;
  KCHECK(out[0] >= -kMaxWindow && out[0] <= kMaxWindow && out[1] >= -kMaxWindow && out[1] <= kMaxWindow,
         "%s: %s out of range", op, what);
  return Error::Ok;
}

Error check_out4(const Tensor& out, int64_t n, int64_t c, int64_t h, int64_t w, const char* op) {
  KCHECK(out.dim() == 4 && out.size(0) == n && out.size(1) == c && out.size(2) == h && out.size(3) == w,
         "%s: output shape does not match [%lld, %lld, %lld, %lld]", op, static_cast<long long>(n),
         static_cast<long long>(c), static_cast<long long>(h), static_cast<long long>(w));
  return Error::Ok;
}

// Spatial parameters of a 1-D or 2-D convolution as two (height, width) entries: a 1-D list
// describes the width of a height-1 image.
Error conv_pair_at(Args args, size_t i, const char* op, const char* what, int64_t fallback, bool one_d, int64_t out[2]) {
  ET_TRY(pair_at(args, i, op, what, fallback, out));
  if (one_d) out[0] = fallback == 1 ? 1 : 0;
  return Error::Ok;
}

// Depthwise (one input channel per group): each output channel is a small stencil over its input
// plane, computed directly rather than through im2col and a GEMM of depth kh * kw.
void depthwise(const float* x, const float* wt, const float* bias, float* y, int64_t n, int64_t c, int64_t h,
               int64_t wd, int64_t oc, int64_t kh, int64_t kw, int64_t oh, int64_t ow, const int64_t* stride,
               const int64_t* pad, const int64_t* dil) {
  const int64_t mult = oc / c;
  extension::threadpool::parallel_for(0, n * oc, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t b = p / oc, o = p % oc;
      const float* xp = x + (b * c + o / mult) * h * wd;
      const float* wp = wt + o * kh * kw;
      float* yp = y + p * oh * ow;
      const float b0 = bias ? bias[o] : 0.f;
      for (int64_t i = 0; i < oh * ow; ++i) yp[i] = b0;
      for (int64_t ky = 0; ky < kh; ++ky) {
        for (int64_t kx = 0; kx < kw; ++kx) {
          const float wv = wp[ky * kw + kx];
          // Output columns whose input column lies inside the image.
          const int64_t off = kx * dil[1] - pad[1];
          const int64_t x_lo = off >= 0 ? 0 : (-off + stride[1] - 1) / stride[1];
          const int64_t x_hi = wd - off <= 0 ? 0 : std::min(ow, (wd - off + stride[1] - 1) / stride[1]);
          for (int64_t oy = 0; oy < oh; ++oy) {
            const int64_t iy = oy * stride[0] - pad[0] + ky * dil[0];
            if (iy < 0 || iy >= h) continue;
            const float* row = xp + iy * wd + off;
            float* out = yp + oy * ow;
            if (stride[1] == 1) {
              for (int64_t ox = x_lo; ox < x_hi; ++ox) out[ox] += wv * row[ox];
            } else {
              for (int64_t ox = x_lo; ox < x_hi; ++ox) out[ox] += wv * row[ox * stride[1]];
            }
          }
        }
      }
    }
  });
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups):
// 1-D and 2-D, plain and transposed, any groups.
Error convolution(KernelRuntimeContext&, Args args) {
  const char* op = "aten::convolution";
  ET_TRY(check_count(args, 10, op));
  Tensor *in, *w, *out, *bias = nullptr;
  ET_TRY(tensor_at(args, 0, op, &in));
  ET_TRY(tensor_at(args, 1, op, &w));
  if (!args[2]->is_none()) ET_TRY(tensor_at(args, 2, op, &bias));
  ET_TRY(tensor_at(args, 9, op, &out));
  KCHECK((in->dim() == 4 || in->dim() == 3) && w->dim() == in->dim() && out->dim() == in->dim(),
         "%s: 1-D or 2-D convolution (3-D or 4-D input and weight) is supported, got a %d-D input", op, in->dim());
  const bool one_d = in->dim() == 3;
  int64_t stride[2], pad[2], dil[2], out_pad[2], transposed, groups;
  ET_TRY(conv_pair_at(args, 3, op, "stride", 1, one_d, stride));
  ET_TRY(conv_pair_at(args, 4, op, "padding", 0, one_d, pad));
  ET_TRY(conv_pair_at(args, 5, op, "dilation", 1, one_d, dil));
  ET_TRY(int_at(args, 6, op, &transposed));
  ET_TRY(conv_pair_at(args, 7, op, "output_padding", 0, one_d, out_pad));
  ET_TRY(int_at(args, 8, op, &groups));
  for (const Tensor* t : {in, w, out}) ET_TRY(check_dtype(*t, ScalarType::Float, op, "tensor"));
  auto size = [one_d](const Tensor& t, int d) { return one_d ? (d == 2 ? 1 : t.size(d == 3 ? 2 : d)) : t.size(d); };
  const int64_t n = in->size(0), c = in->size(1), h = size(*in, 2), wd = size(*in, 3);
  const int64_t kh = size(*w, 2), kw = size(*w, 3);
  // Weight: [oc, c / groups, kh, kw], or transposed [c, oc / groups, kh, kw].
  const int64_t oc = transposed ? w->size(1) * groups : w->size(0);
  KCHECK(groups >= 1 && c % groups == 0 && oc % groups == 0 && (transposed ? w->size(0) == c : w->size(1) == c / groups),
         "%s: channels (%lld in, %lld out, weight %lld) do not split into %lld groups", op, static_cast<long long>(c),
         static_cast<long long>(oc), static_cast<long long>(w->size(1)), static_cast<long long>(groups));
  KCHECK(stride[0] > 0 && stride[1] > 0 && dil[0] > 0 && dil[1] > 0 && pad[0] >= 0 && pad[1] >= 0 && out_pad[0] >= 0 &&
             out_pad[1] >= 0,
         "%s: stride and dilation must be positive, padding non-negative", op);
  const int64_t oh = transposed ? (h - 1) * stride[0] - 2 * pad[0] + dil[0] * (kh - 1) + out_pad[0] + 1
                                : (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) / stride[0] + 1;
  const int64_t ow = transposed ? (wd - 1) * stride[1] - 2 * pad[1] + dil[1] * (kw - 1) + out_pad[1] + 1
                                : (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) / stride[1] + 1;
  KCHECK(oh > 0 && ow > 0, "%s: kernel larger than the padded input", op);
  KCHECK(out->size(0) == n && out->size(1) == oc && size(*out, 2) == oh && size(*out, 3) == ow,
         "%s: output shape does not match [%lld, %lld, %lld, %lld]", op, static_cast<long long>(n),
         static_cast<long long>(oc), static_cast<long long>(oh), static_cast<long long>(ow));
  if (bias) {
    ET_TRY(check_dtype(*bias, ScalarType::Float, op, "bias"));
    ET_TRY(check_numel(*bias, oc, op, "bias"));
  }
  const float* x = in->data_ptr<float>();
  const float* wt = w->data_ptr<float>();
  float* y = out->data_ptr<float>();
  const float* bp = bias ? bias->data_ptr<float>() : nullptr;
  const int64_t cg = c / groups, ocg = oc / groups;
  if (!transposed && cg == 1 && groups > 1) {
    depthwise(x, wt, bp, y, n, c, h, wd, oc, kh, kw, oh, ow, stride, pad, dil);
    return Error::Ok;
  }
  if (transposed) {
    // Per group: columns [ocg * kh * kw, h * w] = weight_g^T x_g, then scattered into the output.
    const int64_t rows = ocg * kh * kw, cols = h * wd;
    std::vector<float> col(static_cast<size_t>(rows * cols));
    for (int64_t b = 0; b < n; ++b) {
      float* yb = y + b * oc * oh * ow;
      for (int64_t o = 0; o < oc; ++o) std::fill(yb + o * oh * ow, yb + (o + 1) * oh * ow, bp ? bp[o] : 0.f);
      for (int64_t g = 0; g < groups; ++g) {
        sgemm(rows, cols, cg, 1.f, wt + g * cg * rows, 1, rows, x + (b * c + g * cg) * cols, cols, 1, 0.f, col.data(),
              cols);
        extension::threadpool::parallel_for(0, ocg, 1, [&](int64_t o0, int64_t o1) {
          for (int64_t o = o0; o < o1; ++o) {
            float* yo = yb + (g * ocg + o) * oh * ow;
            for (int64_t ky = 0; ky < kh; ++ky) {
              for (int64_t kx = 0; kx < kw; ++kx) {
                const float* src = col.data() + ((o * kh + ky) * kw + kx) * cols;
                for (int64_t iy = 0; iy < h; ++iy) {
                  const int64_t oy = iy * stride[0] - pad[0] + ky * dil[0];
                  if (oy < 0 || oy >= oh) continue;
                  for (int64_t ix = 0; ix < wd; ++ix) {
                    const int64_t ox = ix * stride[1] - pad[1] + kx * dil[1];
                    if (ox >= 0 && ox < ow) yo[oy * ow + ox] += src[iy * wd + ix];
                  }
                }
              }
            }
          }
        });
      }
    }
    return Error::Ok;
  }
  const int64_t rows = cg * kh * kw, cols = oh * ow;
  const bool direct = kh == 1 && kw == 1 && stride[0] == 1 && stride[1] == 1 && pad[0] == 0 && pad[1] == 0;
  std::vector<float> col(direct ? 0 : static_cast<size_t>(rows * cols));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + (b * c + g * cg) * h * wd;
      const float* src = xg;
      if (!direct) {
        extension::threadpool::parallel_for(0, rows, 8, [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            const int64_t ci = r / (kh * kw), ky = (r / kw) % kh, kx = r % kw;
            float* dst = col.data() + r * cols;
            for (int64_t oy = 0; oy < oh; ++oy) {
              const int64_t iy = oy * stride[0] - pad[0] + ky * dil[0];
              for (int64_t ox = 0; ox < ow; ++ox) {
                const int64_t ix = ox * stride[1] - pad[1] + kx * dil[1];
                dst[oy * ow + ox] = (iy >= 0 && iy < h && ix >= 0 && ix < wd) ? xg[(ci * h + iy) * wd + ix] : 0.f;
              }
            }
          }
        });
        src = col.data();
      }
      float* yg = y + (b * oc + g * ocg) * cols;
      if (bp) {
        for (int64_t o = 0; o < ocg; ++o) std::fill(yg + o * cols, yg + (o + 1) * cols, bp[g * ocg + o]);
      }
      sgemm(ocg, cols, rows, 1.f, wt + g * ocg * rows, rows, 1, src, cols, 1, bp ? 1.f : 0.f, yg, cols);
    }
  }
  return Error::Ok;
}

int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // The last window must start inside the input or the left padding (PyTorch's rule).
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (out, indices)
Error max_pool2d(KernelRuntimeContext&, Args args) {
  const char* op = "aten::max_pool2d_with_indices";
  ET_TRY(check_count(args, 8, op));
  Tensor *in, *out, *idx;
  ET_TRY(tensor_at(args, 0, op, &in));
  ET_TRY(tensor_at(args, 6, op, &out));
  ET_TRY(tensor_at(args, 7, op, &idx));
  int64_t k[2], s[2], p[2], d[2], ceil_mode;
  ET_TRY(pair_at(args, 1, op, "kernel_size", 1, k));
  ET_TRY(pair_at(args, 2, op, "stride", 0, s));
  if (s[0] == 0) s[0] = k[0], s[1] = k[1];
  ET_TRY(pair_at(args, 3, op, "padding", 0, p));
  ET_TRY(pair_at(args, 4, op, "dilation", 1, d));
  ET_TRY(int_at(args, 5, op, &ceil_mode));
  KCHECK(in->dim() == 4, "%s: input must be 4-D", op);
  KCHECK(k[0] > 0 && k[1] > 0 && s[0] > 0 && s[1] > 0 && d[0] > 0 && d[1] > 0 && p[0] >= 0 && p[1] >= 0 &&
             2 * p[0] <= k[0] && 2 * p[1] <= k[1],
         "%s: invalid kernel, stride, padding or dilation", op);
  ET_TRY(check_dtype(*in, ScalarType::Float, op, "input"));
  ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  ET_TRY(check_dtype(*idx, ScalarType::Long, op, "indices"));
  const int64_t n = in->size(0), c = in->size(1), h = in->size(2), w = in->size(3);
  const int64_t oh = pool_out_size(h, k[0], s[0], p[0], d[0], ceil_mode), ow = pool_out_size(w, k[1], s[1], p[1], d[1], ceil_mode);
  ET_TRY(check_out4(*out, n, c, oh, ow, op));
  ET_TRY(check_out4(*idx, n, c, oh, ow, op));
  const float* x = in->data_ptr<float>();
  float* y = out->data_ptr<float>();
  int64_t* yi = idx->data_ptr<int64_t>();
  extension::threadpool::parallel_for(0, n * c, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      const float* xp = x + plane * h * w;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          float best = -FLT_MAX;
          int64_t best_i = -1;
          for (int64_t ky = 0; ky < k[0]; ++ky) {
            const int64_t iy = oy * s[0] - p[0] + ky * d[0];
            if (iy < 0 || iy >= h) continue;
            for (int64_t kx = 0; kx < k[1]; ++kx) {
              const int64_t ix = ox * s[1] - p[1] + kx * d[1];
              if (ix < 0 || ix >= w) continue;
              const float v = xp[iy * w + ix];
              if (best_i < 0 || v > best || v != v) best = v, best_i = iy * w + ix;
            }
          }
          y[(plane * oh + oy) * ow + ox] = best;
          yi[(plane * oh + oy) * ow + ox] = best_i;
        }
      }
    }
  });
  return Error::Ok;
}

// avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
Error avg_pool2d(KernelRuntimeContext&, Args args) {
  const char* op = "aten::avg_pool2d";
  ET_TRY(check_count(args, 8, op));
  Tensor *in, *out;
  ET_TRY(tensor_at(args, 0, op, &in));
  ET_TRY(tensor_at(args, 7, op, &out));
  int64_t k[2], s[2], p[2], ceil_mode, include_pad, divisor = 0;
  ET_TRY(pair_at(args, 1, op, "kernel_size", 1, k));
  ET_TRY(pair_at(args, 2, op, "stride", 0, s));
  if (s[0] == 0) s[0] = k[0], s[1] = k[1];
  ET_TRY(pair_at(args, 3, op, "padding", 0, p));
  ET_TRY(int_at(args, 4, op, &ceil_mode));
  ET_TRY(int_at(args, 5, op, &include_pad));
  if (!args[6]->is_none()) ET_TRY(int_at(args, 6, op, &divisor));
  KCHECK(in->dim() == 4, "%s: input must be 4-D", op);
  KCHECK(k[0] > 0 && k[1] > 0 && s[0] > 0 && s[1] > 0 && p[0] >= 0 && p[1] >= 0 && 2 * p[0] <= k[0] &&
             2 * p[1] <= k[1] && divisor >= 0,
         "%s: invalid kernel, stride, padding or divisor", op);
  ET_TRY(check_dtype(*in, ScalarType::Float, op, "input"));
  ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  const int64_t n = in->size(0), c = in->size(1), h = in->size(2), w = in->size(3);
  const int64_t oh = pool_out_size(h, k[0], s[0], p[0], 1, ceil_mode), ow = pool_out_size(w, k[1], s[1], p[1], 1, ceil_mode);
  ET_TRY(check_out4(*out, n, c, oh, ow, op));
  const float* x = in->data_ptr<float>();
  float* y = out->data_ptr<float>();
  extension::threadpool::parallel_for(0, n * c, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      const float* xp = x + plane * h * w;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t y0 = oy * s[0] - p[0], x0 = ox * s[1] - p[1];
          const int64_t y1 = std::min(y0 + k[0], h + p[0]), x1 = std::min(x0 + k[1], w + p[1]);
          const int64_t padded = (y1 - y0) * (x1 - x0);
          const int64_t ya = std::max<int64_t>(y0, 0), xa = std::max<int64_t>(x0, 0);
          const int64_t yb = std::min(y1, h), xb = std::min(x1, w);
          float sum = 0.f;
          for (int64_t iy = ya; iy < yb; ++iy)
            for (int64_t ix = xa; ix < xb; ++ix) sum += xp[iy * w + ix];
          const int64_t count = divisor ? divisor : include_pad ? padded : (yb - ya) * (xb - xa);
          y[(plane * oh + oy) * ow + ox] = count > 0 ? sum / static_cast<float>(count) : 0.f;
        }
      }
    }
  });
  return Error::Ok;
}

// _adaptive_avg_pool2d(self, output_size)
Error adaptive_avg_pool2d(KernelRuntimeContext&, Args args) {
  const char* op = "aten::_adaptive_avg_pool2d";
  ET_TRY(check_count(args, 3, op));
  Tensor *in, *out;
  ET_TRY(tensor_at(args, 0, op, &in));
  ET_TRY(tensor_at(args, 2, op, &out));
  int64_t os[2];
  ET_TRY(pair_at(args, 1, op, "output_size", 1, os));
  KCHECK(in->dim() == 4 && os[0] > 0 && os[1] > 0, "%s: 4-D input and positive output size required", op);
  ET_TRY(check_dtype(*in, ScalarType::Float, op, "input"));
  ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  const int64_t n = in->size(0), c = in->size(1), h = in->size(2), w = in->size(3);
  ET_TRY(check_out4(*out, n, c, os[0], os[1], op));
  const float* x = in->data_ptr<float>();
  float* y = out->data_ptr<float>();
  extension::threadpool::parallel_for(0, n * c, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      for (int64_t oy = 0; oy < os[0]; ++oy) {
        const int64_t ya = oy * h / os[0], yb = ((oy + 1) * h + os[0] - 1) / os[0];
        for (int64_t ox = 0; ox < os[1]; ++ox) {
          const int64_t xa = ox * w / os[1], xb = ((ox + 1) * w + os[1] - 1) / os[1];
          float sum = 0.f;
          for (int64_t iy = ya; iy < yb; ++iy)
            for (int64_t ix = xa; ix < xb; ++ix) sum += x[(plane * h + iy) * w + ix];
          const int64_t count = (yb - ya) * (xb - xa);
          y[(plane * os[0] + oy) * os[1] + ox] = count > 0 ? sum / static_cast<float>(count) : 0.f;
        }
      }
    }
  });
  return Error::Ok;
}

// adaptive_max_pool2d(self, output_size) -> (out, indices): the maximum of each adaptive window (the
// same windows as the average above); indices are flat within each plane, the first maximum wins.
Error adaptive_max_pool2d(KernelRuntimeContext&, Args args) {
  const char* op = "aten::adaptive_max_pool2d";
  ET_TRY(check_count(args, 4, op));
  Tensor *in, *out, *idx;
  ET_TRY(tensor_at(args, 0, op, &in));
  ET_TRY(tensor_at(args, 2, op, &out));
  ET_TRY(tensor_at(args, 3, op, &idx));
  int64_t os[2];
  ET_TRY(pair_at(args, 1, op, "output_size", 1, os));
  KCHECK(in->dim() == 4 && os[0] > 0 && os[1] > 0, "%s: 4-D input and positive output size required", op);
  ET_TRY(check_dtype(*in, ScalarType::Float, op, "input"));
  ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  ET_TRY(check_dtype(*idx, ScalarType::Long, op, "indices"));
  const int64_t n = in->size(0), c = in->size(1), h = in->size(2), w = in->size(3);
  KCHECK(h > 0 && w > 0, "%s: empty input plane", op);
  ET_TRY(check_out4(*out, n, c, os[0], os[1], op));
  ET_TRY(check_out4(*idx, n, c, os[0], os[1], op));
  const float* x = in->data_ptr<float>();
  float* y = out->data_ptr<float>();
  int64_t* yi = idx->data_ptr<int64_t>();
  extension::threadpool::parallel_for(0, n * c, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      const float* xp = x + plane * h * w;
      for (int64_t oy = 0; oy < os[0]; ++oy) {
        const int64_t ya = oy * h / os[0], yb = ((oy + 1) * h + os[0] - 1) / os[0];
        for (int64_t ox = 0; ox < os[1]; ++ox) {
          const int64_t xa = ox * w / os[1], xb = ((ox + 1) * w + os[1] - 1) / os[1];
          float best = xp[ya * w + xa];
          int64_t best_i = ya * w + xa;
          for (int64_t iy = ya; iy < yb; ++iy) {
            for (int64_t ix = xa; ix < xb; ++ix) {
              const float v = xp[iy * w + ix];
              if (v > best || (v != v && best == best)) best = v, best_i = iy * w + ix;
            }
          }
          y[(plane * os[0] + oy) * os[1] + ox] = best;
          yi[(plane * os[0] + oy) * os[1] + ox] = best_i;
        }
      }
    }
  });
  return Error::Ok;
}

const runtime::Kernel kKernels[] = {
    {"aten::convolution", convolution},
    {"aten::max_pool2d_with_indices", max_pool2d},
    {"aten::avg_pool2d", avg_pool2d},
    {"aten::_adaptive_avg_pool2d", adaptive_avg_pool2d},
    {"aten::adaptive_max_pool2d", adaptive_max_pool2d},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
