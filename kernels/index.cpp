// Indexing, scattering, padding and rearranging kernels. They move elements without arithmetic, so
// each works on any dtype by element size (float16 and bfloat16 included).
#include <algorithm>
#include <cstring>
#include <vector>

#include <executorch/kernels/kernel_util.h>

namespace executorch {
namespace kernels {
namespace {

constexpr int kMaxDim = runtime::kTensorDimensionLimit;

const uint8_t* bytes(const Tensor& t) { return static_cast<const uint8_t*>(t.const_data_ptr()); }
uint8_t* mutable_bytes(const Tensor& t) { return static_cast<uint8_t*>(t.mutable_data_ptr()); }

// Splits flat index `i` of a row-major shape into coordinates.
void unravel(int64_t i, int dim, const int64_t* sizes, int64_t* coord) {
  for (int d = dim - 1; d >= 0; --d) {
    coord[d] = sizes[d] == 0 ? 0 : i % sizes[d];
    i = sizes[d] == 0 ? 0 : i / sizes[d];
  }
}

Error same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  KCHECK(a.scalar_type() == b.scalar_type(), "%s: dtype %s differs from %s", op, runtime::to_string(a.scalar_type()),
         runtime::to_string(b.scalar_type()));
  return Error::Ok;
}

// An index value, wrapped and bounds-checked against `size`.
Error index_value(const Tensor& idx, int64_t at, int64_t size, const char* op, int64_t* out) {
  int64_t v = load<int64_t>(idx, at);
  KCHECK(v >= -size && v < size, "%s: index %lld is out of range for a dimension of %lld", op,
         static_cast<long long>(v), static_cast<long long>(size));
  *out = v < 0 ? v + size : v;
  return Error::Ok;
}

Error integer_index(const Tensor& t, const char* op) {
  KCHECK(t.scalar_type() == ScalarType::Long || t.scalar_type() == ScalarType::Int,
         "%s: indices must be int64 or int32", op);
  return Error::Ok;
}

// as_strided(self, size, stride, storage_offset?): a copy of the view; every element read must lie
// inside the input.
Error as_strided(KernelRuntimeContext&, Args args) {
  const char* op = "aten::as_strided";
  Tensor *in, *out;
  ET_TRY(input_output(args, 5, op, &in, &out));
  Span<const int64_t> size, stride;
  ET_TRY(int_list_at(args, 1, op, &size));
  ET_TRY(int_list_at(args, 2, op, &stride));
  int64_t offset = 0;
  if (!args[3]->is_none()) ET_TRY(int_at(args, 3, op, &offset));
  ET_TRY(same_dtype(*in, *out, op));
  KCHECK(size.size() == stride.size() && static_cast<int>(size.size()) == out->dim(), "%s: size and stride mismatch",
         op);
  int64_t last = offset;
  for (int d = 0; d < out->dim(); ++d) {
    KCHECK(size[d] == out->size(d) && stride[d] >= 0, "%s: output size or stride mismatch at dim %d", op, d);
    if (size[d] > 0) last += (size[d] - 1) * stride[d];
  }
  KCHECK(offset >= 0 && (out->numel() == 0 || last < in->numel()), "%s: the view reads past the input", op);
  const size_t es = in->element_size();
  int64_t coord[kMaxDim];
  for (int64_t i = 0; i < out->numel(); ++i) {
    unravel(i, out->dim(), out->sizes(), coord);
    int64_t src = offset;
    for (int d = 0; d < out->dim(); ++d) src += coord[d] * stride[d];
    std::memcpy(mutable_bytes(*out) + i * es, bytes(*in) + src * es, es);
  }
  return Error::Ok;
}

// Copies every element of `out` from `in` at the coordinates map(coord) returns (or `fill` bytes
// where it returns false).
template <typename Map>
void gather_elements(const Tensor& in, const Tensor& out, Map map, const uint8_t* fill) {
  const size_t es = in.element_size();
  int64_t coord[kMaxDim], src[kMaxDim];
  for (int64_t i = 0; i < out.numel(); ++i) {
    unravel(i, out.dim(), out.sizes(), coord);
    if (map(coord, src)) {
      int64_t off = 0;
      for (int d = 0; d < in.dim(); ++d) off += src[d] * in.strides()[d];
      std::memcpy(mutable_bytes(out) + i * es, bytes(in) + off * es, es);
    } else {
      std::memcpy(mutable_bytes(out) + i * es, fill, es);
    }
  }
}

// flip(self, dims)
Error flip(KernelRuntimeContext&, Args args) {
  const char* op = "aten::flip";
  Tensor *in, *out;
  ET_TRY(input_output(args, 3, op, &in, &out));
  Span<const int64_t> dims;
  ET_TRY(int_list_at(args, 1, op, &dims));
  ET_TRY(same_dtype(*in, *out, op));
  KCHECK(same_shape(*in, *out), "%s: output shape differs", op);
  bool flipped[kMaxDim] = {};
  for (int64_t d : dims) {
    int64_t nd;
    ET_TRY(normalize_dim(d, in->dim(), op, &nd));
    flipped[nd] = true;
  }
  gather_elements(
      *in, *out,
      [&](const int64_t* c, int64_t* s) {
        for (int d = 0; d < in->dim(); ++d) s[d] = flipped[d] ? in->size(d) - 1 - c[d] : c[d];
        return true;
      },
      nullptr);
  return Error::Ok;
}

// roll(self, shifts, dims): with no dims, the flattened tensor rolls.
Error roll(KernelRuntimeContext&, Args args) {
  const char* op = "aten::roll";
  Tensor *in, *out;
  ET_TRY(input_output(args, 4, op, &in, &out));
  Span<const int64_t> shifts, dims;
  ET_TRY(int_list_at(args, 1, op, &shifts));
  ET_TRY(int_list_at(args, 2, op, &dims));
  ET_TRY(same_dtype(*in, *out, op));
  KCHECK(same_shape(*in, *out), "%s: output shape differs", op);
  const size_t es = in->element_size();
  if (dims.size() == 0) {
    KCHECK(shifts.size() == 1, "%s: without dims, one shift", op);
    const int64_t n = in->numel();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t src = (((i - shifts[0]) % n) + n) % n;
      std::memcpy(mutable_bytes(*out) + i * es, bytes(*in) + src * es, es);
    }
    return Error::Ok;
  }
  KCHECK(shifts.size() == dims.size(), "%s: %zu shifts for %zu dims", op, shifts.size(), dims.size());
  int64_t shift[kMaxDim] = {};
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t nd;
    ET_TRY(normalize_dim(dims[k], in->dim(), op, &nd));
    shift[nd] += shifts[k];
  }
  gather_elements(
      *in, *out,
      [&](const int64_t* c, int64_t* s) {
        for (int d = 0; d < in->dim(); ++d) {
          const int64_t n = in->size(d);
          s[d] = (((c[d] - shift[d]) % n) + n) % n;
        }
        return true;
      },
      nullptr);
  return Error::Ok;
}

