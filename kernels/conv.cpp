// Convolution (im2col + sgemm; transposed through col2im; depthwise directly) and pooling, in 1-D,
// 2-D and 3-D. Every kernel works on three spatial dimensions (depth, height, width): a 2-D shape has
// depth 1, a 1-D shape height 1 as well, so one body serves all three ranks.
#include <algorithm>
#include <array>
#include <cfloat>
#include <vector>

#include <executorch/kernels/gemm.h>
#include <executorch/kernels/kernel_util.h>

namespace executorch {
namespace kernels {
namespace {

constexpr int kDims = 3;
using Dims = std::array<int64_t, kDims>;

int64_t volume(const Dims& d) { return d[0] * d[1] * d[2]; }

// The trailing `nd` sizes of `t`, right-aligned into three.
Dims spatial(const Tensor& t, int nd) {
  Dims d{1, 1, 1};
  for (int i = 0; i < nd; ++i) d[kDims - nd + i] = t.size(t.dim() - nd + i);
  return d;
}

// An int list of `nd` spatial parameters, right-aligned into three: one entry applies to every
// dimension, none gives `empty`, and the dimensions a lower rank lacks get `unused`.
Error dims_at(Args args, size_t i, const char* op, const char* what, int nd, int64_t empty, int64_t unused, Dims* out) {
  Span<const int64_t> v;
  ET_TRY(int_list_at(args, i, op, &v));
  KCHECK(v.size() <= 1 || v.size() == static_cast<size_t>(nd), "%s: %s must have 1 or %d entries", op, what, nd);
  // Real windows are small; the bound keeps the output-size arithmetic from overflowing.
  constexpr int64_t kMaxWindow = int64_t{1} << 20;
  for (int d = 0; d < kDims; ++d) {
    const int j = d - (kDims - nd);
    const int64_t x = j < 0 ? unused : v.size() == 0 ? empty : v[v.size() == 1 ? 0 : j];
    KCHECK(x >= -kMaxWindow && x <= kMaxWindow, "%s: %s out of range", op, what);
    (*out)[d] = x;
  }
  return Error::Ok;
}

// `out` has `like`'s rank and leading (batch, channel) sizes, except channel `c` when c >= 0, and
// spatial sizes `o`.
Error check_out(const Tensor& out, const Tensor& like, int nd, int64_t c, const Dims& o, const char* op) {
  bool ok = out.dim() == like.dim();
  for (int d = 0; ok && d < like.dim() - nd; ++d) {
    ok = out.size(d) == (c >= 0 && d == like.dim() - nd - 1 ? c : like.size(d));
  }
  ok = ok && spatial(out, nd) == o;
  KCHECK(ok, "%s: the planned output's shape does not match the input and window (spatial %lld x %lld x %lld)", op,
         static_cast<long long>(o[0]), static_cast<long long>(o[1]), static_cast<long long>(o[2]));
  return Error::Ok;
}

struct Window {
  Dims stride, pad, dil;
};

// Depthwise (one input channel per group): each output channel is a small stencil over its input
// volume, computed directly rather than through im2col and a GEMM of depth kd * kh * kw.
void depthwise(const float* x, const float* wt, const float* bias, float* y, int64_t n, int64_t c, int64_t oc,
               const Dims& in, const Dims& k, const Dims& o, const Window& win) {
  const int64_t mult = oc / c, in_vol = volume(in), out_vol = volume(o), k_vol = volume(k);
  const Dims &s = win.stride, &p = win.pad, &d = win.dil;
  extension::threadpool::parallel_for(0, n * oc, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      const int64_t b = plane / oc, oc_i = plane % oc;
      const float* xp = x + (b * c + oc_i / mult) * in_vol;
      const float* wp = wt + oc_i * k_vol;
      float* yp = y + plane * out_vol;
      std::fill(yp, yp + out_vol, bias ? bias[oc_i] : 0.f);
      for (int64_t kz = 0; kz < k[0]; ++kz) {
        for (int64_t ky = 0; ky < k[1]; ++ky) {
          for (int64_t kx = 0; kx < k[2]; ++kx) {
            const float wv = wp[(kz * k[1] + ky) * k[2] + kx];
            // Output columns whose input column lies inside the volume.
            const int64_t off = kx * d[2] - p[2];
            const int64_t x_lo = off >= 0 ? 0 : (-off + s[2] - 1) / s[2];
            const int64_t x_hi = in[2] - off <= 0 ? 0 : std::min(o[2], (in[2] - off + s[2] - 1) / s[2]);
            for (int64_t oz = 0; oz < o[0]; ++oz) {
              const int64_t iz = oz * s[0] - p[0] + kz * d[0];
              if (iz < 0 || iz >= in[0]) continue;
              for (int64_t oy = 0; oy < o[1]; ++oy) {
                const int64_t iy = oy * s[1] - p[1] + ky * d[1];
                if (iy < 0 || iy >= in[1]) continue;
                const float* row = xp + (iz * in[1] + iy) * in[2] + off;
                float* out = yp + (oz * o[1] + oy) * o[2];
                if (s[2] == 1) {
                  for (int64_t ox = x_lo; ox < x_hi; ++ox) out[ox] += wv * row[ox];
                } else {
                  for (int64_t ox = x_lo; ox < x_hi; ++ox) out[ox] += wv * row[ox * s[2]];
                }
              }
            }
          }
        }
      }
    }
  });
}

// The column matrix keeps at most this many floats; larger problems go through it in slices of
// output lines, so a 3-D convolution does not need gigabytes of scratch.
constexpr int64_t kColumnBudget = int64_t{1} << 22;

int64_t lines_per_slice(int64_t rows, int64_t line, int64_t lines) {
  return std::max<int64_t>(1, std::min(lines, kColumnBudget / std::max<int64_t>(1, rows * line)));
}

// Column rows (ci, kz, ky, kx) for output lines [l0, l1) (a line is one (oz, oy) pair: o[2] columns).
void im2col(const float* xg, float* dst, int64_t rows, int64_t l0, int64_t l1, const Dims& in, const Dims& k,
            const Dims& o, const Window& win) {
  const int64_t cols = (l1 - l0) * o[2], k_vol = volume(k), in_vol = volume(in);
  const Dims &s = win.stride, &p = win.pad, &d = win.dil;
  extension::threadpool::parallel_for(0, rows, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t ci = r / k_vol, kz = r % k_vol / (k[1] * k[2]), ky = r / k[2] % k[1], kx = r % k[2];
      const float* xc = xg + ci * in_vol;
      for (int64_t l = l0; l < l1; ++l) {
        float* line = dst + r * cols + (l - l0) * o[2];
        const int64_t iz = l / o[1] * s[0] - p[0] + kz * d[0], iy = l % o[1] * s[1] - p[1] + ky * d[1];
        if (iz < 0 || iz >= in[0] || iy < 0 || iy >= in[1]) {
          std::fill(line, line + o[2], 0.f);
          continue;
        }
        const float* src = xc + (iz * in[1] + iy) * in[2];
        for (int64_t ox = 0; ox < o[2]; ++ox) {
          const int64_t ix = ox * s[2] - p[2] + kx * d[2];
          line[ox] = ix >= 0 && ix < in[2] ? src[ix] : 0.f;
        }
      }
    }
  });
}

