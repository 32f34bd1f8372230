// Matrix products: mm, bmm, addmm (linear layers lower to these), through the blocked sgemm; the
// grouped product of mixture-of-experts layers; the int8 linear layer of quantized programs.
#include <algorithm>
#include <vector>

#include <executorch/kernels/gemm.h>
#include <executorch/kernels/kernel_util.h>

namespace executorch {
namespace kernels {
namespace {

Error check_matrix(const Tensor& t, int rank, const char* op, const char* what) {
  KCHECK(t.dim() == rank, "%s: %s must have %d dimensions, has %d", op, what, rank, t.dim());
  return check_dtype(t, ScalarType::Float, op, what);
}

Error check_out(const Tensor& out, std::initializer_list<int64_t> sizes, const char* op) {
  KCHECK(out.dim() == static_cast<int>(sizes.size()), "%s: output has %d dimensions, expected %zu", op, out.dim(),
         sizes.size());
  int d = 0;
  for (int64_t s : sizes) {
    KCHECK(out.size(d) == s, "%s: output size %lld at dim %d, expected %lld", op, static_cast<long long>(out.size(d)),
           d, static_cast<long long>(s));
    ++d;
  }
  return check_dtype(out, ScalarType::Float, op, "output");
}

Error mm(KernelRuntimeContext&, Args args) {
  const char* op = "aten::mm";
  Tensor *a, *b, *out;
  ET_TRY(read_args(args, op, 3, at(0, &a), at(1, &b), at(2, &out)));
  ET_TRY(check_matrix(*a, 2, op, "self"));
  ET_TRY(check_matrix(*b, 2, op, "mat2"));
  const int64_t m = a->size(0), k = a->size(1), n = b->size(1);
  KCHECK(b->size(0) == k, "%s: inner sizes differ (%lld vs %lld)", op, static_cast<long long>(k),
         static_cast<long long>(b->size(0)));
  ET_TRY(check_out(*out, {m, n}, op));
  sgemm(m, n, k, 1.f, a->data_ptr<float>(), k, 1, b->data_ptr<float>(), n, 1, 0.f, out->data_ptr<float>(), n);
  return Error::Ok;
}

Error bmm(KernelRuntimeContext&, Args args) {
  const char* op = "aten::bmm";
  Tensor *a, *b, *out;
  ET_TRY(read_args(args, op, 3, at(0, &a), at(1, &b), at(2, &out)));
  ET_TRY(check_matrix(*a, 3, op, "self"));
  ET_TRY(check_matrix(*b, 3, op, "mat2"));
  const int64_t batch = a->size(0), m = a->size(1), k = a->size(2), n = b->size(2);
  KCHECK(b->size(0) == batch && b->size(1) == k, "%s: shapes [%lld, %lld, %lld] and [%lld, %lld, %lld] do not multiply",
         op, static_cast<long long>(batch), static_cast<long long>(m), static_cast<long long>(k),
         static_cast<long long>(b->size(0)), static_cast<long long>(b->size(1)), static_cast<long long>(n));
  ET_TRY(check_out(*out, {batch, m, n}, op));
  for (int64_t i = 0; i < batch; ++i) {
    sgemm(m, n, k, 1.f, a->data_ptr<float>() + i * m * k, k, 1, b->data_ptr<float>() + i * k * n, n, 1, 0.f,
          out->data_ptr<float>() + i * m * n, n);
  }
  return Error::Ok;
}

// addmm(self, mat1, mat2, beta, alpha) = beta * self + alpha * (mat1 @ mat2); self broadcasts.
Error addmm(KernelRuntimeContext&, Args args) {
  const char* op = "aten::addmm";
  Tensor *bias, *a, *b, *out;
  double beta, alpha;
  ET_TRY(read_args(args, op, 6, at(0, &bias), at(1, &a), at(2, &b), at(5, &out), at(3, &beta), at(4, &alpha)));
  ET_TRY(check_dtype(*bias, ScalarType::Float, op, "self"));
  ET_TRY(check_matrix(*a, 2, op, "mat1"));
  ET_TRY(check_matrix(*b, 2, op, "mat2"));
  const int64_t m = a->size(0), k = a->size(1), n = b->size(1);
  KCHECK(b->size(0) == k, "%s: inner sizes differ (%lld vs %lld)", op, static_cast<long long>(k),
         static_cast<long long>(b->size(0)));
  ET_TRY(check_out(*out, {m, n}, op));
  int64_t strides[1][runtime::kTensorDimensionLimit] = {};
  ET_TRY(broadcast_strides(*bias, *out, op, strides[0]));
  const float* pb = bias->data_ptr<float>();
  float* po = out->data_ptr<float>();
  for_each_broadcast<1>(*out, strides, [&](int64_t i, const int64_t* offs) { po[i] = pb[offs[0]]; });
  sgemm(m, n, k, static_cast<float>(alpha), a->data_ptr<float>(), k, 1, b->data_ptr<float>(), n, 1,
        static_cast<float>(beta), po, n);
  return Error::Ok;
}

// executorch::grouped_mm(x [S, K], weight [E, K, N], offsets [E]) (mixture-of-experts layers): rows
// [offsets[e - 1], offsets[e]) of x times weight[e], one product per group; rows from offsets[E - 1]
// on are zero. Offsets are int32 or int64, non-decreasing, at most S.
Error grouped_mm(KernelRuntimeContext&, Args args) {
  const char* op = "executorch::grouped_mm";
  Tensor *x, *w, *offsets, *out;
  ET_TRY(read_args(args, op, 4, at(0, &x), at(1, &w), at(2, &offsets), at(3, &out)));
  ET_TRY(check_matrix(*x, 2, op, "input"));
  ET_TRY(check_matrix(*w, 3, op, "weight"));
  const int64_t s = x->size(0), k = x->size(1), experts = w->size(0), n = w->size(2);
  KCHECK(w->size(1) == k, "%s: input has %lld features, the weights take %lld", op, static_cast<long long>(k),
         static_cast<long long>(w->size(1)));
  KCHECK(offsets->dim() == 1 && offsets->size(0) == experts, "%s: offsets must be one per expert (%lld)", op,
         static_cast<long long>(experts));
  KCHECK(offsets->scalar_type() == ScalarType::Int || offsets->scalar_type() == ScalarType::Long,
         "%s: offsets must be int32 or int64", op);
  ET_TRY(check_out(*out, {s, n}, op));
  const float* xs = x->data_ptr<float>();
  const float* ws = w->data_ptr<float>();
  float* ys = out->data_ptr<float>();
  int64_t start = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t end = load<int64_t>(*offsets, e);
    KCHECK(end >= start && end <= s, "%s: offsets[%lld] = %lld; they must be non-decreasing and at most %lld", op,
           static_cast<long long>(e), static_cast<long long>(end), static_cast<long long>(s));
    if (end > start) sgemm(end - start, n, k, 1.f, xs + start * k, k, 1, ws + e * k * n, n, 1, 0.f, ys + start * n, n);
    start = end;
  }
  std::fill(ys + start * n, ys + s * n, 0.f);
  return Error::Ok;
}

// The float32 bias (or none) and output of a quantized linear layer with n output features: the
// output shaped like the input with its last dimension n.
Error check_linear_output(const Tensor& x, const Tensor* bias, const Tensor& out, int64_t n, const char* op) {
  if (bias) {
    ET_TRY(check_dtype(*bias, ScalarType::Float, op, "bias"));
    KCHECK(bias->numel() == n, "%s: bias has %lld elements, expected %lld", op, static_cast<long long>(bias->numel()),
           static_cast<long long>(n));
  }
  const int64_t rows = x.numel() / x.size(x.dim() - 1);
  KCHECK(out.dim() == x.dim() && out.size(out.dim() - 1) == n && out.numel() == rows * n,
         "%s: output must be shaped like the input with %lld features", op, static_cast<long long>(n));
  return Error::Ok;
}

// int8_linear(x, weight, scale, bias) -> out: x float32 [..., k]; weight int8 [n, k] with float32
// per-row scale [n]; bias float32 [n] or None; out float32 [..., n]. Each row of x is quantized
// (docs/program_format.md states the arithmetic, which CudaBackend's kernels share):
//   s = max|x_row| / 127, q = clamp(round_half_even(x * (127 / max|x_row|)), -127, 127)
//   out = float(sum q * weight_row) * s * scale[n] (+ bias[n])
// int32 sums of k products of int8 values stay exact up to this depth.
constexpr int64_t kMaxInt8Depth = (int64_t{1} << 31) / (127 * 127);

// The operands of int8_linear and int8_weight_linear (x, weight, scale, bias?) -> out, checked (a
// weight of at most max_depth input features): `rows` rows of x with k features, n outputs.
struct Int8Operands {
  int64_t rows, n, k;
  const float* x;
  const int8_t* w;
  const float *scale, *bias;
  float* out;
};

Error int8_operands(Args args, const char* op, int64_t max_depth, Int8Operands* o) {
  Tensor *x = nullptr, *w = nullptr, *scale = nullptr, *bias = nullptr, *out = nullptr;
  ET_TRY(read_args(args, op, 5, at(0, &x), at(1, &w), at(2, &scale), optional_at(3, &bias), at(4, &out)));
  ET_TRY(check_dtype(*x, ScalarType::Float, op, "input"));
  ET_TRY(check_dtype(*w, ScalarType::Char, op, "weight"));
  ET_TRY(check_dtype(*scale, ScalarType::Float, op, "scale"));
  ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  KCHECK(w->dim() == 2 && x->dim() >= 1, "%s: weight must be 2-D and input at least 1-D", op);
  const int64_t n = w->size(0), k = w->size(1);
  KCHECK(k > 0 && x->size(x->dim() - 1) == k, "%s: input has %lld features, the weight %lld", op,
         static_cast<long long>(x->size(x->dim() - 1)), static_cast<long long>(k));
  KCHECK(k <= max_depth, "%s: the weight has %lld input features, at most %lld", op, static_cast<long long>(k),
         static_cast<long long>(max_depth));
  KCHECK(scale->numel() == n, "%s: %lld scales for %lld output features", op, static_cast<long long>(scale->numel()),
         static_cast<long long>(n));
  ET_TRY(check_linear_output(*x, bias, *out, n, op));
  *o = {x->numel() / k,
        n,
        k,
        x->data_ptr<float>(),
        w->data_ptr<int8_t>(),
        scale->data_ptr<float>(),
        bias ? bias->data_ptr<float>() : nullptr,
        out->data_ptr<float>()};
  return Error::Ok;
}

// y[r * n + j] = float(q[r] . w[j]) * s[r] * scale[j] (+ bias[j]) for int8 weight rows j in
// [j0, j1): exact int32 sums, which the AVX2 clone computes as vectors.
EXECUTORCH_VECTOR_CLONES
void int8_products(const int8_t* q, const float* s, int64_t rows, const int8_t* w, const float* scale,
                   const float* bias, int64_t n, int64_t k, int64_t j0, int64_t j1, float* y) {
  for (int64_t j = j0; j < j1; ++j) {
    const int8_t* wr = w + j * k;
    for (int64_t r = 0; r < rows; ++r) {
      const int8_t* qr = q + r * k;
      int32_t acc = 0;
      for (int64_t c = 0; c < k; ++c) acc += static_cast<int32_t>(qr[c]) * static_cast<int32_t>(wr[c]);
      const float v = static_cast<float>(acc) * s[r] * scale[j];
      y[r * n + j] = bias ? v + bias[j] : v;
    }
  }
}

Error int8_linear(KernelRuntimeContext&, Args args) {
  Int8Operands o;
  ET_TRY(int8_operands(args, "executorch::int8_linear", kMaxInt8Depth, &o));
  const int64_t n = o.n, k = o.k;
  std::vector<int8_t> q(static_cast<size_t>(o.rows * k));
  std::vector<float> s(static_cast<size_t>(o.rows));
  for (int64_t r = 0; r < o.rows; ++r) {
    const float* row = o.x + r * k;
    float amax = 0.f;
    for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(row[c]));
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    for (int64_t c = 0; c < k; ++c) {
      const long v = std::lrint(row[c] * inv);  // the default rounding mode: half to even
      q[static_cast<size_t>(r * k + c)] = static_cast<int8_t>(std::clamp<long>(v, -127, 127));
    }
    s[static_cast<size_t>(r)] = amax / 127.f;
  }
  // Threads take output features: each weight row is read once, for every row of x.
  extension::threadpool::parallel_for(0, n, 16, [&](int64_t j0, int64_t j1) {
    int8_products(q.data(), s.data(), o.rows, o.w, o.scale, o.bias, n, k, j0, j1, o.out);
  });
  return Error::Ok;
}

// Weight-only quantized linear layers: up to kGemvRows rows of x (decoding) take dot products with
// the stored weights; more rows expand kExpandBlock weight rows at a time for a float32 GEMM.
constexpr int64_t kGemvRows = 4;

// The loops below widen eight columns of weights to floats in registers (v8i, v8u: gemm.h's), so
// they stay vector code.

// Left shifts that put byte 0, 1, 2, 3 of a little-endian 32-bit word at its top.
constexpr v8u kByteTops = {24, 16, 8, 0, 24, 16, 8, 0};

// y[r * n + j] = x[r] . w[j] * scale[j] (+ bias[j]) for int8 weight rows j in [j0, j1).
EXECUTORCH_VECTOR_CLONES
void int8_rows(const float* x, int64_t rows, const int8_t* w, const float* scale, const float* bias, int64_t n,
               int64_t k, int64_t j0, int64_t j1, float* y) {
  for (int64_t j = j0; j < j1; ++j) {
    const int8_t* wj = w + j * k;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * k;
      v8f lanes = {};
      int64_t p = 0;
      for (; p + 8 <= k; p += 8) {  // each byte shifted to the top of its lane, then arithmetically down
        v8f xv;
        uint32_t words[2];
        std::memcpy(&xv, xr + p, sizeof(xv));
        std::memcpy(words, wj + p, sizeof(words));
        const v8u spread = {words[0], words[0], words[0], words[0], words[1], words[1], words[1], words[1]};
        const v8u top = spread << kByteTops;
        lanes += xv * __builtin_convertvector(reinterpret_cast<const v8i&>(top) >> 24, v8f);
      }
      float sum = lane_sum(lanes);
      for (; p < k; ++p) sum += xr[p] * static_cast<float>(wj[p]);
      const float v = sum * scale[j];
      y[r * n + j] = bias ? v + bias[j] : v;
    }
  }
}