// Padding of the last len(pad)/2 dimensions: pad = [left_last, right_last, left_prev, ...].
enum class Pad { Constant, Reflect, Replicate, Circular };

// Constant padding of a tensor of rank >= 1 (sizes checked): the output filled, then each row
// along the last dimension copied whole (the part a negative padding keeps).
void constant_pad_rows(const Tensor& in, const Tensor& out, const int64_t* before, const uint8_t* fill) {
  const size_t es = in.element_size();
  uint8_t* o = mutable_bytes(out);
  if (std::all_of(fill, fill + es, [](uint8_t b) { return b == 0; })) {
    std::memset(o, 0, static_cast<size_t>(out.numel()) * es);
  } else {
    for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(o + i * es, fill, es);
  }
  const int rank = in.dim();
  const int64_t w = in.size(rank - 1), ow = out.size(rank - 1), lo = before[rank - 1];
  const int64_t x0 = std::max<int64_t>(0, -lo), x1 = std::min(w, ow - lo);
  if (x1 <= x0 || in.numel() == 0) return;
  int64_t coord[kMaxDim];
  for (int64_t r = 0; r < in.numel() / w; ++r) {
    unravel(r, rank - 1, in.sizes(), coord);
    int64_t at = 0;
    bool inside = true;
    for (int d = 0; d < rank - 1; ++d) {
      const int64_t c = coord[d] + before[d];
      inside = inside && c >= 0 && c < out.size(d);
      at = at * out.size(d) + c;
    }
    if (inside) std::memcpy(o + (at * ow + x0 + lo) * es, bytes(in) + (r * w + x0) * es, (x1 - x0) * es);
  }
}