// Transposed convolution of one group: columns [ocg * k_vol, input positions] = weight_g^T x_g, in
// slices of input lines, each scattered into the output.
void transposed_group(const float* xg, const float* wg, float* yg, int64_t cg, int64_t ocg, const Dims& in,
                      const Dims& k, const Dims& o, const Window& win, std::vector<float>* col) {
  const int64_t k_vol = volume(k), rows = ocg * k_vol, in_vol = volume(in), out_vol = volume(o);
  const int64_t lines = in[0] * in[1], step = lines_per_slice(rows, in[2], lines);
  const Dims &s = win.stride, &p = win.pad, &d = win.dil;
  col->resize(static_cast<size_t>(rows * step * in[2]));
  for (int64_t l0 = 0; l0 < lines; l0 += step) {
    const int64_t l1 = std::min(lines, l0 + step), cols = (l1 - l0) * in[2];
    sgemm(rows, cols, cg, 1.f, wg, 1, rows, xg + l0 * in[2], in_vol, 1, 0.f, col->data(), cols);
    extension::threadpool::parallel_for(0, ocg, 1, [&](int64_t o0, int64_t o1) {
      for (int64_t oc_i = o0; oc_i < o1; ++oc_i) {
        float* yo = yg + oc_i * out_vol;
        for (int64_t kk = 0; kk < k_vol; ++kk) {
          const int64_t kz = kk / (k[1] * k[2]), ky = kk / k[2] % k[1], kx = kk % k[2];
          const float* src = col->data() + (oc_i * k_vol + kk) * cols;
          for (int64_t l = l0; l < l1; ++l) {
            const int64_t oz = l / in[1] * s[0] - p[0] + kz * d[0], oy = l % in[1] * s[1] - p[1] + ky * d[1];
            if (oz < 0 || oz >= o[0] || oy < 0 || oy >= o[1]) continue;
            float* out = yo + (oz * o[1] + oy) * o[2];
            const float* line = src + (l - l0) * in[2];
            for (int64_t ix = 0; ix < in[2]; ++ix) {
              const int64_t ox = ix * s[2] - p[2] + kx * d[2];
              if (ox >= 0 && ox < o[2]) out[ox] += line[ix];
            }
          }
        }
      }
    });
  }
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups):
// 1-D, 2-D and 3-D (the weight's rank says which), plain and transposed, any groups, batched or not.
Error convolution(KernelRuntimeContext&, Args args) {
  const char* op = "aten::convolution";
  Tensor *in, *w, *out, *bias = nullptr;
  ET_TRY(read_args(args, op, 10, at(0, &in), at(1, &w), optional_at(2, &bias), at(9, &out)));
  const int nd = w->dim() - 2;
  KCHECK(nd >= 1 && nd <= kDims && (in->dim() == nd + 2 || in->dim() == nd + 1),
         "%s: 1-D, 2-D or 3-D convolution is supported, got a %d-D weight and a %d-D input", op, w->dim(), in->dim());
  Window win;
  Dims out_pad;
  int64_t transposed = 0, groups = 1;
  ET_TRY(dims_at(args, 3, op, "stride", nd, 1, 1, &win.stride));
  ET_TRY(dims_at(args, 4, op, "padding", nd, 0, 0, &win.pad));
  ET_TRY(dims_at(args, 5, op, "dilation", nd, 1, 1, &win.dil));
  ET_TRY(int_at(args, 6, op, &transposed));
  ET_TRY(dims_at(args, 7, op, "output_padding", nd, 0, 0, &out_pad));
  ET_TRY(int_at(args, 8, op, &groups));
  for (const Tensor* t : {in, w, out}) ET_TRY(check_dtype(*t, ScalarType::Float, op, "tensor"));
  const bool batched = in->dim() == nd + 2;
  const int64_t n = batched ? in->size(0) : 1, c = in->size(batched ? 1 : 0);
  const Dims is = spatial(*in, nd), k = spatial(*w, nd);
  // Weight: [oc, c / groups, k...], or transposed [c, oc / groups, k...].
  const int64_t oc = transposed ? w->size(1) * groups : w->size(0);
  KCHECK(
      groups >= 1 && c % groups == 0 && oc % groups == 0 && (transposed ? w->size(0) == c : w->size(1) == c / groups),
      "%s: channels (%lld in, %lld out, weight %lld) do not split into %lld groups", op, static_cast<long long>(c),
      static_cast<long long>(oc), static_cast<long long>(w->size(1)), static_cast<long long>(groups));
  Dims os;
  for (int d = 0; d < kDims; ++d) {
    KCHECK(win.stride[d] > 0 && win.dil[d] > 0 && win.pad[d] >= 0 && out_pad[d] >= 0,
           "%s: stride and dilation must be positive, padding non-negative", op);
    const int64_t span = win.dil[d] * (k[d] - 1);
    os[d] = transposed ? (is[d] - 1) * win.stride[d] - 2 * win.pad[d] + span + out_pad[d] + 1
                       : (is[d] + 2 * win.pad[d] - span - 1) / win.stride[d] + 1;
    KCHECK(os[d] > 0, "%s: kernel larger than the padded input", op);
  }
  ET_TRY(check_out(*out, *in, nd, oc, os, op));
  if (bias) {
    ET_TRY(check_dtype(*bias, ScalarType::Float, op, "bias"));
    ET_TRY(check_numel(*bias, oc, op, "bias"));
  }
  const float* x = in->data_ptr<float>();
  const float* wt = w->data_ptr<float>();
  float* y = out->data_ptr<float>();
  const float* bp = bias ? bias->data_ptr<float>() : nullptr;
  const int64_t cg = c / groups, ocg = oc / groups, in_vol = volume(is), out_vol = volume(os), k_vol = volume(k);
  if (!transposed && cg == 1 && groups > 1) {
    depthwise(x, wt, bp, y, n, c, oc, is, k, os, win);
    return Error::Ok;
  }
  std::vector<float> col;
  if (transposed) {
    for (int64_t b = 0; b < n; ++b) {
      float* yb = y + b * oc * out_vol;
      for (int64_t o = 0; o < oc; ++o) std::fill(yb + o * out_vol, yb + (o + 1) * out_vol, bp ? bp[o] : 0.f);
      for (int64_t g = 0; g < groups; ++g) {
        transposed_group(x + (b * c + g * cg) * in_vol, wt + g * cg * ocg * k_vol, yb + g * ocg * out_vol, cg, ocg, is,
                         k, os, win, &col);
      }
    }
    return Error::Ok;
  }
  const int64_t rows = cg * k_vol, lines = os[0] * os[1];
  bool direct = k_vol == 1;
  for (int d = 0; d < kDims; ++d) direct = direct && win.stride[d] == 1 && win.pad[d] == 0;
  const int64_t step = direct ? lines : lines_per_slice(rows, os[2], lines);
  if (!direct) col.resize(static_cast<size_t>(rows * step * os[2]));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + (b * c + g * cg) * in_vol;
      float* yg = y + (b * oc + g * ocg) * out_vol;
      if (bp) {
        for (int64_t o = 0; o < ocg; ++o) std::fill(yg + o * out_vol, yg + (o + 1) * out_vol, bp[g * ocg + o]);
      }
      for (int64_t l0 = 0; l0 < lines; l0 += step) {
        const int64_t l1 = std::min(lines, l0 + step), cols = (l1 - l0) * os[2];
        const float* src = xg + l0 * os[2];
        if (!direct) {
          im2col(xg, col.data(), rows, l0, l1, is, k, os, win);
          src = col.data();
        }
        sgemm(ocg, cols, rows, 1.f, wt + g * ocg * rows, rows, 1, src, direct ? out_vol : cols, 1, bp ? 1.f : 0.f,
              yg + l0 * os[2], out_vol);
      }
    }
  }
  return Error::Ok;
}

