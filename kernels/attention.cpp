// Scaled dot-product attention, as one kernel: the exporter keeps
// aten::scaled_dot_product_attention whole rather than lowering it to matrix products and softmax.
#include <algorithm>
#include <limits>
#include <vector>

#include <executorch/kernels/gemm.h>
#include <executorch/kernels/kernel_util.h>

namespace executorch {
namespace kernels {
namespace {

constexpr const char* kOp = "aten::scaled_dot_product_attention";

// The shapes of one call. Leading dimensions (all but the last three) are the batch; the third
// from last counts heads: query [..., q_heads, L, E], key [..., kv_heads, S, E],
// value [..., kv_heads, S, Ev], out [..., q_heads, L, Ev].
struct Shape {
  int rank = 0;
  int64_t batch = 1, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0, value_dim = 0;
  int64_t scores[runtime::kTensorDimensionLimit] = {};  // [..., q_heads, L, S]: what the mask broadcasts to
};

Error check_shapes(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, bool gqa, Shape* s) {
  const int r = q.dim();
  KCHECK(r >= 3 && k.dim() == r && v.dim() == r && out.dim() == r,
         "%s: query, key, value and output must have one rank of at least 3 (got %d, %d, %d, %d)", kOp, r, k.dim(),
         v.dim(), out.dim());
  for (int d = 0; d < r - 3; ++d) {
    KCHECK(k.size(d) == q.size(d) && v.size(d) == q.size(d) && out.size(d) == q.size(d),
           "%s: batch dimension %d differs between query, key, value and output", kOp, d);
    s->batch *= q.size(d);
    s->scores[d] = q.size(d);
  }
  s->rank = r;
  s->q_heads = q.size(r - 3), s->kv_heads = k.size(r - 3);
  s->q_len = q.size(r - 2), s->kv_len = k.size(r - 2);
  s->head_dim = q.size(r - 1), s->value_dim = v.size(r - 1);
  KCHECK(v.size(r - 3) == s->kv_heads && v.size(r - 2) == s->kv_len, "%s: key and value disagree on heads or length",
         kOp);
  KCHECK(k.size(r - 1) == s->head_dim, "%s: query and key head sizes differ (%lld vs %lld)", kOp,
         static_cast<long long>(s->head_dim), static_cast<long long>(k.size(r - 1)));
  if (gqa) {
    KCHECK(s->kv_heads > 0 && s->q_heads % s->kv_heads == 0,
           "%s: enable_gqa needs query heads (%lld) to be a multiple of key/value heads (%lld)", kOp,
           static_cast<long long>(s->q_heads), static_cast<long long>(s->kv_heads));
  } else {
    // One key/value head broadcasts over the query's heads (multi-query attention written without
    // enable_gqa, as Falcon does).
    KCHECK(s->kv_heads == s->q_heads || s->kv_heads == 1,
           "%s: query has %lld heads, key/value %lld (enable_gqa is false, and they do not broadcast)", kOp,
           static_cast<long long>(s->q_heads), static_cast<long long>(s->kv_heads));
  }
  KCHECK(out.size(r - 3) == s->q_heads && out.size(r - 2) == s->q_len && out.size(r - 1) == s->value_dim,
         "%s: the output must be shaped [..., %lld, %lld, %lld]", kOp, static_cast<long long>(s->q_heads),
         static_cast<long long>(s->q_len), static_cast<long long>(s->value_dim));
  s->scores[r - 3] = s->q_heads, s->scores[r - 2] = s->q_len, s->scores[r - 1] = s->kv_len;
  return Error::Ok;
}

// scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, out).
// attn_mask: None, bool (true: attend) or float (added to the scores), broadcast to [..., L, S].
// is_causal masks key j for query i where j > i. A query that may attend to nothing gets zeros.
Error scaled_dot_product_attention(KernelRuntimeContext&, Args args) {
  Tensor *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  ET_TRY(read_args(args, kOp, 9, at(0, &q), at(1, &k), at(2, &v), at(8, &out)));
  for (const Tensor* t : {q, k, v, out})
    ET_TRY(check_dtype(*t, ScalarType::Float, kOp, "query, key, value and output"));
  Tensor* mask = nullptr;
  if (!args[3]->is_none()) {
    ET_TRY(tensor_at(args, 3, kOp, &mask));
    KCHECK(mask->scalar_type() == ScalarType::Bool || mask->scalar_type() == ScalarType::Float,
           "%s: attn_mask has dtype %s, expected Bool or Float", kOp, runtime::to_string(mask->scalar_type()));
  }
  double dropout = 0.0;
  int64_t causal = 0, gqa = 0;
  ET_TRY(double_at(args, 4, kOp, &dropout));
  ET_TRY(int_at(args, 5, kOp, &causal));
  ET_TRY(int_at(args, 7, kOp, &gqa));
  KCHECK(dropout == 0.0, "%s: dropout_p is %g; inference takes 0", kOp, dropout);
  KCHECK(!(causal && mask), "%s: attn_mask and is_causal together", kOp);
  Shape s;
  ET_TRY(check_shapes(*q, *k, *v, *out, gqa != 0, &s));
  double scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(s.head_dim, 1)));
  if (!args[6]->is_none()) ET_TRY(double_at(args, 6, kOp, &scale));
  int64_t mask_strides[runtime::kTensorDimensionLimit] = {};
  if (mask) {
    KCHECK(runtime::broadcast_strides(*mask, s.rank, s.scores, mask_strides),
           "%s: attn_mask of rank %d does not broadcast to the scores [..., %lld, %lld]", kOp, mask->dim(),
           static_cast<long long>(s.q_len), static_cast<long long>(s.kv_len));
  }
  const float* qd = q->data_ptr<float>();
  const float* kd = k->data_ptr<float>();
  const float* vd = v->data_ptr<float>();
  float* od = out->data_ptr<float>();
  const bool* bool_mask = mask && mask->scalar_type() == ScalarType::Bool ? mask->data_ptr<bool>() : nullptr;
  const float* added_mask = mask && !bool_mask ? mask->data_ptr<float>() : nullptr;
  const int64_t group = s.kv_heads ? s.q_heads / s.kv_heads : 1;
  const int64_t rows = s.batch * s.q_heads * s.q_len;
  const int r = s.rank;
  extension::threadpool::parallel_for(0, rows, 4, [&](int64_t r0, int64_t r1) {
    std::vector<float> p(static_cast<size_t>(s.kv_len));
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t i = row % s.q_len, bh = row / s.q_len;
      const int64_t b = bh / s.q_heads, h = bh % s.q_heads;
      const float* qi = qd + row * s.head_dim;
      const float* kb = kd + (b * s.kv_heads + h / group) * s.kv_len * s.head_dim;
      const float* vb = vd + (b * s.kv_heads + h / group) * s.kv_len * s.value_dim;
      int64_t mask_row = i * mask_strides[r - 2];
      for (int64_t rem = bh, d = r - 3; d >= 0; --d) {  // the mask's offset for this batch entry and head
        mask_row += (rem % s.scores[d]) * mask_strides[d];
        rem /= s.scores[d];
      }
      const int64_t keys = causal ? std::min(s.kv_len, i + 1) : s.kv_len;
      constexpr float kHidden = -std::numeric_limits<float>::infinity();
      float mx = kHidden;
      for (int64_t j = 0; j < keys; ++j) {
        // A key the mask hides (false, or -inf added: a language model's cache past the position)
        // is skipped, its product with the query never taken.
        const int64_t at = mask_row + j * mask_strides[r - 1];
        const float added = added_mask ? added_mask[at] : 0.f;
        const bool hidden = (bool_mask && !bool_mask[at]) || added == kHidden;
        const float score =
            hidden ? kHidden : dot(qi, kb + j * s.head_dim, s.head_dim) * static_cast<float>(scale) + added;
        p[static_cast<size_t>(j)] = score;
        mx = std::max(mx, score);
      }
      float* oi = od + row * s.value_dim;
      std::fill(oi, oi + s.value_dim, 0.f);
      if (mx == kHidden) continue;
      float sum = 0.f;
      for (int64_t j = 0; j < keys; ++j) {
        if (p[static_cast<size_t>(j)] == kHidden) continue;  // weight 0
        const float w = std::exp(p[static_cast<size_t>(j)] - mx);
        sum += w;
        for (int64_t e = 0; e < s.value_dim; ++e) oi[e] += w * vb[j * s.value_dim + e];
      }
      for (int64_t e = 0; e < s.value_dim; ++e) oi[e] /= sum;
    }
  });
  return Error::Ok;
}

const runtime::Kernel kKernels[] = {
    {"aten::scaled_dot_product_attention", scaled_dot_product_attention},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