Error pad(Args args, const char* op, size_t count, Pad mode) {
  Tensor *in, *out;
  Span<const int64_t> p;
  ET_TRY(read_args(args, op, count, at(0, &in), at(count - 1, &out), at(1, &p)));
  ET_TRY(same_dtype(*in, *out, op));
  KCHECK(p.size() % 2 == 0 && static_cast<int>(p.size() / 2) <= in->dim() && out->dim() == in->dim(),
         "%s: %zu padding values for a rank-%d input", op, p.size(), in->dim());
  int64_t before[kMaxDim] = {};
  for (int d = 0; d < in->dim(); ++d) {
    const int k = in->dim() - 1 - d;  // pad pair index of dim d
    int64_t lo = 0, hi = 0;
    if (k < static_cast<int>(p.size() / 2)) lo = p[2 * k], hi = p[2 * k + 1];
    KCHECK(out->size(d) == in->size(d) + lo + hi, "%s: output size %lld at dim %d, expected %lld", op,
           static_cast<long long>(out->size(d)), d, static_cast<long long>(in->size(d) + lo + hi));
    if (mode == Pad::Reflect) {
      KCHECK(lo < in->size(d) && hi < in->size(d), "%s: reflection padding must be smaller than the dimension", op);
    }
    if (mode != Pad::Constant) KCHECK(in->size(d) > 0 && lo >= 0 && hi >= 0, "%s: negative padding", op);
    before[d] = lo;
  }
  uint8_t fill[8] = {};
  if (mode == Pad::Constant) {
    double value;
    ET_TRY(double_at(args, 2, op, &value));
    KCHECK(is_supported_dtype(in->scalar_type()), "%s: unsupported dtype", op);
    // One element of the output dtype holding `value`.
    int64_t one[1] = {1};
    Tensor cell(in->scalar_type(), 1, one, one, fill);
    store<double>(cell, 0, value);
    if (in->dim() > 0) {
      constant_pad_rows(*in, *out, before, fill);
      return Error::Ok;
    }
  }
  gather_elements(
      *in, *out,
      [&](const int64_t* c, int64_t* s) {
        for (int d = 0; d < in->dim(); ++d) {
          const int64_t n = in->size(d);
          int64_t x = c[d] - before[d];
          if (x < 0 || x >= n) {
            switch (mode) {
              case Pad::Constant: return false;
              case Pad::Reflect: x = x < 0 ? -x : 2 * (n - 1) - x; break;
              case Pad::Replicate: x = x < 0 ? 0 : n - 1; break;
              case Pad::Circular: x = ((x % n) + n) % n; break;
            }
          }
          s[d] = x;
        }
        return true;
      },
      fill);
  return Error::Ok;
}

Error constant_pad_nd(KernelRuntimeContext&, Args args) { return pad(args, "aten::constant_pad_nd", 4, Pad::Constant); }
Error reflection_pad1d(KernelRuntimeContext&, Args args) {
  return pad(args, "aten::reflection_pad1d", 3, Pad::Reflect);
}
Error reflection_pad2d(KernelRuntimeContext&, Args args) {
  return pad(args, "aten::reflection_pad2d", 3, Pad::Reflect);
}
Error reflection_pad3d(KernelRuntimeContext&, Args args) {
  return pad(args, "aten::reflection_pad3d", 3, Pad::Reflect);
}
Error replication_pad1d(KernelRuntimeContext&, Args args) {
  return pad(args, "aten::replication_pad1d", 3, Pad::Replicate);
}
Error replication_pad2d(KernelRuntimeContext&, Args args) {
  return pad(args, "aten::replication_pad2d", 3, Pad::Replicate);
}
Error replication_pad3d(KernelRuntimeContext&, Args args) {
  return pad(args, "aten::replication_pad3d", 3, Pad::Replicate);
}

// Advanced indexing: `indices` (Tensor?[]) index the leading dimensions; None keeps a dimension.
// The index tensors broadcast together; their result dimensions stand where the indexed
// dimensions were when those are adjacent, else first (NumPy's rule).
struct AdvancedIndex {
  const Tensor* index[kMaxDim] = {};
  int64_t shape[kMaxDim] = {};  // broadcast shape of the index tensors
  int64_t strides[kMaxDim][kMaxDim] = {};
  int rank = 0, first = -1, count = 0;
  bool adjacent = true;
};