// Pooling treats every leading (batch, channel) index as an independent plane of `in` sizes.
struct Pool {
  int nd;
  int64_t planes;
  Dims in;
};

Error pool_input(const Tensor& t, int nd, const char* op, Pool* p) {
  KCHECK(t.dim() == nd + 1 || t.dim() == nd + 2, "%s: input must be %d-D or %d-D, got %d-D", op, nd + 1, nd + 2,
         t.dim());
  ET_TRY(check_dtype(t, ScalarType::Float, op, "input"));
  p->nd = nd;
  p->planes = 1;
  for (int d = 0; d < t.dim() - nd; ++d) p->planes *= t.size(d);
  p->in = spatial(t, nd);
  return Error::Ok;
}

int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // The last window must start inside the input or the left padding (PyTorch's rule).
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// Kernel, stride (defaulting to the kernel), padding and dilation of a strided pooling window.
struct PoolWindow {
  Dims k;
  Window w;
  int64_t ceil_mode;
};

Error pool_window_at(Args args, const char* op, int nd, bool dilated, PoolWindow* pw) {
  ET_TRY(dims_at(args, 1, op, "kernel_size", nd, 1, 1, &pw->k));
  ET_TRY(dims_at(args, 2, op, "stride", nd, 0, 1, &pw->w.stride));
  ET_TRY(dims_at(args, 3, op, "padding", nd, 0, 0, &pw->w.pad));
  if (dilated) {
    ET_TRY(dims_at(args, 4, op, "dilation", nd, 1, 1, &pw->w.dil));
  } else {
    pw->w.dil = Dims{1, 1, 1};
  }
  ET_TRY(int_at(args, dilated ? 5 : 4, op, &pw->ceil_mode));
  for (int d = 0; d < kDims; ++d) {
    if (pw->w.stride[d] == 0) pw->w.stride[d] = pw->k[d];
    KCHECK(pw->k[d] > 0 && pw->w.stride[d] > 0 && pw->w.dil[d] > 0 && pw->w.pad[d] >= 0 && 2 * pw->w.pad[d] <= pw->k[d],
           "%s: invalid kernel, stride, padding or dilation", op);
  }
  return Error::Ok;
}

