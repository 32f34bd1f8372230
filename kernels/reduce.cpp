// Reductions over a set of dimensions: sum, mean, prod, amax/amin, max/min (with indices),
// argmax/argmin, var, vector norms, any/all; cumulative sums; histograms; topk and sort.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <executorch/kernels/kernel_util.h>

namespace executorch {
namespace kernels {
namespace {

enum class Reduce { Sum, Mean, Prod, Max, Min, Any, All, ArgMax, ArgMin, Var, Norm };

// op(self, dims?, keepdim, ...) -> out; `dims` empty or None means every dimension.
// `param` is the correction of Var and the order of Norm.
Error reduce(Args args, const char* op, size_t count, Reduce kind, double param = 0) {
  Tensor *in, *out;
  ET_TRY(input_output(args, count, op, &in, &out));
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
  const bool arg = kind == Reduce::ArgMax || kind == Reduce::ArgMin;
  KCHECK(is_supported_dtype(in->scalar_type()) && is_supported_dtype(out->scalar_type()), "%s: unsupported dtype", op);
  if (logical) ET_TRY(check_dtype(*out, ScalarType::Bool, op, "output"));
  if (arg) ET_TRY(check_dtype(*out, ScalarType::Long, op, "output"));
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
  KCHECK(red_numel > 0 || kind == Reduce::Sum || kind == Reduce::Prod || logical, "%s: reducing an empty dimension",
         op);
  extension::threadpool::parallel_for(
      0, out_numel, std::max<int64_t>(1, 8192 / std::max<int64_t>(red_numel, 1)), [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          int64_t base = 0, rem = o;
          for (int k = 0; k < nk; ++k) base += (rem % kept_size[k]) * kept_stride[k], rem /= kept_size[k];
          const double inf = std::numeric_limits<double>::infinity();
          const bool norm_max = kind == Reduce::Norm && std::isinf(param);
          double acc = kind == Reduce::Max || kind == Reduce::ArgMax || (norm_max && param > 0)   ? -inf
                       : kind == Reduce::Min || kind == Reduce::ArgMin || (norm_max && param < 0) ? inf
                       : kind == Reduce::All || kind == Reduce::Prod                              ? 1.0
                                                                                                  : 0.0;
          double sq = 0;  // Var: sum of squares
          int64_t best = 0;
          for (int64_t r = 0; r < red_numel; ++r) {
            int64_t off = base, rr = r;
            for (int k = 0; k < nr; ++k) off += (rr % red_size[k]) * red_stride[k], rr /= red_size[k];
            const double v = load<double>(*in, off);
            switch (kind) {
              case Reduce::Any: acc = (acc != 0 || v != 0) ? 1.0 : 0.0; break;
              case Reduce::All: acc = (acc != 0 && v != 0) ? 1.0 : 0.0; break;
              case Reduce::Sum:
              case Reduce::Mean: acc += v; break;
              case Reduce::Prod: acc *= v; break;
              case Reduce::Max: acc = (v > acc || v != v) ? v : acc; break;
              case Reduce::Min: acc = (v < acc || v != v) ? v : acc; break;
              case Reduce::ArgMax:  // the first maximum; NaN wins, as in PyTorch
                if ((v > acc || (v != v && acc == acc)) || r == 0) acc = v, best = r;
                break;
              case Reduce::ArgMin:
                if ((v < acc || (v != v && acc == acc)) || r == 0) acc = v, best = r;
                break;
              case Reduce::Var: acc += v, sq += v * v; break;
              case Reduce::Norm:
                if (norm_max) {
                  acc = param > 0 ? std::max(acc, std::fabs(v)) : std::min(acc, std::fabs(v));
                } else if (param == 0) {
                  acc += v != 0;
                } else {
                  acc += param == 2 ? v * v : param == 1 ? std::fabs(v) : std::pow(std::fabs(v), param);
                }
                break;
            }
          }
          if (kind == Reduce::Mean) acc /= static_cast<double>(red_numel);
          if (kind == Reduce::Var) {
            const double n = static_cast<double>(red_numel), mean = acc / n;
            acc = std::max(0.0, sq - n * mean * mean) / std::max(0.0, n - param);
          }
          if (kind == Reduce::Norm && !norm_max && param != 0 && param != 1)
            acc = param == 2 ? std::sqrt(acc) : std::pow(acc, 1 / param);
          if (arg) acc = static_cast<double>(best);
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

// An int? dim as a one-entry list (None: every dimension), for reduce().
Error with_single_dim(Args args, const char* op, Reduce kind, double param = 0) {
  KCHECK(args.size() >= 3 && (args[1]->is_int() || args[1]->is_none()), "%s: dim must be an int or None", op);
  const int64_t dim = args[1]->is_int() ? args[1]->to_int() : 0;
  EValue list = args[1]->is_int() ? EValue::int_list(Span<const int64_t>(&dim, 1)) : EValue();
  EValue* patched[runtime::kTensorDimensionLimit];
  KCHECK(args.size() <= runtime::kTensorDimensionLimit, "%s: too many arguments", op);
  for (size_t i = 0; i < args.size(); ++i) patched[i] = i == 1 ? &list : args[i];
  return reduce(Args(patched, args.size()), op, args.size(), kind, param);
}

// argmax(self, dim?, keepdim), argmin(self, dim?, keepdim)
Error argmax(KernelRuntimeContext&, Args args) { return with_single_dim(args, "aten::argmax", Reduce::ArgMax); }
Error argmin(KernelRuntimeContext&, Args args) { return with_single_dim(args, "aten::argmin", Reduce::ArgMin); }
// max.dim(self, dim, keepdim) -> (values, indices), and min.dim: the extreme and its first index.
Error extreme_dim(Args args, const char* op, bool is_max) {
  ET_TRY(check_count(args, 5, op));
  EValue* values[4] = {args[0], args[1], args[2], args[3]};
  EValue* indices[4] = {args[0], args[1], args[2], args[4]};
  ET_TRY(with_single_dim(Args(values, 4), op, is_max ? Reduce::Max : Reduce::Min));
  return with_single_dim(Args(indices, 4), op, is_max ? Reduce::ArgMax : Reduce::ArgMin);
}
Error max_dim(KernelRuntimeContext&, Args args) { return extreme_dim(args, "aten::max.dim", true); }
Error min_dim(KernelRuntimeContext&, Args args) { return extreme_dim(args, "aten::min.dim", false); }
// max(self), min(self), any(self), all(self), mean(self, dtype?): over every element.
Error over_all(Args args, const char* op, Reduce kind, size_t count = 2) {
  ET_TRY(check_count(args, count, op));
  EValue every, keepdim(false);
  EValue* patched[4] = {args[0], &every, &keepdim, args[count - 1]};
  return reduce(Args(patched, 4), op, 4, kind);
}
Error max_all(KernelRuntimeContext&, Args args) { return over_all(args, "aten::max", Reduce::Max); }
Error min_all(KernelRuntimeContext&, Args args) { return over_all(args, "aten::min", Reduce::Min); }
Error any_all(KernelRuntimeContext&, Args args) { return over_all(args, "aten::any", Reduce::Any); }
Error all_all(KernelRuntimeContext&, Args args) { return over_all(args, "aten::all", Reduce::All); }
Error mean_all(KernelRuntimeContext&, Args args) { return over_all(args, "aten::mean", Reduce::Mean, 3); }
// prod.dim_int(self, dim, keepdim, dtype?), prod(self, dtype?)
Error prod_dim(KernelRuntimeContext&, Args args) { return with_single_dim(args, "aten::prod.dim_int", Reduce::Prod); }
Error sum_all(KernelRuntimeContext&, Args args) {
  KCHECK(args.size() == 3, "aten::sum takes (self, dtype?, out)");
  EValue none, keep(false);
  EValue* patched[5] = {args[0], &none, &keep, args[1], args[2]};
  return reduce(Args(patched, 5), "aten::sum", 5, Reduce::Sum);
}

// var.correction(self, dim?, correction?, keepdim)
Error var(KernelRuntimeContext&, Args args) {
  const char* op = "aten::var.correction";
  ET_TRY(check_count(args, 5, op));
  double correction = 1;
  if (!args[2]->is_none()) ET_TRY(double_at(args, 2, op, &correction));
  return reduce(args, op, 5, Reduce::Var, correction);
}

// linalg_vector_norm(self, ord, dim?, keepdim, dtype?)
Error vector_norm(KernelRuntimeContext&, Args args) {
  const char* op = "aten::linalg_vector_norm";
  double ord;
  ET_TRY(read_args(args, op, 6, at(1, &ord)));
  EValue* patched[6] = {args[0], args[2], args[3], args[4], args[4], args[5]};
  return reduce(Args(patched, 6), op, 6, Reduce::Norm, ord);
}

// cumsum(self, dim, dtype?) and cumprod: running along one dimension, in double.
Error cumulative(Args args, const char* op, bool product) {
  Tensor *in, *out;
  ET_TRY(input_output(args, 4, op, &in, &out));
  int64_t dim;
  ET_TRY(int_at(args, 1, op, &dim));
  ET_TRY(normalize_dim(dim, in->dim(), op, &dim));
  KCHECK(is_supported_dtype(in->scalar_type()) && is_supported_dtype(out->scalar_type()), "%s: unsupported dtype", op);
  KCHECK(same_shape(*in, *out), "%s: output shape differs from the input's", op);
  int64_t outer, len, inner;
  split_at(*in, dim, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double acc = product ? 1 : 0;
      for (int64_t k = 0; k < len; ++k) {
        const int64_t at = (o * len + k) * inner + i;
        acc = product ? acc * load<double>(*in, at) : acc + load<double>(*in, at);
        store<double>(*out, at, acc);
      }
    }
  }
  return Error::Ok;
}
Error cumsum(KernelRuntimeContext&, Args args) { return cumulative(args, "aten::cumsum", false); }
Error cumprod(KernelRuntimeContext&, Args args) { return cumulative(args, "aten::cumprod", true); }

// histc(self, bins, min, max): counts of float32 values in `bins` equal bins over [min, max] (the
// input's own range where min == max; widened by 1 each way where that is one value too), as
// torch's CPU kernel bins them: the last bin takes max, values outside and NaN are not counted.
Error histc(KernelRuntimeContext&, Args args) {
  const char* op = "aten::histc";
  Tensor *in, *out;
  int64_t bins;
  double lo, hi;
  ET_TRY(read_args(args, op, 5, at(0, &in), at(1, &bins), at(2, &lo), at(3, &hi), at(4, &out)));
  ET_TRY(check_dtype(*in, ScalarType::Float, op, "input"));
  ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  KCHECK(bins > 0, "%s: bins must be positive, got %lld", op, static_cast<long long>(bins));
  KCHECK(out->dim() == 1 && out->size(0) == bins, "%s: output must hold %lld bins", op, static_cast<long long>(bins));
  const float* x = in->data_ptr<float>();
  const int64_t n = in->numel();
  if (lo == hi && n > 0) {
    const auto [mn, mx] = std::minmax_element(x, x + n);
    const bool nan = std::any_of(x, x + n, [](float v) { return std::isnan(v); });
    lo = nan ? NAN : *mn, hi = nan ? NAN : *mx;
  }
  if (lo == hi) lo -= 1, hi += 1;
  KCHECK(std::isfinite(lo) && std::isfinite(hi), "%s: the range [%g, %g] is not finite", op, lo, hi);
  KCHECK(lo < hi, "%s: max (%g) must be larger than min (%g)", op, hi, lo);
  const float left = static_cast<float>(lo), right = static_cast<float>(hi);
  float* counts = out->data_ptr<float>();
  std::fill(counts, counts + bins, 0.f);
  for (int64_t i = 0; i < n; ++i) {
    if (!(x[i] >= left && x[i] <= right)) continue;
    int64_t bin = static_cast<int64_t>((x[i] - left) * static_cast<float>(bins) / (right - left));
    counts[std::min(bin, bins - 1)] += 1.f;
  }
  return Error::Ok;
}

// Order along one dimension: topk(self, k, dim, largest, sorted) and sort(self, dim, descending)
// -> (values, indices). Ties keep their input order; NaN counts as the largest value.
Error order(const Tensor& in, Tensor& values, Tensor& indices, int64_t dim, int64_t k, bool descending,
            const char* op) {
  KCHECK(is_supported_dtype(in.scalar_type()) && values.scalar_type() == in.scalar_type(), "%s: dtype mismatch", op);
  ET_TRY(check_dtype(indices, ScalarType::Long, op, "indices"));
  int64_t outer, len, inner;
  split_at(in, dim, &outer, &len, &inner);
  KCHECK(k >= 0 && k <= len, "%s: k %lld is out of range for a dimension of %lld", op, static_cast<long long>(k),
         static_cast<long long>(len));
  ET_TRY(check_numel(values, outer * inner * k, op, "values"));
  ET_TRY(check_numel(indices, outer * inner * k, op, "indices"));
  std::vector<std::pair<double, int64_t>> row(static_cast<size_t>(len));
  auto before = [descending](const std::pair<double, int64_t>& a, const std::pair<double, int64_t>& b) {
    const bool an = a.first != a.first, bn = b.first != b.first;
    if (an || bn) return descending ? (an && !bn) : (!an && bn);
    return descending ? a.first > b.first : a.first < b.first;
  };
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < len; ++j) row[j] = {load<double>(in, (o * len + j) * inner + i), j};
      std::stable_sort(row.begin(), row.end(), before);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (o * k + j) * inner + i;
        store<double>(values, at, row[j].first);
        static_cast<int64_t*>(indices.mutable_data_ptr())[at] = row[j].second;
      }
    }
  }
  return Error::Ok;
}

Error topk(KernelRuntimeContext&, Args args) {
  const char* op = "aten::topk";
  Tensor *in, *values, *indices;
  int64_t k, dim, largest;
  ET_TRY(read_args(args, op, 7, at(0, &in), at(5, &values), at(6, &indices), at(1, &k), at(2, &dim), at(3, &largest)));
  ET_TRY(normalize_dim(dim, in->dim(), op, &dim));
  return order(*in, *values, *indices, dim, k, largest != 0, op);
}

// sort(self, dim, descending) and sort.stable(self, stable?, dim, descending)
Error sort_at(Args args, const char* op, size_t count, size_t dim_at) {
  Tensor *in, *values, *indices;
  int64_t dim, descending;
  ET_TRY(read_args(args, op, count, at(0, &in), at(count - 2, &values), at(count - 1, &indices), at(dim_at, &dim),
                   at(dim_at + 1, &descending)));
  ET_TRY(normalize_dim(dim, in->dim(), op, &dim));
  return order(*in, *values, *indices, dim, in->dim() == 0 ? 1 : in->size(static_cast<int>(dim)), descending != 0, op);
}
Error sort(KernelRuntimeContext&, Args args) { return sort_at(args, "aten::sort", 5, 1); }
Error sort_stable(KernelRuntimeContext&, Args args) { return sort_at(args, "aten::sort.stable", 6, 2); }

const runtime::Kernel kKernels[] = {
    {"aten::sum.dim_IntList", sum},
    {"aten::mean.dim", mean},
    {"aten::amax", amax},
    {"aten::amin", amin},
    {"aten::any.dim", any_dim},
    {"aten::any.dims", any_dims},
    {"aten::all.dim", all_dim},
    {"aten::argmax", argmax},
    {"aten::argmin", argmin},
    {"aten::max.dim", max_dim},
    {"aten::min.dim", min_dim},
    {"aten::max", max_all},
    {"aten::min", min_all},
    {"aten::any", any_all},
    {"aten::all", all_all},
    {"aten::mean", mean_all},
    {"aten::prod.dim_int", prod_dim},
    {"aten::sum", sum_all},
    {"aten::var.correction", var},
    {"aten::linalg_vector_norm", vector_norm},
    {"aten::cumsum", cumsum},
    {"aten::cumprod", cumprod},
    {"aten::histc", histc},
    {"aten::topk", topk},
    {"aten::sort", sort},
    {"aten::sort.stable", sort_stable},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