Error parse_indices(const Tensor& self, const EValue& list, const char* op, AdvancedIndex* ix) {
  KCHECK(list.is_tensor_list(), "%s: indices must be a list", op);
  const auto items = list.to_tensor_list();
  KCHECK(static_cast<int>(items.size()) <= self.dim(), "%s: %zu indices for a rank-%d tensor", op, items.size(),
         self.dim());
  int last = -1;
  for (size_t d = 0; d < items.size(); ++d) {
    if (items[d]->is_none()) continue;
    const Tensor& t = items[d]->to_tensor();
    KCHECK(!t.is_cuda() && (t.const_data_ptr() != nullptr || t.numel() == 0), "%s: index %zu has no memory", op, d);
    KCHECK(t.scalar_type() != ScalarType::Bool && t.scalar_type() != ScalarType::Byte,
           "%s: boolean mask indices make data-dependent shapes; index with integers", op);
    ET_TRY(integer_index(t, op));
    ix->index[d] = &t;
    if (ix->first >= 0 && last != static_cast<int>(d) - 1) ix->adjacent = false;
    if (ix->first < 0) ix->first = static_cast<int>(d);
    last = static_cast<int>(d);
    ++ix->count;
    ix->rank = std::max(ix->rank, t.dim());
  }
  KCHECK(ix->count > 0, "%s: no index tensor", op);
  for (int k = 0; k < ix->rank; ++k) ix->shape[k] = 1;
  for (int d = 0; d < self.dim(); ++d) {
    const Tensor* t = ix->index[d];
    if (!t) continue;
    for (int k = 0; k < t->dim(); ++k) {
      int64_t& s = ix->shape[ix->rank - t->dim() + k];
      KCHECK(s == 1 || t->size(k) == 1 || t->size(k) == s, "%s: index shapes do not broadcast", op);
      if (t->size(k) != 1) s = t->size(k);
    }
  }
  for (int d = 0; d < self.dim(); ++d) {
    if (!ix->index[d]) continue;
    KCHECK(runtime::broadcast_strides(*ix->index[d], ix->rank, ix->shape, ix->strides[d]), "%s: index broadcast", op);
  }
  return Error::Ok;
}

// The result shape of self[indices]; calls f(result coordinates -> self element offset).
// Returns an error for an index out of range.
template <typename F>
Error for_each_indexed(const Tensor& self, const AdvancedIndex& ix, const int64_t* result_sizes, int result_dim,
                       const char* op, F f) {
  int64_t coord[kMaxDim];
  int64_t total = 1;
  for (int d = 0; d < result_dim; ++d) total *= result_sizes[d];
  const int lead = ix.adjacent ? ix.first : 0;  // where the broadcast dimensions start in the result
  for (int64_t i = 0; i < total; ++i) {
    unravel(i, result_dim, result_sizes, coord);
    int64_t off = 0;
    int r = 0;  // result dimension of the next kept self dimension
    for (int d = 0; d < self.dim(); ++d) {
      if (r == lead) r += ix.rank;
      if (ix.index[d]) {
        int64_t at = 0;
        for (int k = 0; k < ix.rank; ++k) at += coord[lead + k] * ix.strides[d][k];
        int64_t v = 0;
        ET_TRY(index_value(*ix.index[d], at, self.size(d), op, &v));
        off += v * self.strides()[d];
      } else {
        off += coord[r++] * self.strides()[d];
      }
    }
    f(i, off);
  }
  return Error::Ok;
}

Error indexed_shape(const Tensor& self, const AdvancedIndex& ix, int64_t* sizes, int* dim) {
  int n = 0;
  const int lead = ix.adjacent ? ix.first : 0;
  for (int d = 0; d < self.dim(); ++d) {
    if (n == lead) {
      for (int k = 0; k < ix.rank; ++k) sizes[n++] = ix.shape[k];
    }
    if (!ix.index[d]) sizes[n++] = self.size(d);
  }
  if (n == lead) {
    for (int k = 0; k < ix.rank; ++k) sizes[n++] = ix.shape[k];
  }
  *dim = n;
  return n <= kMaxDim ? Error::Ok : Error::InvalidArgument;
}

