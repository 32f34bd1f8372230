// Reductions over a set of dimensions: sum, mean, amax, amin.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

enum class Reduce { Sum, Mean, Max, Min, Any, All };

// op(self, dims?, keepdim, ...) -> out; `dims` empty or None means every dimension.
Error reduce(Args args, const char* op, size_t count, Reduce kind) {
  ET_TRY(check_count(args, count, op));
  Tensor *in, *out;
  ET_TRY(tensor_at(args, 0, op, &in));
  ET_TRY(tensor_at(args, count - 1, op, &out));
  bool reduced[runtime::kTensorDimensionLimit] = {};
  if (args[1]->is_none() || (args[1]->is_int_list() && args[1]->to_int_list().size() == 0)) {
    for (int d = 0; d < in->dim(); ++d) reduced[d] = true;
  } else {
    Span<const int64_t> dims;
    ET_TRY(int_list_at(args, 1, op, &dims));
    for (int64_t d : dims) {
      int64_t nd;
      ET_TRY(normalize_dim(d, in->dim(), op, &nd));
      reduced[nd] = true;
    }
  }
  const bool logical = kind == Reduce::Any || kind == Reduce::All;
  if (logical) {
    KCHECK(is_supported_dtype(in->scalar_type()), "%s: unsupported input dtype", op);
    ET_TRY(check_dtype(*out, ScalarType::Bool, op, "output"));
  } else {
    ET_TRY(check_dtype(*in, ScalarType::Float, op, "input"));
    ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  }
  // Kept and reduced dimensions with the input's strides.
  int64_t kept_size[runtime::kTensorDimensionLimit], kept_stride[runtime::kTensorDimensionLimit];
  int64_t red_size[runtime::kTensorDimensionLimit], red_stride[runtime::kTensorDimensionLimit];
  int nk = 0, nr = 0;
  int64_t stride = 1, out_numel = 1, red_numel = 1;
  for (int d = in->dim() - 1; d >= 0; --d) {
    if (reduced[d]) {
      red_size[nr] = in->size(d), red_stride[nr++] = stride, red_numel *= in->size(d);
    } else {
      kept_size[nk] = in->size(d), kept_stride[nk++] = stride, out_numel *= in->size(d);
    }
    stride *= in->size(d);
  }
  ET_TRY(check_numel(*out, out_numel, op, "output"));
  KCHECK(red_numel > 0 || kind == Reduce::Sum || logical, "%s: reducing an empty dimension", op);
  extension::threadpool::parallel_for(0, out_numel, std::max<int64_t>(1, 8192 / std::max<int64_t>(red_numel, 1)),
                                      [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      int64_t base = 0, rem = o;
      for (int k = 0; k < nk; ++k) base += (rem % kept_size[k]) * kept_stride[k], rem /= kept_size[k];
      double acc = kind == Reduce::Max ? -std::numeric_limits<double>::infinity()
                   : kind == Reduce::Min ? std::numeric_limits<double>::infinity()
                   : kind == Reduce::All ? 1.0 : 0.0;
      for (int64_t r = 0; r < red_numel; ++r) {
        int64_t off = base, rr = r;
        for (int k = 0; k < nr; ++k) off += (rr % red_size[k]) * red_stride[k], rr /= red_size[k];
        const double v = load<double>(*in, off);
        switch (kind) {
          case Reduce::Any: acc = (acc != 0 || v != 0) ? 1.0 : 0.0; break;
          case Reduce::All: acc = (acc != 0 && v != 0) ? 1.0 : 0.0; break;
          case Reduce::Sum: case Reduce::Mean: acc += v; break;
          case Reduce::Max: acc = (v > acc || v != v) ? v : acc; break;
          case Reduce::Min: acc = (v < acc || v != v) ? v : acc; break;
        }
      }
      if (kind == Reduce::Mean) acc /= static_cast<double>(red_numel);
      store<double>(*out, o, acc);
    }
  });
  return Error::Ok;
}

// sum.dim_IntList(self, dim?, keepdim, dtype?), mean.dim(self, dim?, keepdim, dtype?)
Error sum(KernelRuntimeContext&, Args args) { return reduce(args, "aten::sum.dim_IntList", 5, Reduce::Sum); }
Error mean(KernelRuntimeContext&, Args args) { return reduce(args, "aten::mean.dim", 5, Reduce::Mean); }
// amax(self, dim, keepdim), amin(self, dim, keepdim)
Error amax(KernelRuntimeContext&, Args args) { return reduce(args, "aten::amax", 4, Reduce::Max); }
Error amin(KernelRuntimeContext&, Args args) { return reduce(args, "aten::amin", 4, Reduce::Min); }
// any.dim(self, dim, keepdim), all.dim(self, dim, keepdim): the dim is one int; any.dims takes a list.
Error any_dim(KernelRuntimeContext&, Args args) {
  KCHECK(args.size() == 4 && args[1]->is_int(), "aten::any.dim takes (self, int dim, keepdim, out)");
  const int64_t dim = args[1]->to_int();
  EValue list = EValue::int_list(Span<const int64_t>(&dim, 1));
  EValue* patched[4] = {args[0], &list, args[2], args[3]};
  return reduce(Args(patched, 4), "aten::any.dim", 4, Reduce::Any);
}
Error all_dim(KernelRuntimeContext&, Args args) {
  KCHECK(args.size() == 4 && args[1]->is_int(), "aten::all.dim takes (self, int dim, keepdim, out)");
  const int64_t dim = args[1]->to_int();
  EValue list = EValue::int_list(Span<const int64_t>(&dim, 1));
  EValue* patched[4] = {args[0], &list, args[2], args[3]};
  return reduce(Args(patched, 4), "aten::all.dim", 4, Reduce::All);
}
Error any_dims(KernelRuntimeContext&, Args args) { return reduce(args, "aten::any.dims", 4, Reduce::Any); }

const runtime::Kernel kKernels[] = {
    {"aten::sum.dim_IntList", sum},
    {"aten::mean.dim", mean},
    {"aten::amax", amax},
    {"aten::amin", amin},
    {"aten::any.dim", any_dim},
    {"aten::any.dims", any_dims},
    {"aten::all.dim", all_dim},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
