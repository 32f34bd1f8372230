// Resampling of the last two dimensions (interpolate): nearest, nearest-exact, bilinear, bicubic.
// Source coordinates follow PyTorch: with scale_factors given, 1/scale maps output to input;
// otherwise input/output sizes do (align_corners: (in - 1)/(out - 1)).
#include <algorithm>
#include <cmath>

#include "kernels/kernel_util.h"

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
  ET_TRY(check_count(args, count, op));
  Tensor *in, *out;
  ET_TRY(tensor_at(args, 0, op, &in));
  ET_TRY(tensor_at(args, count - 1, op, &out));
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
            const int64_t y0 = std::min(static_cast<int64_t>(sy), h - 1), x0 = std::min(static_cast<int64_t>(sx), w - 1);
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

Error nearest(KernelRuntimeContext&, Args args) { return upsample(args, "aten::upsample_nearest2d.vec", Mode::Nearest); }
Error nearest_exact(KernelRuntimeContext&, Args args) {
  return upsample(args, "aten::_upsample_nearest_exact2d.vec", Mode::NearestExact);
}
Error bilinear(KernelRuntimeContext&, Args args) { return upsample(args, "aten::upsample_bilinear2d.vec", Mode::Bilinear); }
Error bicubic(KernelRuntimeContext&, Args args) { return upsample(args, "aten::upsample_bicubic2d.vec", Mode::Bicubic); }

const runtime::Kernel kKernels[] = {
    {"aten::upsample_nearest2d.vec", nearest},
    {"aten::_upsample_nearest_exact2d.vec", nearest_exact},
    {"aten::upsample_bilinear2d.vec", bilinear},
    {"aten::upsample_bicubic2d.vec", bicubic},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