// index.Tensor(self, indices)
Error index(KernelRuntimeContext&, Args args) {
  const char* op = "aten::index.Tensor";
  Tensor *self, *out;
  ET_TRY(input_output(args, 3, op, &self, &out));
  ET_TRY(same_dtype(*self, *out, op));
  AdvancedIndex ix;
  ET_TRY(parse_indices(*self, *args[1], op, &ix));
  int64_t sizes[2 * kMaxDim];
  int dim;
  KCHECK(indexed_shape(*self, ix, sizes, &dim) == Error::Ok && dim == out->dim(), "%s: output rank mismatch", op);
  for (int d = 0; d < dim; ++d) KCHECK(sizes[d] == out->size(d), "%s: output size mismatch at dim %d", op, d);
  const size_t es = self->element_size();
  return for_each_indexed(*self, ix, sizes, dim, op, [&](int64_t i, int64_t off) {
    std::memcpy(mutable_bytes(*out) + i * es, bytes(*self) + off * es, es);
  });
}

// index_put(self, indices, values, accumulate): a copy of self with values (broadcast) put there.
Error index_put(KernelRuntimeContext&, Args args) {
  const char* op = "aten::index_put";
  Tensor *self, *values, *out;
  int64_t accumulate;
  ET_TRY(read_args(args, op, 5, at(0, &self), at(2, &values), at(4, &out), at(3, &accumulate)));
  ET_TRY(same_dtype(*self, *out, op));
  KCHECK(same_shape(*self, *out) && is_supported_dtype(values->scalar_type()), "%s: output mismatch", op);
  AdvancedIndex ix;
  ET_TRY(parse_indices(*self, *args[1], op, &ix));
  int64_t sizes[2 * kMaxDim];
  int dim;
  KCHECK(indexed_shape(*self, ix, sizes, &dim) == Error::Ok, "%s: too many dimensions", op);
  int64_t vstrides[kMaxDim] = {};
  KCHECK(runtime::broadcast_strides(*values, dim, sizes, vstrides), "%s: values do not broadcast to the indexed shape",
         op);
  if (out->nbytes() && out->const_data_ptr() != self->const_data_ptr()) {
    std::memmove(out->mutable_data_ptr(), self->const_data_ptr(), out->nbytes());
  }
  int64_t coord[2 * kMaxDim];
  auto value_offset = [&](int64_t i) {  // the element of values put at element i of the indexed shape
    unravel(i, dim, sizes, coord);
    int64_t v = 0;
    for (int d = 0; d < dim; ++d) v += coord[d] * vstrides[d];
    return v;
  };
  // Where self's last dimension is not indexed and lies contiguous in self, out and values of self's
  // dtype (the head rows put into a key/value cache), each row is one copy rather than a load and a
  // store per element: the indexed walk covers the rows' first elements only.
  const int last = self->dim() - 1;
  if (!accumulate && last >= 0 && !ix.index[last] && dim > 0 && sizes[dim - 1] > 1 &&
      values->scalar_type() == self->scalar_type() && self->strides()[last] == 1 && out->strides()[last] == 1 &&
      vstrides[dim - 1] == 1) {
    const int64_t run = sizes[dim - 1];
    const size_t es = self->element_size();
    sizes[dim - 1] = 1;
    return for_each_indexed(*self, ix, sizes, dim, op, [&](int64_t i, int64_t off) {
      std::memmove(mutable_bytes(*out) + off * es, bytes(*values) + value_offset(i) * es,
                   static_cast<size_t>(run) * es);
    });
  }
  return for_each_indexed(*self, ix, sizes, dim, op, [&](int64_t i, int64_t off) {
    const double x = load<double>(*values, value_offset(i));
    store<double>(*out, off, accumulate ? load<double>(*out, off) + x : x);
  });
}

