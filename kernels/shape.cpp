// Shape and indexing kernels. Every output is a contiguous copy: views, permutations, expansion,
// concatenation, slicing, selection, embedding lookups.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <executorch/kernels/kernel_util.h>

namespace executorch {
namespace kernels {
namespace {

// Same elements, new shape: view/_unsafe_view/reshape/unsqueeze/squeeze/alias.
Error same_data(Args args, const char* op, size_t count) {
  Tensor *in, *out;
  ET_TRY(input_output(args, count, op, &in, &out));
  KCHECK(in->scalar_type() == out->scalar_type(), "%s: dtype changes", op);
  ET_TRY(check_numel(*out, in->numel(), op, "output"));
  if (in->nbytes() && in->const_data_ptr() != out->const_data_ptr()) {
    std::memmove(out->mutable_data_ptr(), in->const_data_ptr(), in->nbytes());
  }
  return Error::Ok;
}

Error view(KernelRuntimeContext&, Args args) { return same_data(args, "aten::view", 3); }
Error unsafe_view(KernelRuntimeContext&, Args args) { return same_data(args, "aten::_unsafe_view", 3); }
Error reshape(KernelRuntimeContext&, Args args) { return same_data(args, "aten::reshape", 3); }
Error unsqueeze(KernelRuntimeContext&, Args args) { return same_data(args, "aten::unsqueeze", 3); }
Error squeeze_dims(KernelRuntimeContext&, Args args) { return same_data(args, "aten::squeeze.dims", 3); }
Error squeeze_dim(KernelRuntimeContext&, Args args) { return same_data(args, "aten::squeeze.dim", 3); }
Error squeeze(KernelRuntimeContext&, Args args) { return same_data(args, "aten::squeeze", 2); }
Error alias(KernelRuntimeContext&, Args args) { return same_data(args, "aten::alias", 2); }

// The output's dimensions with sizes of 1 dropped and neighbours merged where the input steps
// through them as one (the output is contiguous): a permute of [1, 4, 8, 49, 1, 32] that moves the
// ones copies rows of 32 elements, not single elements; one that keeps the order is one row.
// Returns the number of dimensions left in sizes/strides.
int coalesce(const Tensor& out, const int64_t* in_strides, int64_t* sizes, int64_t* strides) {
  int n = 0;
  for (int d = 0; d < out.dim(); ++d) {
    if (out.size(d) == 1) continue;
    if (n > 0 && strides[n - 1] == in_strides[d] * out.size(d)) {
      sizes[n - 1] *= out.size(d);
      strides[n - 1] = in_strides[d];
      continue;
    }
    sizes[n] = out.size(d), strides[n] = in_strides[d], ++n;
  }
  return n;
}

// Copies `in` into `out` where out[idx] = in[sum_d idx[d] * in_strides[d]] (strides in elements).
template <typename T>
void strided_copy_as(const Tensor& in, const Tensor& out, const int64_t* in_strides, int64_t in_offset) {
  const T* src = static_cast<const T*>(in.const_data_ptr());
  T* dst = static_cast<T*>(out.mutable_data_ptr());
  int64_t sizes[runtime::kTensorDimensionLimit], strides[runtime::kTensorDimensionLimit];
  const int dim = coalesce(out, in_strides, sizes, strides);
  const int64_t inner = dim == 0 ? 1 : sizes[dim - 1];
  const int64_t rows = inner == 0 ? 0 : out.numel() / inner;
  const int64_t step = dim == 0 ? 1 : strides[dim - 1];
  auto copy_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t off = in_offset, rem = r;
      for (int d = dim - 2; d >= 0; --d) off += (rem % sizes[d]) * strides[d], rem /= sizes[d];
      T* o = dst + r * inner;
      const T* i = src + off;
      if (step == 1) {
        if (o != i) std::memcpy(o, i, inner * sizeof(T));  // a permute that keeps the layout may share memory
      } else {
        for (int64_t k = 0; k < inner; ++k) o[k] = i[k * step];
      }
    }
  };
  if (out.numel() < 65536) {
    copy_rows(0, rows);  // not worth waking the pool
  } else {
    extension::threadpool::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), copy_rows);
  }
}