// v = the eight 4-bit values packed in `word` (column 2i in byte i's low nibble, 2i + 1 in its high
// one), each still offset by 8. Inlined into each caller, whose target sets the instructions.
__attribute__((always_inline)) inline void int4_nibbles(uint32_t word, v8f& v) {
  const v8u shifts = {0, 4, 8, 12, 16, 20, 24, 28};
  const v8u bits = (v8u{} + word) >> shifts;
  v = __builtin_convertvector(reinterpret_cast<const v8i&>(bits) & 0x0F, v8f);
}

// y[r * n + j] = x[r] . (w[j] - 8) * scales (+ bias[j]) for int4 weight rows j in [j0, j1) as stored
// (value + 8, two to a byte, the low nibble first; a scale per group of `group` columns, a multiple
// of 8): each group's dot product with the stored nibbles (four bytes shifted apart into eight
// lanes), corrected by 8 * the group's sum of x (xsum, per row and group), then scaled.
EXECUTORCH_VECTOR_CLONES
void int4_rows(const float* x, int64_t rows, const uint8_t* w, const float* scales, const float* xsum,
               const float* bias, int64_t n, int64_t k, int64_t group, int64_t j0, int64_t j1, float* y) {
  const int64_t groups = k / group;
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* wj = w + j * (k / 2);
    const float* sj = scales + j * groups;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * k;
      float acc = 0.f;
      for (int64_t g = 0; g < groups; ++g) {
        v8f lanes = {};
        for (int64_t c = g * group; c < (g + 1) * group; c += 8) {
          uint32_t word;
          v8f xv, wv;
          std::memcpy(&word, wj + c / 2, sizeof(word));
          std::memcpy(&xv, xr + c, sizeof(xv));
          int4_nibbles(word, wv);
          lanes += xv * wv;
        }
        acc += (lane_sum(lanes) - 8.f * xsum[r * groups + g]) * sj[g];
      }
      y[r * n + j] = bias ? acc + bias[j] : acc;
    }
  }
}