Dims pool_out(const Pool& p, const PoolWindow& pw) {
  Dims o;
  for (int d = 0; d < kDims; ++d) {
    o[d] = pool_out_size(p.in[d], pw.k[d], pw.w.stride[d], pw.w.pad[d], pw.w.dil[d], pw.ceil_mode);
  }
  return o;
}

// One axis of a window: input indices start + i * step for i in [lo, hi), all inside the input.
struct Axis {
  int64_t start, step, lo, hi;
};

Axis strided_axis(int64_t o, int64_t k, int64_t s, int64_t p, int64_t d, int64_t in) {
  const int64_t start = o * s - p;
  const int64_t lo = start >= 0 ? 0 : (-start + d - 1) / d;
  const int64_t hi = start >= in ? 0 : std::min(k, (in - 1 - start) / d + 1);
  return {start, d, lo, std::max(lo, hi)};
}

// PyTorch's adaptive window i of `out` over `in`: [floor(i * in / out), ceil((i + 1) * in / out)).
Axis adaptive_axis(int64_t i, int64_t in, int64_t out) {
  return {i * in / out, 1, 0, ((i + 1) * in + out - 1) / out - i * in / out};
}

// A windowed pooling's input planes, window (with dilation for max pooling) and output size.
Error window_setup(Args args, const char* op, int nd, bool dilated, const Tensor& in, Pool* p, PoolWindow* pw,
                   Dims* o) {
  ET_TRY(pool_input(in, nd, op, p));
  ET_TRY(pool_window_at(args, op, nd, dilated, pw));
  *o = pool_out(*p, *pw);
  return Error::Ok;
}