void strided_copy(const Tensor& in, const Tensor& out, const int64_t* in_strides, int64_t in_offset) {
  switch (in.element_size()) {
    case 1: return strided_copy_as<uint8_t>(in, out, in_strides, in_offset);
    case 2: return strided_copy_as<uint16_t>(in, out, in_strides, in_offset);
    case 4: return strided_copy_as<uint32_t>(in, out, in_strides, in_offset);
    default: return strided_copy_as<uint64_t>(in, out, in_strides, in_offset);
  }
}

// permute(self, dims)
Error permute(KernelRuntimeContext&, Args args) {
  const char* op = "aten::permute";
  Tensor *in, *out;
  ET_TRY(input_output(args, 3, op, &in, &out));
  Span<const int64_t> dims;
  ET_TRY(int_list_at(args, 1, op, &dims));
  KCHECK(static_cast<int>(dims.size()) == in->dim() && out->dim() == in->dim(), "%s: wrong number of dims", op);
  KCHECK(in->scalar_type() == out->scalar_type(), "%s: dtype changes", op);
  int64_t strides[runtime::kTensorDimensionLimit];
  bool seen[runtime::kTensorDimensionLimit] = {};
  for (int d = 0; d < in->dim(); ++d) {
    int64_t p;
    ET_TRY(normalize_dim(dims[d], in->dim(), op, &p));
    KCHECK(!seen[p], "%s: dim %lld repeats", op, static_cast<long long>(p));
    seen[p] = true;
    KCHECK(out->size(d) == in->size(static_cast<int>(p)), "%s: output size mismatch at dim %d", op, d);
    strides[d] = in->strides()[p];
  }
  strided_copy(*in, *out, strides, 0);
  return Error::Ok;
}

// transpose.int(self, dim0, dim1)
Error transpose(KernelRuntimeContext&, Args args) {
  const char* op = "aten::transpose.int";
  Tensor *in, *out;
  ET_TRY(input_output(args, 4, op, &in, &out));
  int64_t d0, d1;
  ET_TRY(int_at(args, 1, op, &d0));
  ET_TRY(int_at(args, 2, op, &d1));
  ET_TRY(normalize_dim(d0, in->dim(), op, &d0));
  ET_TRY(normalize_dim(d1, in->dim(), op, &d1));
  KCHECK(out->dim() == in->dim() && in->scalar_type() == out->scalar_type(), "%s: output mismatch", op);
  int64_t strides[runtime::kTensorDimensionLimit];
  for (int d = 0; d < in->dim(); ++d) {
    const int src = d == d0 ? static_cast<int>(d1) : d == d1 ? static_cast<int>(d0) : d;
    KCHECK(out->size(d) == in->size(src), "%s: output size mismatch at dim %d", op, d);
    strides[d] = in->strides()[src];
  }
  strided_copy(*in, *out, strides, 0);
  return Error::Ok;
}

// expand(self, size, implicit)
Error expand(KernelRuntimeContext&, Args args) {
  const char* op = "aten::expand";
  Tensor *in, *out;
  ET_TRY(input_output(args, 4, op, &in, &out));
  KCHECK(in->scalar_type() == out->scalar_type(), "%s: dtype changes", op);
  int64_t strides[1][runtime::kTensorDimensionLimit] = {};
  ET_TRY(broadcast_strides(*in, *out, op, strides[0]));
  strided_copy(*in, *out, strides[0], 0);
  return Error::Ok;
}