// row[c] = (nibble c of w - 8) * scales[c / group] for c < k: a packed int4 weight row as float32,
// eight columns per 32-bit word (k and group are multiples of 8).
EXECUTORCH_VECTOR_CLONES
void int4_expand(const uint8_t* w, const float* scales, int64_t k, int64_t group, float* row) {
  for (int64_t c = 0; c < k; c += 8) {
    uint32_t word;
    v8f v;
    std::memcpy(&word, w + c / 2, sizeof(word));
    int4_nibbles(word, v);
    v = (v - 8.f) * scales[c / group];
    std::memcpy(row + c, &v, sizeof(v));
  }
}

// row[c] = w[c] * scale for c < k: an int8 weight row as float32.
EXECUTORCH_VECTOR_CLONES
void int8_expand(const int8_t* w, float scale, int64_t k, float* row) {
  for (int64_t c = 0; c < k; ++c) row[c] = static_cast<float>(w[c]) * scale;
}

constexpr int64_t kExpandBlock = 256;

// out[rows, n] = x[rows, k] . W^T (+ bias) for a quantized weight whose row j expand(j, row) writes
// as float32 (prefill: many rows): blocks of kExpandBlock weight rows expanded, then one float32 GEMM
// per block.
template <typename Expand>
void expanded_linear(int64_t rows, int64_t n, int64_t k, const float* px, Expand expand, const float* pb, float* po) {
  std::vector<float> block(static_cast<size_t>(std::min(kExpandBlock, n) * k));
  for (int64_t j0 = 0; j0 < n; j0 += kExpandBlock) {
    const int64_t jb = std::min(kExpandBlock, n - j0);
    extension::threadpool::parallel_for(0, jb, 8, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) expand(j0 + b, block.data() + b * k);
    });
    sgemm(rows, jb, k, 1.f, px, k, 1, block.data(), 1, k, 0.f, po + j0, n);
  }
  if (pb) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) po[r * n + j] += pb[j];
    }
  }
}