// index_select(self, dim, index)
Error index_select(KernelRuntimeContext&, Args args) {
  const char* op = "aten::index_select";
  Tensor *self, *idx, *out;
  int64_t dim;
  ET_TRY(read_args(args, op, 4, at(0, &self), at(2, &idx), at(3, &out), at(1, &dim)));
  ET_TRY(normalize_dim(dim, self->dim(), op, &dim));
  ET_TRY(integer_index(*idx, op));
  ET_TRY(same_dtype(*self, *out, op));
  KCHECK(idx->dim() <= 1 && out->dim() == std::max(self->dim(), 1), "%s: index must be 0-D or 1-D", op);
  for (int d = 0; d < self->dim(); ++d) {
    KCHECK(out->size(d) == (d == dim ? idx->numel() : self->size(d)), "%s: output size mismatch at dim %d", op, d);
  }
  if (self->dim() == 0) {  // a 0-D self: each index 0 (or -1) names its one element
    const size_t es = self->element_size();
    for (int64_t j = 0; j < idx->numel(); ++j) {
      int64_t row;
      ET_TRY(index_value(*idx, j, 1, op, &row));
      std::memcpy(mutable_bytes(*out) + j * es, bytes(*self), es);
    }
    return Error::Ok;
  }
  // Every index checked once, then whole slices copied: for each position before `dim`, the rows
  // the index names, each `inner` elements.
  const int64_t n = self->size(static_cast<int>(dim)), count = idx->numel();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < self->dim(); ++d) {
    if (d < dim) outer *= self->size(d);
    if (d > dim) inner *= self->size(d);
  }
  std::vector<int64_t> rows(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j) ET_TRY(index_value(*idx, j, n, op, &rows[static_cast<size_t>(j)]));
  const size_t block = static_cast<size_t>(inner) * self->element_size();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      std::memcpy(mutable_bytes(*out) + (o * count + j) * block,
                  bytes(*self) + (o * n + rows[static_cast<size_t>(j)]) * block, block);
    }
  }
  return Error::Ok;
}

// gather(self, dim, index, sparse_grad): out[..i..] = self[.. index[..i..] ..] along dim.
Error gather(KernelRuntimeContext&, Args args) {
  const char* op = "aten::gather";
  Tensor *self, *idx, *out;
  int64_t dim;
  ET_TRY(read_args(args, op, 5, at(0, &self), at(2, &idx), at(4, &out), at(1, &dim)));
  ET_TRY(normalize_dim(dim, self->dim(), op, &dim));
  ET_TRY(integer_index(*idx, op));
  ET_TRY(same_dtype(*self, *out, op));
  KCHECK(same_shape(*idx, *out) && idx->dim() == self->dim(), "%s: index and output shapes differ", op);
  for (int d = 0; d < self->dim(); ++d) {
    KCHECK(d == dim || idx->size(d) <= self->size(d), "%s: index larger than self at dim %d", op, d);
  }
  Error err = Error::Ok;
  int64_t i = 0;
  gather_elements(
      *self, *out,
      [&](const int64_t* c, int64_t* s) {
        for (int d = 0; d < self->dim(); ++d) s[d] = c[d];
        if (self->dim() > 0 && index_value(*idx, i, self->size(static_cast<int>(dim)), op, &s[dim]) != Error::Ok) {
          err = Error::InvalidArgument;
          s[dim] = 0;
        }
        ++i;
        return true;
      },
      nullptr);
  return err;
}

// scatter.src(self, dim, index, src) / scatter.value(self, dim, index, value): a copy of self with
// self[.. index[..i..] ..] = src[..i..] along dim.
Error scatter(Args args, const char* op) {
  Tensor *self, *idx, *out, *src = nullptr;
  ET_TRY(read_args(args, op, 5, at(0, &self), at(2, &idx), at(4, &out)));
  double value = 0;
  if (args[3]->is_tensor()) {
    ET_TRY(tensor_at(args, 3, op, &src));
    KCHECK(is_supported_dtype(src->scalar_type()) && src->dim() == idx->dim(), "%s: src mismatch", op);
  } else {
    ET_TRY(double_at(args, 3, op, &value));
  }
  int64_t dim;
  ET_TRY(int_at(args, 1, op, &dim));
  ET_TRY(normalize_dim(dim, self->dim(), op, &dim));
  ET_TRY(integer_index(*idx, op));
  ET_TRY(same_dtype(*self, *out, op));
  KCHECK(same_shape(*self, *out) && idx->dim() == self->dim() && is_supported_dtype(out->scalar_type()),
         "%s: shapes mismatch", op);
  for (int d = 0; d < idx->dim(); ++d) {
    KCHECK((d == dim || idx->size(d) <= self->size(d)) && (!src || idx->size(d) <= src->size(d)),
           "%s: index larger than self or src at dim %d", op, d);
  }
  if (out->nbytes() && out->const_data_ptr() != self->const_data_ptr()) {
    std::memmove(out->mutable_data_ptr(), self->const_data_ptr(), out->nbytes());
  }
  int64_t coord[kMaxDim];
  for (int64_t i = 0; i < idx->numel(); ++i) {
    unravel(i, idx->dim(), idx->sizes(), coord);
    int64_t target;
    ET_TRY(index_value(*idx, i, self->size(static_cast<int>(dim)), op, &target));
    int64_t o = 0, s = 0;
    for (int d = 0; d < idx->dim(); ++d) {
      o += (d == dim ? target : coord[d]) * out->strides()[d];
      if (src) s += coord[d] * src->strides()[d];
    }
    store<double>(*out, o, src ? load<double>(*src, s) : value);
  }
  return Error::Ok;
}
Error scatter_src(KernelRuntimeContext&, Args args) { return scatter(args, "aten::scatter.src"); }
Error scatter_value(KernelRuntimeContext&, Args args) { return scatter(args, "aten::scatter.value"); }