// slice.Tensor(self, dim, start?, end?, step)
Error slice(KernelRuntimeContext&, Args args) {
  const char* op = "aten::slice.Tensor";
  Tensor *in, *out;
  ET_TRY(input_output(args, 6, op, &in, &out));
  int64_t dim, start = 0, end = INT64_MAX, step;
  ET_TRY(int_at(args, 1, op, &dim));
  ET_TRY(normalize_dim(dim, in->dim(), op, &dim));
  KCHECK(in->dim() > 0, "%s: cannot slice a 0-d tensor", op);
  if (!args[2]->is_none()) ET_TRY(int_at(args, 2, op, &start));
  if (!args[3]->is_none()) ET_TRY(int_at(args, 3, op, &end));
  ET_TRY(int_at(args, 4, op, &step));
  KCHECK(step > 0, "%s: step must be positive", op);
  const int64_t size = in->size(static_cast<int>(dim));
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::min(std::max<int64_t>(start, 0), size);
  end = std::min(std::max(end, start), size);
  const int64_t len = (end - start + step - 1) / step;
  KCHECK(out->dim() == in->dim() && in->scalar_type() == out->scalar_type(), "%s: output mismatch", op);
  int64_t strides[runtime::kTensorDimensionLimit];
  for (int d = 0; d < in->dim(); ++d) {
    const int64_t want = d == dim ? len : in->size(d);
    KCHECK(out->size(d) == want, "%s: output size %lld at dim %d, expected %lld", op,
           static_cast<long long>(out->size(d)), d, static_cast<long long>(want));
    strides[d] = in->strides()[d] * (d == dim ? step : 1);
  }
  strided_copy(*in, *out, strides, start * in->strides()[dim]);
  return Error::Ok;
}

// select.int(self, dim, index)
Error select(KernelRuntimeContext&, Args args) {
  const char* op = "aten::select.int";
  Tensor *in, *out;
  ET_TRY(input_output(args, 4, op, &in, &out));
  int64_t dim, index;
  ET_TRY(int_at(args, 1, op, &dim));
  ET_TRY(int_at(args, 2, op, &index));
  KCHECK(in->dim() > 0, "%s: cannot select from a 0-d tensor", op);
  ET_TRY(normalize_dim(dim, in->dim(), op, &dim));
  const int64_t size = in->size(static_cast<int>(dim));
  KCHECK(index >= -size && index < size, "%s: index %lld out of range for size %lld", op, static_cast<long long>(index),
         static_cast<long long>(size));
  if (index < 0) index += size;
  KCHECK(out->dim() == in->dim() - 1 && in->scalar_type() == out->scalar_type(), "%s: output mismatch", op);
  int64_t strides[runtime::kTensorDimensionLimit];
  for (int d = 0, o = 0; d < in->dim(); ++d) {
    if (d == dim) continue;
    KCHECK(out->size(o) == in->size(d), "%s: output size mismatch at dim %d", op, o);
    strides[o++] = in->strides()[d];
  }
  strided_copy(*in, *out, strides, index * in->strides()[dim]);
  return Error::Ok;
}

// cat(tensors, dim)
Error cat(KernelRuntimeContext&, Args args) {
  const char* op = "aten::cat";
  ET_TRY(check_count(args, 3, op));
  KCHECK(args[0]->is_tensor_list(), "%s: argument 0 must be a tensor list", op);
  Tensor* out;
  ET_TRY(tensor_at(args, 2, op, &out));
  int64_t dim;
  ET_TRY(int_at(args, 1, op, &dim));
  ET_TRY(normalize_dim(dim, out->dim(), op, &dim));
  const auto list = args[0]->to_tensor_list();
  int64_t total = 0;
  for (EValue* v : list) {
    KCHECK(v->is_tensor(), "%s: a list item is None", op);
    const Tensor& t = v->to_tensor();
    if (t.dim() == 1 && t.numel() == 0) continue;  // PyTorch skips empty 1-d inputs
    KCHECK(t.dim() == out->dim() && t.scalar_type() == out->scalar_type() && !t.is_cuda(), "%s: input mismatch", op);
    for (int d = 0; d < t.dim(); ++d) {
      KCHECK(d == dim || t.size(d) == out->size(d), "%s: sizes differ at dim %d", op, d);
    }
    total += t.size(static_cast<int>(dim));
  }
  KCHECK(total == out->size(static_cast<int>(dim)), "%s: output size %lld along dim, inputs sum to %lld", op,
         static_cast<long long>(out->size(static_cast<int>(dim))), static_cast<long long>(total));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= out->size(d);
  for (int d = static_cast<int>(dim) + 1; d < out->dim(); ++d) inner *= out->size(d);
  const size_t es = out->element_size();
  auto* dst = static_cast<uint8_t*>(out->mutable_data_ptr());
  int64_t at = 0;
  for (EValue* v : list) {
    const Tensor& t = v->to_tensor();
    if (t.dim() == 1 && t.numel() == 0) continue;
    const int64_t chunk = t.size(static_cast<int>(dim)) * inner;
    const auto* src = static_cast<const uint8_t*>(t.const_data_ptr());
    for (int64_t o = 0; o < outer; ++o) {
      uint8_t* to = dst + (o * out->size(static_cast<int>(dim)) * inner + at) * es;
      // A piece planned in its place in the output (a delegate payload's stacks) is there already.
      if (to != src + o * chunk * es) std::memcpy(to, src + o * chunk * es, chunk * es);
    }
    at += chunk;
  }
  return Error::Ok;
}

// embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
Error embedding(KernelRuntimeContext&, Args args) {
  const char* op = "aten::embedding";
  Tensor *w, *idx, *out;
  ET_TRY(read_args(args, op, 6, at(0, &w), at(1, &idx), at(5, &out)));
  int64_t padding_idx = 0;  // only affects gradients
  ET_TRY(int_at(args, 2, op, &padding_idx));
  KCHECK(w->dim() == 2, "%s: weight must be 2-D", op);
  KCHECK(idx->scalar_type() == ScalarType::Long || idx->scalar_type() == ScalarType::Int,
         "%s: indices must be integers", op);
  KCHECK(out->scalar_type() == w->scalar_type(), "%s: output dtype differs from weight", op);
  const int64_t rows = w->size(0), width = w->size(1);
  ET_TRY(check_numel(*out, idx->numel() * width, op, "output"));
  const size_t row_bytes = static_cast<size_t>(width) * w->element_size();
  for (int64_t i = 0; i < idx->numel(); ++i) {
    const int64_t r = load<int64_t>(*idx, i);
    KCHECK(r >= 0 && r < rows, "%s: index %lld out of range for %lld rows", op, static_cast<long long>(r),
           static_cast<long long>(rows));
    std::memcpy(static_cast<uint8_t*>(out->mutable_data_ptr()) + i * row_bytes,
                static_cast<const uint8_t*>(w->const_data_ptr()) + r * row_bytes, row_bytes);
  }
  return Error::Ok;
}

// split_with_sizes(self, split_sizes, dim) -> out_0, ..., out_{n-1}
Error split_with_sizes(KernelRuntimeContext&, Args args) {
  const char* op = "aten::split_with_sizes";
  Span<const int64_t> sizes;
  ET_TRY(int_list_at(args, 1, op, &sizes));
  ET_TRY(check_count(args, 3 + sizes.size(), op));
  Tensor* in;
  ET_TRY(tensor_at(args, 0, op, &in));
  int64_t dim;
  ET_TRY(int_at(args, 2, op, &dim));
  KCHECK(in->dim() > 0, "%s: cannot split a 0-d tensor", op);
  ET_TRY(normalize_dim(dim, in->dim(), op, &dim));
  int64_t start = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor* out;
    ET_TRY(tensor_at(args, 3 + i, op, &out));
    KCHECK(sizes[i] >= 0 && start + sizes[i] <= in->size(static_cast<int>(dim)), "%s: sizes exceed the input", op);
    KCHECK(out->dim() == in->dim() && out->scalar_type() == in->scalar_type(), "%s: output %zu mismatch", op, i);
    for (int d = 0; d < in->dim(); ++d) {
      KCHECK(out->size(d) == (d == dim ? sizes[i] : in->size(d)), "%s: output %zu size mismatch at dim %d", op, i, d);
    }
    strided_copy(*in, *out, in->strides(), start * in->strides()[dim]);
    start += sizes[i];
  }
  KCHECK(start == in->size(static_cast<int>(dim)), "%s: sizes do not cover the input", op);
  return Error::Ok;
}