// int4_linear(x, packed, scales, group_size, bias) -> out: x float32 [..., k]; packed uint8 [n, k / 2],
// weight column 2i in the low nibble and 2i + 1 in the high one, each holding value + 8 for a value in
// [-8, 7]; scales float32 [n, k / group_size], one per group of group_size columns; bias float32 [n]
// or None; out float32 [..., n] = x . (value * scale of its group) (+ bias). Weight-only: the
// activations stay float32.
Error int4_linear(KernelRuntimeContext&, Args args) {
  const char* op = "executorch::int4_linear";
  Tensor *x = nullptr, *w = nullptr, *scales = nullptr, *bias = nullptr, *out = nullptr;
  int64_t group = 0;
  ET_TRY(
      read_args(args, op, 6, at(0, &x), at(1, &w), at(2, &scales), at(3, &group), optional_at(4, &bias), at(5, &out)));
  ET_TRY(check_dtype(*x, ScalarType::Float, op, "input"));
  ET_TRY(check_dtype(*w, ScalarType::Byte, op, "packed weight"));
  ET_TRY(check_dtype(*scales, ScalarType::Float, op, "scales"));
  ET_TRY(check_dtype(*out, ScalarType::Float, op, "output"));
  KCHECK(w->dim() == 2 && scales->dim() == 2 && x->dim() >= 1, "%s: weight and scales must be 2-D, input at least 1-D",
         op);
  const int64_t n = w->size(0), k = w->size(1) * 2;
  KCHECK(group >= 8 && group % 8 == 0 && k > 0 && k % group == 0 && x->size(x->dim() - 1) == k,
         "%s: input has %lld features, the weight %lld in groups of %lld", op,
         static_cast<long long>(x->size(x->dim() - 1)), static_cast<long long>(k), static_cast<long long>(group));
  KCHECK(scales->size(0) == n && scales->size(1) == k / group, "%s: scales must be [%lld, %lld]", op,
         static_cast<long long>(n), static_cast<long long>(k / group));
  ET_TRY(check_linear_output(*x, bias, *out, n, op));
  const int64_t rows = x->numel() / k;
  const float* px = x->data_ptr<float>();
  const uint8_t* pw = w->data_ptr<uint8_t>();
  const float* ps = scales->data_ptr<float>();
  const float* pb = bias ? bias->data_ptr<float>() : nullptr;
  float* po = out->data_ptr<float>();
  auto expand = [&](int64_t j, float* row) { int4_expand(pw + j * (k / 2), ps + j * (k / group), k, group, row); };
  if (rows <= kGemvRows) {
    // Decoding: few rows, the packed weights read once (int4_rows).
    const int64_t groups = k / group;
    std::vector<float> xsum(static_cast<size_t>(rows * groups), 0.f);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < k; ++c) xsum[static_cast<size_t>(r * groups + c / group)] += px[r * k + c];
    }
    extension::threadpool::parallel_for(0, n, 16, [&](int64_t j0, int64_t j1) {
      int4_rows(px, rows, pw, ps, xsum.data(), pb, n, k, group, j0, j1, po);
    });
    return Error::Ok;
  }
  expanded_linear(rows, n, k, px, expand, pb, po);
  return Error::Ok;
}