// slice_scatter(self, src, dim, start?, end?, step) and select_scatter(self, src, dim, index):
// a copy of self with the slice (selection) replaced by src.
Error embed(const Tensor& self, const Tensor& src, const Tensor& out, int64_t dim, int64_t start, int64_t step,
            bool select, const char* op) {
  ET_TRY(same_dtype(self, out, op));
  ET_TRY(same_dtype(self, src, op));
  KCHECK(same_shape(self, out), "%s: output shape differs", op);
  KCHECK(src.dim() == self.dim() - (select ? 1 : 0), "%s: src rank mismatch", op);
  for (int d = 0, k = 0; d < self.dim(); ++d) {
    if (select && d == dim) continue;
    KCHECK(d == dim || src.size(k) == self.size(d), "%s: src size mismatch at dim %d", op, d);
    if (d == dim) {
      KCHECK(src.size(k) == 0 || start + (src.size(k) - 1) * step < self.size(d), "%s: src does not fit", op);
    }
    ++k;
  }
  if (out.nbytes() && out.const_data_ptr() != self.const_data_ptr()) {
    std::memmove(out.mutable_data_ptr(), self.const_data_ptr(), out.nbytes());
  }
  const size_t es = self.element_size();
  int64_t coord[kMaxDim];
  for (int64_t i = 0; i < src.numel(); ++i) {
    unravel(i, src.dim(), src.sizes(), coord);
    int64_t o = 0;
    for (int d = 0, k = 0; d < self.dim(); ++d) {
      if (d == dim) {
        o += (select ? start : start + coord[k++] * step) * self.strides()[d];
      } else {
        o += coord[k++] * self.strides()[d];
      }
    }
    std::memcpy(mutable_bytes(out) + o * es, bytes(src) + i * es, es);
  }
  return Error::Ok;
}

Error slice_scatter(KernelRuntimeContext&, Args args) {
  const char* op = "aten::slice_scatter";
  Tensor *self, *src, *out;
  int64_t dim, start = 0, step;
  ET_TRY(read_args(args, op, 7, at(0, &self), at(1, &src), at(6, &out), at(2, &dim)));
  KCHECK(self->dim() > 0, "%s: 0-D self", op);
  ET_TRY(normalize_dim(dim, self->dim(), op, &dim));
  if (!args[3]->is_none()) ET_TRY(int_at(args, 3, op, &start));
  ET_TRY(int_at(args, 5, op, &step));
  KCHECK(step > 0, "%s: step must be positive", op);
  const int64_t size = self->size(static_cast<int>(dim));
  if (start < 0) start += size;
  start = std::min(std::max<int64_t>(start, 0), size);
  return embed(*self, *src, *out, dim, start, step, false, op);
}

Error select_scatter(KernelRuntimeContext&, Args args) {
  const char* op = "aten::select_scatter";
  Tensor *self, *src, *out;
  int64_t dim, index;
  ET_TRY(read_args(args, op, 5, at(0, &self), at(1, &src), at(4, &out), at(2, &dim), at(3, &index)));
  KCHECK(self->dim() > 0, "%s: 0-D self", op);
  ET_TRY(normalize_dim(dim, self->dim(), op, &dim));
  const int64_t size = self->size(static_cast<int>(dim));
  KCHECK(index >= -size && index < size, "%s: index out of range", op);
  return embed(*self, *src, *out, dim, index < 0 ? index + size : index, 1, true, op);
}

