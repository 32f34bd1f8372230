// The aoti_torch_* C ABI: tensor objects, views, copies and errors on the CPU everywhere; device
// tensors, copies, stream guards and the GEMM shims where a CUDA device exists (skipped otherwise).
#include <cmath>
#include <cstring>
#include <vector>

#include <cuda_runtime_api.h>

#include <executorch/backends/cuda/shims/shims.h>
#include <executorch/extension/cuda/cuda_stream.h>
#include <executorch/runtime/core/log.h>
#include <executorch/tests/cc/check.h>

namespace {

void test_cpu_tensors() {
  float data[6] = {1, 2, 3, 4, 5, 6};
  const int64_t sizes[] = {2, 3};
  AtenTensorHandle t = nullptr;
  CHECK(aoti_torch_create_tensor_from_blob_v2(data, 2, sizes, nullptr, 0, aoti_torch_dtype_float32(),
                                              aoti_torch_device_type_cpu(), 0, &t, 0, nullptr,
                                              0) == AOTI_TORCH_SUCCESS);
  int64_t *got_sizes, *got_strides, numel, dim;
  int32_t dtype, device;
  void* ptr;
  CHECK(aoti_torch_get_sizes(t, &got_sizes) == 0 && got_sizes[0] == 2 && got_sizes[1] == 3);
  CHECK(aoti_torch_get_strides(t, &got_strides) == 0 && got_strides[0] == 3 && got_strides[1] == 1);
  CHECK(aoti_torch_get_numel(t, &numel) == 0 && numel == 6);
  CHECK(aoti_torch_get_dim(t, &dim) == 0 && dim == 2);
  CHECK(aoti_torch_get_dtype(t, &dtype) == 0 && dtype == 6);
  CHECK(aoti_torch_get_device_type(t, &device) == 0 && device == aoti_torch_device_type_cpu());
  CHECK(aoti_torch_get_data_ptr(t, &ptr) == 0 && ptr == data);

  // A view of the second row; its storage offset counts elements.
  const int64_t row[] = {3}, one[] = {1};
  AtenTensorHandle view = nullptr;
  CHECK(aoti_torch__reinterpret_tensor(t, 1, row, one, 3, &view) == 0);
  int64_t offset;
  CHECK(aoti_torch_get_storage_offset(view, &offset) == 0 && offset == 3);
  CHECK(aoti_torch_get_data_ptr(view, &ptr) == 0 && static_cast<float*>(ptr)[0] == 4);

  AtenTensorHandle copy = nullptr;
  CHECK(aoti_torch_clone(t, &copy) == 0);
  CHECK(aoti_torch_get_data_ptr(copy, &ptr) == 0 && ptr != data && std::memcmp(ptr, data, sizeof(data)) == 0);
  AtenTensorHandle empty = nullptr;
  CHECK(aoti_torch_empty_strided(2, sizes, nullptr, aoti_torch_dtype_float32(), aoti_torch_device_type_cpu(), 0,
                                 &empty) == 0);
  CHECK(aoti_torch_copy_(empty, view, 0) == AOTI_TORCH_FAILURE);  // sizes differ: an error, not a crash
  CHECK(aoti_torch_copy_(empty, t, 0) == 0);
  CHECK(aoti_torch_get_data_ptr(empty, &ptr) == 0 && static_cast<float*>(ptr)[5] == 6);
  CHECK(aoti_torch_create_tensor_from_blob_v2(data, 2, sizes, nullptr, 0, 99, 0, 0, &view, 0, nullptr, 0) ==
        AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_get_sizes(nullptr, &got_sizes) == AOTI_TORCH_FAILURE);
  for (AtenTensorHandle h : {t, view, copy, empty}) aoti_torch_delete_tensor_object(h);
}

// What generated code calls besides creating and copying: the first form of from_blob, handles
// sharing a tensor, storage sizes, a strided clone with its gaps, grad mode, warnings.
void test_generated_code_calls() {
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t sizes[] = {2, 2}, strides[] = {4, 1};  // columns 0-1 of a 2 x 4 row-major buffer
  AtenTensorHandle t = nullptr, other = nullptr, clone = nullptr;
  CHECK(aoti_torch_create_tensor_from_blob(data, 2, sizes, strides, 1, aoti_torch_dtype_float32(),
                                           aoti_torch_device_type_cpu(), 0, &t) == 0);
  int64_t bytes = 0, offset = 0, *got = nullptr;
  CHECK(aoti_torch_get_storage_size(t, &bytes) == 0 && bytes == (1 + 6) * 4);  // offset 1, then 6 elements reached
  CHECK(aoti_torch_new_tensor_handle(t, &other) == 0 && other != t);
  aoti_torch_delete_tensor_object(t);  // the other handle keeps its view
  void* p = nullptr;
  CHECK(aoti_torch_get_data_ptr(other, &p) == 0 && p == data + 1);
  CHECK(aoti_torch_get_storage_offset(other, &offset) == 0 && offset == 1);
  CHECK(aoti_torch_get_strides(other, &got) == 0 && got[0] == 4 && got[1] == 1);
  CHECK(aoti_torch_clone_preserve_strides(other, &clone) == 0);
  CHECK(aoti_torch_get_strides(clone, &got) == 0 && got[0] == 4 && got[1] == 1);
  CHECK(aoti_torch_get_storage_size(clone, &bytes) == 0 && bytes == 6 * 4);
  CHECK(aoti_torch_get_data_ptr(clone, &p) == 0 && p != data + 1);
  const float* c = static_cast<const float*>(p);
  CHECK(c[0] == 2 && c[1] == 3 && c[4] == 6 && c[5] == 7);  // (0, 0) (0, 1) (1, 0) (1, 1)
  CHECK(aoti_torch_clone_preserve_strides(nullptr, &clone) == AOTI_TORCH_FAILURE);
  const int64_t negative[] = {-1};
  CHECK(aoti_torch_create_tensor_from_blob(data, 1, negative, nullptr, 0, aoti_torch_dtype_float32(),
                                           aoti_torch_device_type_cpu(), 0, &t) == AOTI_TORCH_FAILURE);
  aoti_torch_grad_mode_set_enabled(true);
  CHECK(!aoti_torch_grad_mode_is_enabled());
  aoti_torch_warn("test_generated_code_calls", __FILE__, __LINE__, "a warning from a test, printed");
  for (AtenTensorHandle h : {other, clone}) aoti_torch_delete_tensor_object(h);
}

void test_cuda(bool have_device) {
  if (!have_device) {
    AtenTensorHandle t = nullptr;
    const int64_t sizes[] = {4};
    // No device: an error, not a crash.
    CHECK(aoti_torch_empty_strided(1, sizes, nullptr, aoti_torch_dtype_float32(), aoti_torch_device_type_cuda(), 0,
                                   &t) == AOTI_TORCH_FAILURE);
    return;
  }
  const int64_t m = 37, k = 70, n = 45;
  std::vector<float> a(m * k), b(k * n), bias(n), out(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.1f * i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.07f * i);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.5f * i;
  auto upload = [](std::vector<float>& host, std::vector<int64_t> sizes) {
    AtenTensorHandle h_host = nullptr, h_dev = nullptr;
    aoti_torch_create_tensor_from_blob_v2(host.data(), static_cast<int64_t>(sizes.size()), sizes.data(), nullptr, 0,
                                          aoti_torch_dtype_float32(), aoti_torch_device_type_cpu(), 0, &h_host, 0,
                                          nullptr, 0);
    aoti_torch_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(), nullptr, aoti_torch_dtype_float32(),
                             aoti_torch_device_type_cuda(), 0, &h_dev);
    CHECK(aoti_torch_copy_(h_dev, h_host, 0) == 0);
    aoti_torch_delete_tensor_object(h_host);
    return h_dev;
  };
  AtenTensorHandle da = upload(a, {m, k}), db = upload(b, {k, n}), dbias = upload(bias, {n}),
                   dout = upload(out, {m, n});
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  CUDAStreamGuardHandle guard = nullptr;
  CHECK(aoti_torch_create_cuda_stream_guard(stream, 0, &guard) == 0);
  void* current = nullptr;
  CHECK(aoti_torch_get_current_cuda_stream(0, &current) == 0 && current == stream);
  CHECK(aoti_torch_cuda_addmm_out(dout, dbias, da, db, 1.0, 2.0) == 0);
  std::vector<int64_t> out_sizes = {m, n};
  AtenTensorHandle host_out = nullptr;
  aoti_torch_create_tensor_from_blob_v2(out.data(), 2, out_sizes.data(), nullptr, 0, aoti_torch_dtype_float32(),
                                        aoti_torch_device_type_cpu(), 0, &host_out, 0, nullptr, 0);
  CHECK(aoti_torch_copy_(host_out, dout, 0) == 0);
  aoti_torch_delete_cuda_stream_guard(guard);
  CHECK(!executorch::extension::cuda::current_stream().has_value());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias[j];
      for (int64_t p = 0; p < k; ++p) s += 2.0 * a[i * k + p] * b[p * n + j];
      CHECK(std::fabs(out[i * n + j] - s) < 1e-3 * (1 + std::fabs(s)));
    }
  CHECK(aoti_torch_cuda_mm_out(dout, da, da) == AOTI_TORCH_FAILURE);  // shapes do not multiply
  for (AtenTensorHandle h : {da, db, dbias, dout, host_out}) aoti_torch_delete_tensor_object(h);
  cudaStreamDestroy(stream);
  std::printf("CUDA shims checked on the device\n");
}

