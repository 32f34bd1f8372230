// Scaled dot-product attention, as one kernel: the exporter keeps
// aten::scaled_dot_product_attention whole rather than lowering it to matrix products and softmax.
#include <algorithm>
#include <limits>
#include <unordered_map>
#include <vector>

#include <executorch/kernels/gemm.h>
#include <executorch/kernels/kernel_util.h>
#include <executorch/kernels/vector_math.h>

namespace executorch {
namespace kernels {
namespace {

constexpr const char* kOp = "aten::scaled_dot_product_attention";
constexpr int64_t kQueryBlock = 64;  // queries of one head per task

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
  const int r = s.rank;
  constexpr float kHidden = -std::numeric_limits<float>::infinity();
  // Whether the mask hides key j from the query whose mask row starts at `mask_row`: false, or
  // -inf added (a language model's cache past the position).
  auto hidden = [&](int64_t mask_row, int64_t j) {
    const int64_t at = mask_row + j * mask_strides[r - 1];
    return (bool_mask && !bool_mask[at]) || (added_mask && added_mask[at] == kHidden);
  };
  // Each query's visible keys lie in [first, last): what causality and the mask's hidden ends leave.
  // The span depends on the mask's offset for the query's batch entry and head, which a mask that
  // broadcasts over heads (a language model's) shares: spans are found once per distinct offset.
  const int64_t heads = s.batch * s.q_heads;
  std::vector<int64_t> head_row(static_cast<size_t>(heads)), distinct, span_set(static_cast<size_t>(heads));
  std::unordered_map<int64_t, int64_t> set_of;  // mask offset -> index into distinct
  for (int64_t bh = 0; bh < heads; ++bh) {
    int64_t offset = 0;
    for (int64_t rem = bh, d = r - 3; d >= 0; --d) {
      offset += (rem % s.scores[d]) * mask_strides[d];
      rem /= s.scores[d];
    }
    head_row[static_cast<size_t>(bh)] = offset;
    const auto [at, added] = set_of.emplace(offset, static_cast<int64_t>(distinct.size()));
    if (added) distinct.push_back(offset);
    span_set[static_cast<size_t>(bh)] = at->second;
  }
  std::vector<std::pair<int64_t, int64_t>> spans(distinct.size() * static_cast<size_t>(s.q_len));
  extension::threadpool::parallel_for(0, static_cast<int64_t>(spans.size()), 64, [&](int64_t a, int64_t z) {
    for (int64_t x = a; x < z; ++x) {
      const int64_t i = x % s.q_len, mask_row = distinct[static_cast<size_t>(x / s.q_len)] + i * mask_strides[r - 2];
      int64_t f = 0, l = causal ? std::min(s.kv_len, i + 1) : s.kv_len;
      if (mask) {
        while (f < l && hidden(mask_row, f)) ++f;
        while (l > f && hidden(mask_row, l - 1)) --l;
      }
      spans[static_cast<size_t>(x)] = {f, l};
    }
  });
  // A task is a block of one head's queries: its scores against the keys any of them sees are one
  // matrix product, softmax runs along each row, and the weighted values are a second product.
  const int64_t blocks = (s.q_len + kQueryBlock - 1) / kQueryBlock;
  extension::threadpool::parallel_for(0, heads * blocks, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> scores;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / blocks, i0 = t % blocks * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, s.q_len - i0);
      const int64_t b = bh / s.q_heads, h = bh % s.q_heads;
      const std::pair<int64_t, int64_t>* span = spans.data() + span_set[static_cast<size_t>(bh)] * s.q_len + i0;
      int64_t lo = s.kv_len, hi = 0;  // the union of the block's spans
      for (int64_t q_row = 0; q_row < rows; ++q_row) {
        if (span[q_row].first < span[q_row].second) {
          lo = std::min(lo, span[q_row].first), hi = std::max(hi, span[q_row].second);
        }
      }
      float* ob = od + (bh * s.q_len + i0) * s.value_dim;
      if (hi <= lo) {  // no query of the block may attend to anything: zeros
        std::fill(ob, ob + rows * s.value_dim, 0.f);
        continue;
      }
      const int64_t width = hi - lo, kv = b * s.kv_heads + h / group;
      scores.resize(static_cast<size_t>(rows * width));
      float* sc = scores.data();
      sgemm(rows, width, s.head_dim, static_cast<float>(scale), qd + (bh * s.q_len + i0) * s.head_dim, s.head_dim, 1,
            kd + (kv * s.kv_len + lo) * s.head_dim, 1, s.head_dim, 0.f, sc, width);
      float inverse[kQueryBlock];
      for (int64_t q_row = 0; q_row < rows; ++q_row) {
        float* row = sc + q_row * width;
        const int64_t mask_row = head_row[static_cast<size_t>(bh)] + (i0 + q_row) * mask_strides[r - 2];
        // Keys outside the query's span are hidden; inside it the mask hides (bool) or adds (float).
        // Each loop runs over one array without branches, so the compiler vectorizes it.
        const int64_t first = std::clamp(span[q_row].first, lo, hi) - lo;
        const int64_t last = std::max(std::clamp(span[q_row].second, lo, hi) - lo, first);
        std::fill(row, row + first, kHidden);
        std::fill(row + last, row + width, kHidden);
        const int64_t step = mask_strides[r - 1];
        if (bool_mask) {
          const bool* m = bool_mask + mask_row + lo * step;
          for (int64_t j = first; j < last; ++j) row[j] = m[j * step] ? row[j] : kHidden;
        } else if (added_mask) {
          const float* m = added_mask + mask_row + lo * step;
          for (int64_t j = first; j < last; ++j) row[j] = m[j * step] == kHidden ? kHidden : row[j] + m[j * step];
        }
        float mx = kHidden;
        for (int64_t j = first; j < last; ++j) mx = std::max(mx, row[j]);
        if (mx == kHidden) {  // this query sees no key: its weights, and so its output, are zero
          std::fill(row, row + width, 0.f);
          inverse[q_row] = 0.f;
          continue;
        }
        inverse[q_row] = 1.f / exp_shifted(row, mx, row, width);
      }
      sgemm(rows, s.value_dim, width, 1.f, sc, width, 1, vd + (kv * s.kv_len + lo) * s.value_dim, s.value_dim, 1, 0.f,
            ob, s.value_dim);
      for (int64_t q_row = 0; q_row < rows; ++q_row) {
        float* o = ob + q_row * s.value_dim;
        for (int64_t e = 0; e < s.value_dim; ++e) o[e] *= inverse[q_row];
      }
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