// A pooling's float32 output (and int64 indices, where it has them) of spatial shape o.
Error pool_outputs(const Tensor& in, const Tensor& out, const Tensor* indices, int nd, const Dims& o, const char* op) {
  ET_TRY(check_dtype(out, ScalarType::Float, op, "output"));
  ET_TRY(check_out(out, in, nd, -1, o, op));
  if (indices == nullptr) return Error::Ok;
  ET_TRY(check_dtype(*indices, ScalarType::Long, op, "indices"));
  return check_out(*indices, in, nd, -1, o, op);
}

// Calls window(the plane of float32 `in`, flat output index, z, y, x axes) for every output
// position of every plane.
template <typename AxisFn, typename WindowFn>
void for_each_window(const Tensor& in, const Pool& p, const Dims& o, AxisFn axis, WindowFn window) {
  const float* x = in.data_ptr<float>();
  const int64_t in_vol = volume(p.in);
  extension::threadpool::parallel_for(0, p.planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      for (int64_t oz = 0; oz < o[0]; ++oz) {
        const Axis az = axis(0, oz);
        for (int64_t oy = 0; oy < o[1]; ++oy) {
          const Axis ay = axis(1, oy);
          for (int64_t ox = 0; ox < o[2]; ++ox) {
            window(x + plane * in_vol, (plane * o[0] + oz) * o[1] * o[2] + oy * o[2] + ox, az, ay, axis(2, ox));
          }
        }
      }
    }
  });
}