// bfloat16 products run on cuBLAS where it loads; elsewhere the call fails and says so.
void test_bfloat16_gemm() {
  const int64_t m = 64, k = 96, n = 80;
  auto to_bf16 = [](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);  // round to nearest even
  };
  auto from_bf16 = [](uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  std::vector<uint16_t> a(m * k), b(k * n), out(m * n, 0xFFFF);
  for (size_t i = 0; i < a.size(); ++i) a[i] = to_bf16(std::sin(0.37f * i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = to_bf16(std::cos(0.11f * i));
  auto device = [](std::vector<uint16_t>& host, int64_t rows, int64_t cols) {
    const int64_t sizes[] = {rows, cols};
    AtenTensorHandle h_host = nullptr, h_dev = nullptr;
    aoti_torch_create_tensor_from_blob_v2(host.data(), 2, sizes, nullptr, 0, aoti_torch_dtype_bfloat16(),
                                          aoti_torch_device_type_cpu(), 0, &h_host, 0, nullptr, 0);
    CHECK(aoti_torch_empty_strided(2, sizes, nullptr, aoti_torch_dtype_bfloat16(), aoti_torch_device_type_cuda(), 0,
                                   &h_dev) == 0);
    CHECK(aoti_torch_copy_(h_dev, h_host, 0) == 0);
    return std::pair{h_host, h_dev};
  };
  auto [ha, da] = device(a, m, k);
  auto [hb, db] = device(b, k, n);
  auto [hout, dout] = device(out, m, n);
  if (aoti_torch_cuda_mm_out(dout, da, db) != AOTI_TORCH_SUCCESS) {
    CHECK(std::strstr(executorch::runtime::last_error_message(), "needs cuBLAS") != nullptr);
    std::printf("bfloat16 GEMM refused without cuBLAS: %s\n", executorch::runtime::last_error_message());
  } else {
    CHECK(aoti_torch_copy_(hout, dout, 0) == 0);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += double(from_bf16(a[i * k + p])) * from_bf16(b[p * n + j]);
        err += (from_bf16(out[i * n + j]) - s) * (from_bf16(out[i * n + j]) - s);
        norm += s * s;
      }
    CHECK(std::sqrt(err / norm) < 1e-2);  // bfloat16 output rounding
    std::printf("bfloat16 GEMM on cuBLAS: relative error %.2e\n", std::sqrt(err / norm));
  }
  for (AtenTensorHandle h : {ha, da, hb, db, hout, dout}) aoti_torch_delete_tensor_object(h);
}

// Batched products: one left matrix for every batch (batch stride 0) and an out whose matrices are
// spaced apart (as a grouped convolution's outputs are), against a double-precision loop.
void test_bmm() {
  const int64_t batch = 5, m = 19, k = 33, n = 27, gap = m * n + 7;
  std::vector<float> a(m * k), b(batch * k * n), out(batch * gap, -1.f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.3f * i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.05f * i);
  auto device = [](std::vector<float>& host) {
    void* ptr = nullptr;
    CHECK(cudaMalloc(&ptr, host.size() * sizeof(float)) == cudaSuccess);
    CHECK(cudaMemcpy(ptr, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    return ptr;
  };
  void *pa = device(a), *pb = device(b), *pout = device(out);
  auto view = [](void* data, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
    AtenTensorHandle h = nullptr;
    CHECK(aoti_torch_create_tensor_from_blob_v2(data, 3, sizes.data(), strides.data(), 0, aoti_torch_dtype_float32(),
                                                aoti_torch_device_type_cuda(), 0, &h, 0, nullptr, 0) == 0);
    return h;
  };
  AtenTensorHandle ha = view(pa, {batch, m, k}, {0, k, 1}), hb = view(pb, {batch, k, n}, {k * n, n, 1}),
                   hout = view(pout, {batch, m, n}, {gap, n, 1});
  CHECK(aoti_torch_cuda_bmm_out(hout, ha, hb) == AOTI_TORCH_SUCCESS);
  CHECK(cudaMemcpy(out.data(), pout, out.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  double worst = 0;
  for (int64_t z = 0; z < batch; ++z) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += double(a[i * k + p]) * b[(z * k + p) * n + j];
        worst = std::fmax(worst, std::fabs(out[z * gap + i * n + j] - s) / (1 + std::fabs(s)));
      }
    CHECK(out[z * gap + m * n] == -1.f);  // the gap between out's matrices is untouched
  }
  CHECK(worst < 1e-4);  // float32 accumulation, no TF32
  // Overlapping out matrices and shapes that do not multiply are errors.
  AtenTensorHandle overlapping = view(pout, {batch, m, n}, {n, n, 1});
  CHECK(aoti_torch_cuda_bmm_out(overlapping, ha, hb) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_cuda_bmm_out(hout, hb, ha) == AOTI_TORCH_FAILURE);
  std::printf("bmm on the device: worst relative error %.2e\n", worst);
  for (AtenTensorHandle h : {ha, hb, hout, overlapping}) aoti_torch_delete_tensor_object(h);
  for (void* p : {pa, pb, pout}) cudaFree(p);
}

}  // namespace

int main() {
  int devices = 0;
  const bool have_device = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  test_cpu_tensors();
  test_generated_code_calls();
  test_cuda(have_device);
  if (have_device) test_bfloat16_gemm();
  if (have_device) test_bmm();
  return executorch::testing::finish("shims_test");
}