// repeat(self, repeats): tiles; repeats may add leading dimensions.
Error repeat(KernelRuntimeContext&, Args args) {
  const char* op = "aten::repeat";
  Tensor *in, *out;
  ET_TRY(input_output(args, 3, op, &in, &out));
  Span<const int64_t> reps;
  ET_TRY(int_list_at(args, 1, op, &reps));
  ET_TRY(same_dtype(*in, *out, op));
  const int lead = static_cast<int>(reps.size()) - in->dim();
  KCHECK(lead >= 0 && out->dim() == static_cast<int>(reps.size()), "%s: repeats shorter than the rank", op);
  for (int d = 0; d < out->dim(); ++d) {
    const int64_t base = d < lead ? 1 : in->size(d - lead);
    KCHECK(reps[d] >= 0 && out->size(d) == base * reps[d], "%s: output size mismatch at dim %d", op, d);
  }
  gather_elements(
      *in, *out,
      [&](const int64_t* c, int64_t* s) {
        for (int d = 0; d < in->dim(); ++d) s[d] = c[d + lead] % in->size(d);
        return true;
      },
      nullptr);
  return Error::Ok;
}

// pixel_shuffle(self, r): [.., C*r*r, H, W] -> [.., C, H*r, W*r]; pixel_unshuffle the inverse.
Error shuffle(Args args, const char* op, bool unshuffle) {
  Tensor *in, *out;
  ET_TRY(input_output(args, 3, op, &in, &out));
  int64_t r;
  ET_TRY(int_at(args, 1, op, &r));
  ET_TRY(same_dtype(*in, *out, op));
  const int n = in->dim();
  KCHECK(n >= 3 && out->dim() == n && r > 0, "%s: needs a rank >= 3 input and a positive factor", op);
  const Tensor& big = unshuffle ? *in : *out;  // the spatially larger one
  const Tensor& small = unshuffle ? *out : *in;
  KCHECK(small.size(n - 3) == big.size(n - 3) * r * r && big.size(n - 2) == small.size(n - 2) * r &&
             big.size(n - 1) == small.size(n - 1) * r,
         "%s: shapes do not match the factor %lld", op, static_cast<long long>(r));
  gather_elements(
      *in, *out,
      [&](const int64_t* c, int64_t* s) {
        for (int d = 0; d < n - 3; ++d) s[d] = c[d];
        if (!unshuffle) {  // out (c, y, x) <- in (c*r*r + (y%r)*r + x%r, y/r, x/r)
          s[n - 3] = c[n - 3] * r * r + (c[n - 2] % r) * r + c[n - 1] % r;
          s[n - 2] = c[n - 2] / r;
          s[n - 1] = c[n - 1] / r;
        } else {  // out (c*r*r + i*r + j, y, x) <- in (c, y*r + i, x*r + j)
          const int64_t k = c[n - 3] % (r * r);
          s[n - 3] = c[n - 3] / (r * r);
          s[n - 2] = c[n - 2] * r + k / r;
          s[n - 1] = c[n - 1] * r + k % r;
        }
        return true;
      },
      nullptr);
  return Error::Ok;
}
Error pixel_shuffle(KernelRuntimeContext&, Args args) { return shuffle(args, "aten::pixel_shuffle", false); }
Error pixel_unshuffle(KernelRuntimeContext&, Args args) { return shuffle(args, "aten::pixel_unshuffle", true); }

const runtime::Kernel kKernels[] = {
    {"aten::as_strided", as_strided},
    {"aten::flip", flip},
    {"aten::roll", roll},
    {"aten::constant_pad_nd", constant_pad_nd},
    {"aten::reflection_pad1d", reflection_pad1d},
    {"aten::reflection_pad2d", reflection_pad2d},
    {"aten::reflection_pad3d", reflection_pad3d},
    {"aten::replication_pad1d", replication_pad1d},
    {"aten::replication_pad2d", replication_pad2d},
    {"aten::replication_pad3d", replication_pad3d},
    {"aten::index.Tensor", index},
    {"aten::index_put", index_put},
    {"aten::index_select", index_select},
    {"aten::gather", gather},
    {"aten::scatter.src", scatter_src},
    {"aten::scatter.value", scatter_value},
    {"aten::slice_scatter", slice_scatter},
    {"aten::select_scatter", select_scatter},
    {"aten::repeat", repeat},
    {"aten::pixel_shuffle", pixel_shuffle},
    {"aten::pixel_unshuffle", pixel_unshuffle},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