// arange.start_step(start, end, step, *, dtype, layout, device, pin_memory): start + i * step for
// each i below ceil((end - start) / step). The exporter folds ranges of fixed length; this one's
// follows an input's size (bounded dynamic shapes).
Error arange(KernelRuntimeContext&, Args args) {
  const char* op = "aten::arange.start_step";
  double start, end, step;
  Tensor* out;
  ET_TRY(read_args(args, op, 8, at(0, &start), at(1, &end), at(2, &step), at(7, &out)));
  KCHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
         "%s: start %g, end %g and step %g do not make a range", op, start, end, step);
  const double length = std::max(0.0, std::ceil((end - start) / step));
  KCHECK(out->dim() == 1 && static_cast<double>(out->size(0)) == length, "%s: output of %lld elements, expected %.0f",
         op, static_cast<long long>(out->numel()), length);
  KCHECK(is_supported_dtype(out->scalar_type()), "%s: output dtype %s", op, runtime::to_string(out->scalar_type()));
  const bool integral = args[0]->is_int() && args[1]->is_int() && args[2]->is_int();
  for (int64_t i = 0; i < out->numel(); ++i) {
    if (integral) {
      store<int64_t>(*out, i, args[0]->to_int() + i * args[2]->to_int());
    } else {
      store<double>(*out, i, start + static_cast<double>(i) * step);
    }
  }
  return Error::Ok;
}

// Every element of `out` set to the number args[at] (an int exactly, else as a double).
Error fill(Args args, size_t at, const Tensor& out, const char* op) {
  KCHECK(is_supported_dtype(out.scalar_type()), "%s: output dtype %s", op, runtime::to_string(out.scalar_type()));
  double value;
  ET_TRY(double_at(args, at, op, &value));
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (args[at]->is_int()) {
      store<int64_t>(out, i, args[at]->to_int());
    } else {
      store<double>(out, i, value);
    }
  }
  return Error::Ok;
}

// full(size, fill_value, *, dtype, layout, device, pin_memory) and full_like(self, fill_value, *,
// dtype, layout, device, pin_memory, memory_format): the exporter folds those of a fixed shape;
// these follow an input's size (bounded dynamic shapes).
Error full(KernelRuntimeContext&, Args args) {
  const char* op = "aten::full";
  Span<const int64_t> sizes;
  Tensor* out;
  ET_TRY(read_args(args, op, 7, at(0, &sizes), at(6, &out)));
  KCHECK(sizes.size() == static_cast<size_t>(out->dim()), "%s: %zu sizes for a %d-D output", op, sizes.size(),
         out->dim());
  for (int d = 0; d < out->dim(); ++d) {
    KCHECK(out->size(d) == sizes[static_cast<size_t>(d)], "%s: output size %lld at dim %d, expected %lld", op,
           static_cast<long long>(out->size(d)), d, static_cast<long long>(sizes[static_cast<size_t>(d)]));
  }
  return fill(args, 1, *out, op);
}

Error full_like(KernelRuntimeContext&, Args args) {
  const char* op = "aten::full_like";
  Tensor *self, *out;
  ET_TRY(read_args(args, op, 8, at(0, &self), at(7, &out)));
  KCHECK(runtime::same_shape(*self, *out), "%s: the output's shape is not the input's", op);
  return fill(args, 1, *out, op);
}

const runtime::Kernel kKernels[] = {
    {"aten::view", view},
    {"aten::_unsafe_view", unsafe_view},
    {"aten::reshape", reshape},
    {"aten::unsqueeze", unsqueeze},
    {"aten::squeeze.dims", squeeze_dims},
    {"aten::squeeze.dim", squeeze_dim},
    {"aten::squeeze", squeeze},
    {"aten::alias", alias},
    {"aten::permute", permute},
    {"aten::transpose.int", transpose},
    {"aten::expand", expand},
    {"aten::slice.Tensor", slice},
    {"aten::select.int", select},
    {"aten::cat", cat},
    {"aten::embedding", embedding},
    {"aten::split_with_sizes", split_with_sizes},
    {"aten::arange.start_step", arange},
    {"aten::full", full},
    {"aten::full_like", full_like},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
