// Matrix products: mm, bmm, addmm (linear layers lower to these), through the blocked sgemm.
#include "kernels/gemm.h"
#include "kernels/kernel_util.h"

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
  ET_TRY(check_count(args, 3, op));
  Tensor *a, *b, *out;
  ET_TRY(tensor_at(args, 0, op, &a));
  ET_TRY(tensor_at(args, 1, op, &b));
  ET_TRY(tensor_at(args, 2, op, &out));
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
  ET_TRY(check_count(args, 3, op));
  Tensor *a, *b, *out;
  ET_TRY(tensor_at(args, 0, op, &a));
  ET_TRY(tensor_at(args, 1, op, &b));
  ET_TRY(tensor_at(args, 2, op, &out));
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
  ET_TRY(check_count(args, 6, op));
  Tensor *bias, *a, *b, *out;
  ET_TRY(tensor_at(args, 0, op, &bias));
  ET_TRY(tensor_at(args, 1, op, &a));
  ET_TRY(tensor_at(args, 2, op, &b));
  ET_TRY(tensor_at(args, 5, op, &out));
  double beta, alpha;
  ET_TRY(double_at(args, 3, op, &beta));
  ET_TRY(double_at(args, 4, op, &alpha));
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

const runtime::Kernel kKernels[] = {
    {"aten::mm", mm},
    {"aten::bmm", bmm},
    {"aten::addmm", addmm},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