// int8_weight_linear(x, weight, scale, bias) -> out: x float32 [..., k]; weight int8 [n, k], row j
// scaled by scale[j] (float32 [n]); bias float32 [n] or None; out float32 [..., n] = x . (weight *
// scale) (+ bias). Weight-only: the activations stay float32 (executorch::int8_linear quantizes them).
Error int8_weight_linear(KernelRuntimeContext&, Args args) {
  Int8Operands o;
  ET_TRY(int8_operands(args, "executorch::int8_weight_linear", INT64_MAX, &o));
  const int64_t n = o.n, k = o.k;
  if (o.rows <= kGemvRows) {
    // Decoding: each weight row read once, as int8, for every row of x.
    extension::threadpool::parallel_for(
        0, n, 16, [&](int64_t j0, int64_t j1) { int8_rows(o.x, o.rows, o.w, o.scale, o.bias, n, k, j0, j1, o.out); });
    return Error::Ok;
  }
  auto expand = [&](int64_t j, float* row) { int8_expand(o.w + j * k, o.scale[j], k, row); };
  expanded_linear(o.rows, n, k, o.x, expand, o.bias, o.out);
  return Error::Ok;
}

const runtime::Kernel kKernels[] = {
    {"executorch::int8_linear", int8_linear},
    {"executorch::int4_linear", int4_linear},
    {"executorch::int8_weight_linear", int8_weight_linear},
    {"aten::mm", mm},
    {"aten::bmm", bmm},
    {"aten::addmm", addmm},
    {"executorch::grouped_mm", grouped_mm},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