// The window's maximum and its flat index within the plane; the first maximum wins, NaN propagates.
void window_max(const float* xp, const Dims& in, const Axis& z, const Axis& y, const Axis& x, float* best,
                int64_t* best_i) {
  *best = -FLT_MAX;
  *best_i = -1;
  for (int64_t i = z.lo; i < z.hi; ++i) {
    const int64_t iz = z.start + i * z.step;
    for (int64_t j = y.lo; j < y.hi; ++j) {
      const int64_t row = (iz * in[1] + y.start + j * y.step) * in[2];
      for (int64_t l = x.lo; l < x.hi; ++l) {
        const int64_t at = row + x.start + l * x.step;
        const float v = xp[at];
        if (*best_i < 0 || v > *best || (v != v && *best == *best)) *best = v, *best_i = at;
      }
    }
  }
}

// The sum of the window's elements (both averages: unit steps).
float window_sum(const float* xp, const Dims& in, const Axis& z, const Axis& y, const Axis& x) {
  float sum = 0.f;
  for (int64_t i = z.lo; i < z.hi; ++i) {
    const int64_t iz = z.start + i * z.step;
    for (int64_t j = y.lo; j < y.hi; ++j) {
      const float* row = xp + (iz * in[1] + y.start + j * y.step) * in[2];
      for (int64_t l = x.lo; l < x.hi; ++l) sum += row[x.start + l * x.step];
    }
  }
  return sum;
}

int64_t cells(const Axis& a, const Axis& b, const Axis& c) { return (a.hi - a.lo) * (b.hi - b.lo) * (c.hi - c.lo); }

// max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (out, indices)
template <int ND>
Error max_pool(KernelRuntimeContext&, Args args) {
  const char* op = ND == 2 ? "aten::max_pool2d_with_indices" : "aten::max_pool3d_with_indices";
  Tensor *in, *out, *idx;
  ET_TRY(read_args(args, op, 8, at(0, &in), at(6, &out), at(7, &idx)));
  Pool p;
  PoolWindow pw;
  Dims o;
  ET_TRY(window_setup(args, op, ND, true, *in, &p, &pw, &o));
  ET_TRY(pool_outputs(*in, *out, idx, ND, o, op));
  float* y = out->data_ptr<float>();
  int64_t* yi = idx->data_ptr<int64_t>();
  auto axis = [&](int d, int64_t i) {
    return strided_axis(i, pw.k[d], pw.w.stride[d], pw.w.pad[d], pw.w.dil[d], p.in[d]);
  };
  for_each_window(*in, p, o, axis, [&](const float* xp, int64_t at, const Axis& z, const Axis& ay, const Axis& ax) {
    window_max(xp, p.in, z, ay, ax, &y[at], &yi[at]);
  });
  return Error::Ok;
}

// avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
template <int ND>
Error avg_pool(KernelRuntimeContext&, Args args) {
  const char* op = ND == 2 ? "aten::avg_pool2d" : "aten::avg_pool3d";
  Tensor *in, *out;
  ET_TRY(input_output(args, 8, op, &in, &out));
  int64_t include_pad, divisor = 0;
  ET_TRY(int_at(args, 5, op, &include_pad));
  if (!args[6]->is_none()) ET_TRY(int_at(args, 6, op, &divisor));
  KCHECK(divisor >= 0, "%s: divisor_override must be positive", op);
  Pool p;
  PoolWindow pw;
  Dims o;
  ET_TRY(window_setup(args, op, ND, false, *in, &p, &pw, &o));
  ET_TRY(pool_outputs(*in, *out, nullptr, ND, o, op));
  float* y = out->data_ptr<float>();
  auto axis = [&](int d, int64_t i) { return strided_axis(i, pw.k[d], pw.w.stride[d], pw.w.pad[d], 1, p.in[d]); };
  // The window clipped to the padded input, which count_include_pad divides by.
  auto padded = [&](int d, const Axis& a) { return std::min(a.start + pw.k[d], p.in[d] + pw.w.pad[d]) - a.start; };
  for_each_window(*in, p, o, axis, [&](const float* xp, int64_t at, const Axis& az, const Axis& ay, const Axis& ax) {
    const float sum = window_sum(xp, p.in, az, ay, ax);
    const int64_t count = divisor       ? divisor
                          : include_pad ? padded(0, az) * padded(1, ay) * padded(2, ax)
                                        : cells(az, ay, ax);
    y[at] = count > 0 ? sum / static_cast<float>(count) : 0.f;
  });
  return Error::Ok;
}

