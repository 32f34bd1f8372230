// Resampling of the last two dimensions (interpolate): nearest, nearest-exact, bilinear, bicubic;
// and sampling at given points (grid_sample).
// Source coordinates follow PyTorch: with scale_factors given, 1/scale maps output to input;
// otherwise input/output sizes do (align_corners: (in - 1)/(out - 1)).
#include <algorithm>
#include <cmath>

#include <executorch/kernels/kernel_util.h>

namespace executorch {
namespace kernels {
namespace {

enum class Mode { Nearest, NearestExact, Bilinear, Bicubic };

struct Axis {
  int64_t in = 0, out = 0;
  double scale = 0;  // source step per output step
};

Axis make_axis(int64_t in, int64_t out, bool align_corners, double scale_factor) {
  Axis a{in, out, 0};
  if (align_corners) {
    a.scale = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0;
  } else {
    a.scale = scale_factor > 0 ? 1.0 / scale_factor : static_cast<double>(in) / static_cast<double>(out);
  }
  return a;
}

double source(const Axis& a, int64_t o, bool align_corners, bool cubic) {
  if (align_corners) return a.scale * o;
  const double s = a.scale * (o + 0.5) - 0.5;
  return cubic ? s : std::max(s, 0.0);
}

// Keys' cubic convolution with A = -0.75 (PyTorch's).
void cubic_weights(double t, double w[4]) {
  const double A = -0.75;
  auto near = [A](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto far = [A](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  w[0] = far(t + 1), w[1] = near(t), w[2] = near(1 - t), w[3] = far(2 - t);
}

// op(input, output_size?, [align_corners,] scale_factors?)
Error upsample(Args args, const char* op, Mode mode) {
  const bool has_align = mode == Mode::Bilinear || mode == Mode::Bicubic;
  const size_t count = has_align ? 5 : 4;
  Tensor *in, *out;
  ET_TRY(input_output(args, count, op, &in, &out));
  int64_t align = 0;
  if (has_align) ET_TRY(int_at(args, 2, op, &align));
  double scales[2] = {0, 0};
  const EValue* sf = args[count - 2];
  if (sf->tag() == EValue::Tag::DoubleList) {
    const auto v = sf->to_double_list();
    KCHECK(v.size() == 2, "%s: two scale factors expected", op);
    scales[0] = v[0], scales[1] = v[1];
  }
  ET_TRY(check_dtype(*in, ScalarType::Float, op, "input"));
  ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  KCHECK(in->dim() == 4 && out->dim() == 4 && out->size(0) == in->size(0) && out->size(1) == in->size(1) &&
             in->size(2) > 0 && in->size(3) > 0,
         "%s: 4-D input and output of the same batch and channels required", op);
  const Axis ay = make_axis(in->size(2), out->size(2), align, scales[0]);
  const Axis ax = make_axis(in->size(3), out->size(3), align, scales[1]);
  const int64_t h = in->size(2), w = in->size(3), oh = out->size(2), ow = out->size(3);
  const float* x = in->data_ptr<float>();
  float* y = out->data_ptr<float>();
  extension::threadpool::parallel_for(0, in->size(0) * in->size(1), 1, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      const float* xp = x + plane * h * w;
      float* yp = y + plane * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          float v;
          if (mode == Mode::Nearest || mode == Mode::NearestExact) {
            const double off = mode == Mode::NearestExact ? 0.5 : 0.0;
            const int64_t iy = std::min(static_cast<int64_t>(std::floor((oy + off) * ay.scale)), h - 1);
            const int64_t ix = std::min(static_cast<int64_t>(std::floor((ox + off) * ax.scale)), w - 1);
            v = xp[iy * w + ix];
          } else if (mode == Mode::Bilinear) {
            const double sy = source(ay, oy, align, false), sx = source(ax, ox, align, false);
            const int64_t y0 = std::min(static_cast<int64_t>(sy), h - 1),
                          x0 = std::min(static_cast<int64_t>(sx), w - 1);
            const int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
            const float ty = static_cast<float>(sy - y0), tx = static_cast<float>(sx - x0);
            v = (1 - ty) * ((1 - tx) * xp[y0 * w + x0] + tx * xp[y0 * w + x1]) +
                ty * ((1 - tx) * xp[y1 * w + x0] + tx * xp[y1 * w + x1]);
          } else {
            const double sy = source(ay, oy, align, true), sx = source(ax, ox, align, true);
            const int64_t fy = static_cast<int64_t>(std::floor(sy)), fx = static_cast<int64_t>(std::floor(sx));
            double wy[4], wx[4];
            cubic_weights(sy - fy, wy);
            cubic_weights(sx - fx, wx);
            double acc = 0;
            for (int i = 0; i < 4; ++i) {
              const int64_t iy = std::min(std::max<int64_t>(fy - 1 + i, 0), h - 1);
              for (int j = 0; j < 4; ++j) {
                const int64_t ix = std::min(std::max<int64_t>(fx - 1 + j, 0), w - 1);
                acc += wy[i] * wx[j] * xp[iy * w + ix];
              }
            }
            v = static_cast<float>(acc);
          }
          yp[oy * ow + ox] = v;
        }
      }
    }
  });
  return Error::Ok;
}

Error nearest(KernelRuntimeContext&, Args args) {
  return upsample(args, "aten::upsample_nearest2d.vec", Mode::Nearest);
}
Error nearest_exact(KernelRuntimeContext&, Args args) {
  return upsample(args, "aten::_upsample_nearest_exact2d.vec", Mode::NearestExact);
}
Error bilinear(KernelRuntimeContext&, Args args) {
  return upsample(args, "aten::upsample_bilinear2d.vec", Mode::Bilinear);
}
Error bicubic(KernelRuntimeContext&, Args args) {
  return upsample(args, "aten::upsample_bicubic2d.vec", Mode::Bicubic);
}

// grid_sampler_2d's padding: where a sample outside the input reads.
enum class GridPad { Zeros, Border, Reflection };

// `x` reflected into [lo / 2, hi / 2] (the bounds given doubled, as they fall on half pixels).
double reflect(double x, int64_t twice_lo, int64_t twice_hi) {
  if (twice_lo == twice_hi) return 0;
  const double lo = twice_lo / 2.0, span = (twice_hi - twice_lo) / 2.0;
  x = std::fabs(x - lo);
  const double extra = std::fmod(x, span);
  return std::fmod(std::floor(x / span), 2.0) == 0 ? extra + lo : span - extra + lo;
}

// floor(v) as an index, held within a few pixels of [0, size): beyond that every tap reads the same
// as at the bound (zero, or the clipped edge), and a far or NaN coordinate never overflows the cast.
int64_t tap_index(double v, int64_t size) {
  if (!(v > -4)) return -4;
  return v > static_cast<double>(size + 3) ? size + 3 : static_cast<int64_t>(std::floor(v));
}

// A pixel coordinate after padding: clipped to the input for border, mirrored for reflection.
double pad_coordinate(double x, int64_t size, GridPad pad, bool align_corners) {
  if (pad == GridPad::Reflection) {
    x = align_corners ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
  }
  if (pad != GridPad::Zeros) x = std::min(static_cast<double>(size - 1), std::max(x, 0.0));
  return x;
}

// grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners): out[n, c, i, j]
// samples input[n, c] at grid[n, i, j] = (x, y) in [-1, 1]; bilinear (0), nearest (1) or bicubic (2).
Error grid_sampler_2d(KernelRuntimeContext&, Args args) {
  const char* op = "aten::grid_sampler_2d";
  Tensor *in, *grid, *out;
  int64_t mode, padding, align;
  ET_TRY(read_args(args, op, 6, at(0, &in), at(1, &grid), at(5, &out), at(2, &mode), at(3, &padding), at(4, &align)));
  KCHECK(mode >= 0 && mode <= 2 && padding >= 0 && padding <= 2, "%s: unknown interpolation or padding mode", op);
  for (const Tensor* t : {in, grid, out}) ET_TRY(check_dtype(*t, ScalarType::Float, op, "tensor"));
  KCHECK(in->dim() == 4 && grid->dim() == 4 && grid->size(0) == in->size(0) && grid->size(3) == 2,
         "%s: input [N, C, H, W] and grid [N, H_out, W_out, 2] expected", op);
  const int64_t n = in->size(0), c = in->size(1), h = in->size(2), w = in->size(3);
  const int64_t oh = grid->size(1), ow = grid->size(2);
  KCHECK(out->dim() == 4 && out->size(0) == n && out->size(1) == c && out->size(2) == oh && out->size(3) == ow,
         "%s: output shape does not match [N, C, H_out, W_out]", op);
  KCHECK(h > 0 && w > 0, "%s: empty input plane", op);
  const GridPad pad = static_cast<GridPad>(padding);
  const float* x = in->data_ptr<float>();
  const float* g = grid->data_ptr<float>();
  float* y = out->data_ptr<float>();
  // Normalized [-1, 1] to pixel coordinates: corner pixel centres (align_corners) or edges.
  auto unnormalize = [align](double v, int64_t size) {
    return align ? (v + 1) / 2 * static_cast<double>(size - 1) : ((v + 1) * static_cast<double>(size) - 1) / 2;
  };
  extension::threadpool::parallel_for(0, n * oh, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / oh, i = r % oh;
      const float* plane0 = x + b * c * h * w;
      auto at = [&](int64_t ch, int64_t yy, int64_t xx) -> double {
        return yy >= 0 && yy < h && xx >= 0 && xx < w ? plane0[(ch * h + yy) * w + xx] : 0.0;
      };
      for (int64_t j = 0; j < ow; ++j) {
        const float* gp = g + ((b * oh + i) * ow + j) * 2;
        const double gx = unnormalize(gp[0], w), gy = unnormalize(gp[1], h);
        float* yp = y + (b * c * oh + i) * ow + j;
        if (mode == 2) {
          // Bicubic taps around the unpadded point; each tap is padded on its own (PyTorch's rule).
          const int64_t fx = tap_index(gx, w), fy = tap_index(gy, h);
          double wx[4], wy[4];
          cubic_weights(gx - std::floor(gx), wx);
          cubic_weights(gy - std::floor(gy), wy);
          int64_t tx[4], ty[4];
          for (int k = 0; k < 4; ++k) {
            tx[k] = tap_index(pad_coordinate(static_cast<double>(fx - 1 + k), w, pad, align), w);
            ty[k] = tap_index(pad_coordinate(static_cast<double>(fy - 1 + k), h, pad, align), h);
          }
          for (int64_t ch = 0; ch < c; ++ch) {
            double acc = 0;
            for (int a = 0; a < 4; ++a)
              for (int k = 0; k < 4; ++k) acc += wy[a] * wx[k] * at(ch, ty[a], tx[k]);
            yp[ch * oh * ow] = static_cast<float>(acc);
          }
          continue;
        }
        const double px = pad_coordinate(gx, w, pad, align), py = pad_coordinate(gy, h, pad, align);
        if (mode == 1) {
          const int64_t xx = tap_index(std::nearbyint(px), w), yy = tap_index(std::nearbyint(py), h);
          for (int64_t ch = 0; ch < c; ++ch) yp[ch * oh * ow] = static_cast<float>(at(ch, yy, xx));
          continue;
        }
        const int64_t xi = tap_index(px, w), yi = tap_index(py, h);
        const double ax = px - std::floor(px), ay = py - std::floor(py);
        for (int64_t ch = 0; ch < c; ++ch) {
          yp[ch * oh * ow] = static_cast<float>((1 - ay) * ((1 - ax) * at(ch, yi, xi) + ax * at(ch, yi, xi + 1)) +
                                                ay * ((1 - ax) * at(ch, yi + 1, xi) + ax * at(ch, yi + 1, xi + 1)));
        }
      }
    }
  });
  return Error::Ok;
}

const runtime::Kernel kKernels[] = {
    {"aten::grid_sampler_2d", grid_sampler_2d},
    {"aten::upsample_nearest2d.vec", nearest},
    {"aten::_upsample_nearest_exact2d.vec", nearest_exact},
    {"aten::upsample_bilinear2d.vec", bilinear},
    {"aten::upsample_bicubic2d.vec", bicubic},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