Error adaptive_setup(Args args, const char* op, int nd, Tensor* in, Pool* p, Dims* o) {
  ET_TRY(pool_input(*in, nd, op, p));
  ET_TRY(dims_at(args, 1, op, "output_size", nd, 1, 1, o));
  for (int d = 0; d < kDims; ++d) KCHECK((*o)[d] > 0, "%s: output size must be positive", op);
  KCHECK(volume(p->in) > 0, "%s: empty input plane", op);
  return Error::Ok;
}

// _adaptive_avg_pool{2,3}d(self, output_size)
template <int ND>
Error adaptive_avg_pool(KernelRuntimeContext&, Args args) {
  const char* op = ND == 2 ? "aten::_adaptive_avg_pool2d" : "aten::_adaptive_avg_pool3d";
  Tensor *in, *out;
  ET_TRY(input_output(args, 3, op, &in, &out));
  Pool p;
  Dims o;
  ET_TRY(adaptive_setup(args, op, ND, in, &p, &o));
  ET_TRY(pool_outputs(*in, *out, nullptr, ND, o, op));
  float* y = out->data_ptr<float>();
  auto axis = [&](int d, int64_t i) { return adaptive_axis(i, p.in[d], o[d]); };
  for_each_window(*in, p, o, axis, [&](const float* xp, int64_t at, const Axis& az, const Axis& ay, const Axis& ax) {
    y[at] = window_sum(xp, p.in, az, ay, ax) / static_cast<float>(cells(az, ay, ax));
  });
  return Error::Ok;
}

// adaptive_max_pool{2,3}d(self, output_size) -> (out, indices): the maximum of each adaptive window
// (the same windows as the average above); indices are flat within each plane.
template <int ND>
Error adaptive_max_pool(KernelRuntimeContext&, Args args) {
  const char* op = ND == 2 ? "aten::adaptive_max_pool2d" : "aten::adaptive_max_pool3d";
  Tensor *in, *out, *idx;
  ET_TRY(read_args(args, op, 4, at(0, &in), at(2, &out), at(3, &idx)));
  Pool p;
  Dims o;
  ET_TRY(adaptive_setup(args, op, ND, in, &p, &o));
  ET_TRY(pool_outputs(*in, *out, idx, ND, o, op));
  float* y = out->data_ptr<float>();
  int64_t* yi = idx->data_ptr<int64_t>();
  auto axis = [&](int d, int64_t i) { return adaptive_axis(i, p.in[d], o[d]); };
  for_each_window(*in, p, o, axis, [&](const float* xp, int64_t at, const Axis& az, const Axis& ay, const Axis& ax) {
    window_max(xp, p.in, az, ay, ax, &y[at], &yi[at]);
  });
  return Error::Ok;
}

const runtime::Kernel kKernels[] = {
    {"aten::convolution", convolution},
    {"aten::max_pool2d_with_indices", max_pool<2>},
    {"aten::max_pool3d_with_indices", max_pool<3>},
    {"aten::avg_pool2d", avg_pool<2>},
    {"aten::avg_pool3d", avg_pool<3>},
    {"aten::_adaptive_avg_pool2d", adaptive_avg_pool<2>},
    {"aten::_adaptive_avg_pool3d", adaptive_avg_pool<3>},
    {"aten::adaptive_max_pool2d", adaptive_max_pool<2>},
    {"aten::adaptive_max_pool3d", adaptive_max_pool<3>},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
