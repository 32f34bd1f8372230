// AOTInductor's C ABI over executorch tensors. C++ exceptions never cross it: allocation failures
// and bad arguments come back as AOTI_TORCH_FAILURE with a message.
#include <executorch/backends/cuda/shims/shims.h>

#include <executorch/backends/cuda/shims/cublas.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include <cuda_runtime_api.h>

#include <executorch/backends/cuda/kernels/gemm.h>
#include <executorch/extension/cuda/cuda_stream.h>
#include <executorch/runtime/core/log.h>
#include <executorch/runtime/core/scalar_type.h>
#include <executorch/runtime/core/tensor.h>

namespace rt = executorch::runtime;
namespace ecuda = executorch::extension::cuda;

namespace {

constexpr int32_t kCpu = 0, kCuda = 1;

// Memory shared by a tensor and its reinterpretations; freed with the last of them when owned.
struct Storage {
  void* data = nullptr;
  size_t bytes = 0;  // allocated, or (a caller's blob) reachable through the first view's strides
  bool owned = false;
  bool cuda = false;
  ~Storage() {
    if (!owned) return;
    if (cuda) {
      cudaFree(data);
    } else {
      std::free(data);
    }
  }
};

}  // namespace

struct AtenTensorOpaque {
  std::shared_ptr<Storage> storage;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;  // elements
  rt::ScalarType dtype = rt::ScalarType::Float;
  int32_t device_type = kCpu;
  int32_t device_index = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  size_t element_size() const { return rt::element_size(dtype); }
  void* data() const { return static_cast<char*>(storage->data) + offset * static_cast<int64_t>(element_size()); }
  bool contiguous() const {
    int64_t expected = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      if (sizes[d] != 1 && strides[d] != expected) return false;
      expected *= sizes[d];
    }
    return true;
  }
};

struct CUDAGuardOpaque {
  ecuda::DeviceGuard device;
  explicit CUDAGuardOpaque(int device_index) : device(device_index) {}
};

struct CUDAStreamGuardOpaque {
  ecuda::DeviceGuard device;
  ecuda::StreamGuard stream;
  CUDAStreamGuardOpaque(int device_index, cudaStream_t s) : device(device_index), stream(s) {}
};

namespace {

// The C ABI answers with a code; the message is kept for last_error_message().
AOTITorchError fail(const char* what) {
  (void)rt::set_error(rt::Error::InvalidArgument, "%s", what);
  return AOTI_TORCH_FAILURE;
}

// A guard G(args...) into *ret, which holds until it is deleted; `fn` names the call in failures.
template <typename G, typename... Args>
AOTITorchError new_guard(const char* fn, G** ret, Args... args) {
  auto failed = [fn](const char* what) {
    (void)rt::set_error(rt::Error::InvalidArgument, "%s: %s", fn, what);
    return AOTI_TORCH_FAILURE;
  };
  if (ret == nullptr) return failed("null argument");
  std::unique_ptr<G> g(new (std::nothrow) G(args...));
  if (g == nullptr) return failed("out of host memory");
  if (!g->device.ok()) return failed("no such CUDA device");
  *ret = g.release();
  return AOTI_TORCH_SUCCESS;
}

AOTITorchError cuda_fail(cudaError_t status, const char* what) {
  (void)ecuda::to_error(status, what);
  return AOTI_TORCH_FAILURE;
}

bool valid_dtype(int32_t dtype) { return rt::element_size(static_cast<rt::ScalarType>(dtype)) != 0; }

// Elements reachable through `strides` (contiguous where null) from the first: 0 for an empty
// tensor, -1 for a negative size.
int64_t span_of(int64_t ndim, const int64_t* sizes, const int64_t* strides) {
  for (int64_t d = 0; d < ndim; ++d) {
    if (sizes[d] < 0) return -1;
    if (sizes[d] == 0) return 0;
  }
  int64_t span = 1, expected = 1;
  for (int64_t d = ndim; d-- > 0;) {
    const int64_t stride = strides ? strides[d] : expected;
    span += (sizes[d] - 1) * stride;
    expected *= sizes[d];
  }
  return span;
}

AOTITorchError make(std::shared_ptr<Storage> storage, int64_t ndim, const int64_t* sizes, const int64_t* strides,
                    int64_t offset, rt::ScalarType dtype, int32_t device_type, int32_t device_index,
                    AtenTensorHandle* ret) {
  if (ret == nullptr || ndim < 0 || ndim > rt::kTensorDimensionLimit || (ndim > 0 && sizes == nullptr)) {
    return fail("aoti shim: bad tensor arguments");
  }
  auto* t = new (std::nothrow) AtenTensorOpaque();
  if (t == nullptr) return fail("aoti shim: out of host memory");
  t->storage = std::move(storage);
  t->sizes.assign(sizes, sizes + ndim);
  t->strides.resize(static_cast<size_t>(ndim));
  int64_t expected = 1;
  for (int64_t d = ndim; d-- > 0;) {
    t->strides[d] = strides ? strides[d] : expected;
    expected *= sizes[d];
  }
  t->offset = offset;
  t->dtype = dtype;
  t->device_type = device_type;
  t->device_index = device_index;
  *ret = t;
  return AOTI_TORCH_SUCCESS;
}

cudaStream_t stream_now() {
  const auto s = ecuda::current_stream();
  return s ? *s : nullptr;
}

// `bytes` from src to dst: on the host where both tensors are, else on the current stream, waited
// for unless `non_blocking`.
cudaError_t copy_bytes(const AtenTensorOpaque& dst, const AtenTensorOpaque& src, size_t bytes, bool non_blocking) {
  if (dst.device_type == kCpu && src.device_type == kCpu) {
    std::memmove(dst.data(), src.data(), bytes);
    return cudaSuccess;
  }
  const cudaStream_t stream = stream_now();
  cudaError_t status = cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDefault, stream);
  if (status == cudaSuccess && !non_blocking) status = cudaStreamSynchronize(stream);
  return status;
}

}  // namespace

extern "C" {

int32_t aoti_torch_device_type_cpu(void) { return kCpu; }
int32_t aoti_torch_device_type_cuda(void) { return kCuda; }
int32_t aoti_torch_dtype_float32(void) { return static_cast<int32_t>(rt::ScalarType::Float); }
int32_t aoti_torch_dtype_float16(void) { return static_cast<int32_t>(rt::ScalarType::Half); }
int32_t aoti_torch_dtype_bfloat16(void) { return static_cast<int32_t>(rt::ScalarType::BFloat16); }
int32_t aoti_torch_dtype_int64(void) { return static_cast<int32_t>(rt::ScalarType::Long); }
int32_t aoti_torch_dtype_int32(void) { return static_cast<int32_t>(rt::ScalarType::Int); }
int32_t aoti_torch_dtype_int8(void) { return static_cast<int32_t>(rt::ScalarType::Char); }
int32_t aoti_torch_dtype_uint8(void) { return static_cast<int32_t>(rt::ScalarType::Byte); }
int32_t aoti_torch_dtype_bool(void) { return static_cast<int32_t>(rt::ScalarType::Bool); }
int32_t aoti_torch_layout_strided(void) { return 0; }

AOTITorchError aoti_torch_create_tensor_from_blob_v2(void* data, int64_t ndim, const int64_t* sizes,
                                                     const int64_t* strides, int64_t storage_offset, int32_t dtype,
                                                     int32_t device_type, int32_t device_index, AtenTensorHandle* ret,
                                                     int32_t layout, const uint8_t*, int64_t) {
  if (!valid_dtype(dtype) || (device_type != kCpu && device_type != kCuda) || layout != 0 || storage_offset < 0) {
    return fail("aoti_torch_create_tensor_from_blob_v2: unsupported dtype, device or layout");
  }
  if (ndim < 0 || (ndim > 0 && sizes == nullptr)) return fail("aoti_torch_create_tensor_from_blob_v2: bad sizes");
  const int64_t span = span_of(ndim, sizes, strides);
  if (span < 0) return fail("aoti_torch_create_tensor_from_blob_v2: negative size");
  auto storage = std::make_shared<Storage>();
  storage->data = data;
  storage->bytes = static_cast<size_t>(storage_offset + span) * rt::element_size(static_cast<rt::ScalarType>(dtype));
  storage->cuda = device_type == kCuda;
  return make(std::move(storage), ndim, sizes, strides, storage_offset, static_cast<rt::ScalarType>(dtype), device_type,
              device_index, ret);
}

AOTITorchError aoti_torch_create_tensor_from_blob(void* data, int64_t ndim, const int64_t* sizes,
                                                  const int64_t* strides, int64_t storage_offset, int32_t dtype,
                                                  int32_t device_type, int32_t device_index, AtenTensorHandle* ret) {
  return aoti_torch_create_tensor_from_blob_v2(data, ndim, sizes, strides, storage_offset, dtype, device_type,
                                               device_index, ret, aoti_torch_layout_strided(), nullptr, 0);
}

AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t* sizes, const int64_t* strides, int32_t dtype,
                                        int32_t device_type, int32_t device_index, AtenTensorHandle* ret) {
  if (!valid_dtype(dtype) || (device_type != kCpu && device_type != kCuda)) {
    return fail("aoti_torch_empty_strided: unsupported dtype or device");
  }
  if (ndim < 0 || (ndim > 0 && sizes == nullptr)) return fail("aoti_torch_empty_strided: bad sizes");
  const int64_t span = span_of(ndim, sizes, strides);
  if (span < 0) return fail("aoti_torch_empty_strided: negative size");
  const size_t bytes = static_cast<size_t>(span) * rt::element_size(static_cast<rt::ScalarType>(dtype));
  auto storage = std::make_shared<Storage>();
  storage->bytes = bytes;
  storage->owned = true;
  storage->cuda = device_type == kCuda;
  if (storage->cuda) {
    ecuda::DeviceGuard guard(device_index);
    if (!guard.ok()) return fail("aoti_torch_empty_strided: no such CUDA device");
    const cudaError_t status = cudaMalloc(&storage->data, bytes == 0 ? 1 : bytes);
    if (status != cudaSuccess) {
      storage->owned = false;
      return cuda_fail(status, "aoti_torch_empty_strided");
    }
  } else {
    storage->data = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (storage->data == nullptr) return fail("aoti_torch_empty_strided: out of host memory");
  }
  return make(std::move(storage), ndim, sizes, strides, 0, static_cast<rt::ScalarType>(dtype), device_type,
              device_index, ret);
}

AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor) {
  delete tensor;
  return AOTI_TORCH_SUCCESS;
}

#define GETTER(name, type, expr)                                              \
  AOTITorchError name(AtenTensorHandle t, type ret) {                         \
    if (t == nullptr || ret == nullptr) return fail(#name ": null argument"); \
    *ret = expr;                                                              \
    return AOTI_TORCH_SUCCESS;                                                \
  }
GETTER(aoti_torch_get_data_ptr, void**, t->data())
GETTER(aoti_torch_get_sizes, int64_t**, t->sizes.data())
GETTER(aoti_torch_get_strides, int64_t**, t->strides.data())
GETTER(aoti_torch_get_dtype, int32_t*, static_cast<int32_t>(t->dtype))
GETTER(aoti_torch_get_dim, int64_t*, static_cast<int64_t>(t->sizes.size()))
GETTER(aoti_torch_get_numel, int64_t*, t->numel())
GETTER(aoti_torch_get_storage_offset, int64_t*, t->offset)
GETTER(aoti_torch_get_device_type, int32_t*, t->device_type)
GETTER(aoti_torch_get_device_index, int32_t*, t->device_index)
GETTER(aoti_torch_get_storage_size, int64_t*, static_cast<int64_t>(t->storage->bytes))
#undef GETTER

AOTITorchError aoti_torch_new_tensor_handle(AtenTensorHandle orig, AtenTensorHandle* ret) {
  if (orig == nullptr) return fail("aoti_torch_new_tensor_handle: null tensor");
  return make(orig->storage, static_cast<int64_t>(orig->sizes.size()), orig->sizes.data(), orig->strides.data(),
              orig->offset, orig->dtype, orig->device_type, orig->device_index, ret);
}

// Inference only: there is no autograd to switch on or off.
bool aoti_torch_grad_mode_is_enabled(void) { return false; }
void aoti_torch_grad_mode_set_enabled(bool) {}

void aoti_torch_warn(const char* func, const char* file, uint32_t line, const char* msg) {
  std::fprintf(stderr, "executorch: warning from generated code in %s (%s:%u): %s\n", func ? func : "?",
               file ? file : "?", static_cast<unsigned>(line), msg ? msg : "");
}

AOTITorchError aoti_torch_copy_(AtenTensorHandle self, AtenTensorHandle src, int32_t non_blocking) {
  if (self == nullptr || src == nullptr) return fail("aoti_torch_copy_: null tensor");
  if (self->dtype != src->dtype || self->numel() != src->numel() || !self->contiguous() || !src->contiguous()) {
    return fail("aoti_torch_copy_: only contiguous copies between tensors of one dtype and size");
  }
  const size_t bytes = static_cast<size_t>(self->numel()) * self->element_size();
  const cudaError_t status = copy_bytes(*self, *src, bytes, non_blocking != 0);
  return status == cudaSuccess ? AOTI_TORCH_SUCCESS : cuda_fail(status, "aoti_torch_copy_");
}

AOTITorchError aoti_torch_clone(AtenTensorHandle self, AtenTensorHandle* ret) {
  if (self == nullptr || ret == nullptr) return fail("aoti_torch_clone: null argument");
  if (aoti_torch_empty_strided(static_cast<int64_t>(self->sizes.size()), self->sizes.data(), nullptr,
                               static_cast<int32_t>(self->dtype), self->device_type, self->device_index,
                               ret) != AOTI_TORCH_SUCCESS) {
    return AOTI_TORCH_FAILURE;
  }
  if (aoti_torch_copy_(*ret, self, 0) != AOTI_TORCH_SUCCESS) {
    delete *ret;
    *ret = nullptr;
    return AOTI_TORCH_FAILURE;
  }
  return AOTI_TORCH_SUCCESS;
}

AOTITorchError aoti_torch_clone_preserve_strides(AtenTensorHandle self, AtenTensorHandle* ret) {
  if (self == nullptr || ret == nullptr) return fail("aoti_torch_clone_preserve_strides: null argument");
  const int64_t ndim = static_cast<int64_t>(self->sizes.size());
  if (aoti_torch_empty_strided(ndim, self->sizes.data(), self->strides.data(), static_cast<int32_t>(self->dtype),
                               self->device_type, self->device_index, ret) != AOTI_TORCH_SUCCESS) {
    return AOTI_TORCH_FAILURE;
  }
  // Every element the strides reach, as one run of bytes: the copy keeps the layout, gaps included.
  const int64_t span = span_of(ndim, self->sizes.data(), self->strides.data());
  const size_t bytes = static_cast<size_t>(span) * self->element_size();
  if (bytes == 0) return AOTI_TORCH_SUCCESS;
  const cudaError_t status = copy_bytes(**ret, *self, bytes, /*non_blocking=*/true);
  if (status == cudaSuccess) return AOTI_TORCH_SUCCESS;
  delete *ret;
  *ret = nullptr;
  return cuda_fail(status, "aoti_torch_clone_preserve_strides");
}

AOTITorchError aoti_torch__reinterpret_tensor(AtenTensorHandle self, int64_t ndim, const int64_t* sizes,
                                              const int64_t* strides, int64_t storage_offset, AtenTensorHandle* ret) {
  if (self == nullptr || storage_offset < 0) return fail("aoti_torch__reinterpret_tensor: bad arguments");
  return make(self->storage, ndim, sizes, strides, self->offset + storage_offset, self->dtype, self->device_type,
              self->device_index, ret);
}

AOTITorchError aoti_torch_create_cuda_guard(int32_t device_index, CUDAGuardHandle* ret) {
  return new_guard("aoti_torch_create_cuda_guard", ret, device_index);
}

AOTITorchError aoti_torch_delete_cuda_guard(CUDAGuardHandle guard) {
  delete guard;
  return AOTI_TORCH_SUCCESS;
}

AOTITorchError aoti_torch_cuda_guard_set_index(CUDAGuardHandle guard, int32_t device_index) {
  if (guard == nullptr) return fail("aoti_torch_cuda_guard_set_index: null guard");
  const cudaError_t status = cudaSetDevice(device_index);
  return status == cudaSuccess ? AOTI_TORCH_SUCCESS : cuda_fail(status, "aoti_torch_cuda_guard_set_index");
}

AOTITorchError aoti_torch_create_cuda_stream_guard(void* stream, int32_t device_index, CUDAStreamGuardHandle* ret) {
  return new_guard("aoti_torch_create_cuda_stream_guard", ret, device_index, static_cast<cudaStream_t>(stream));
}

AOTITorchError aoti_torch_delete_cuda_stream_guard(CUDAStreamGuardHandle guard) {
  delete guard;
  return AOTI_TORCH_SUCCESS;
}

AOTITorchError aoti_torch_get_current_cuda_stream(int32_t, void** ret_stream) {
  if (ret_stream == nullptr) return fail("aoti_torch_get_current_cuda_stream: null argument");
  *ret_stream = stream_now();
  return AOTI_TORCH_SUCCESS;
}

static AOTITorchError check_matrix(AtenTensorHandle t, rt::ScalarType dtype, const char* what) {
  if (t == nullptr || t->device_type != kCuda || t->dtype != dtype || !t->contiguous()) {
    (void)rt::set_error(rt::Error::InvalidArgument, "%s must be a contiguous %s CUDA tensor like mat1", what,
                        rt::to_string(dtype));
    return AOTI_TORCH_FAILURE;
  }
  return AOTI_TORCH_SUCCESS;
}

// cuBLAS's type code for a matrix dtype the shims multiply.
static bool gemm_type(rt::ScalarType dtype, cudaDataType* out) {
  switch (dtype) {
    case rt::ScalarType::Float: return *out = CUDA_R_32F, true;
    case rt::ScalarType::Half: return *out = CUDA_R_16F, true;
    case rt::ScalarType::BFloat16: return *out = CUDA_R_16BF, true;
    default: return false;
  }
}

// out = beta * self + alpha * mat1 @ mat2. float16 and bfloat16 run on cuBLAS (tensor cores);
// float32 on cuBLAS where it loads, else on the built-in kernel.
AOTITorchError aoti_torch_cuda_addmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat1,
                                         AtenTensorHandle mat2, double beta, double alpha) {
  namespace kc = executorch::backends::cuda;
  cudaDataType type;
  if (mat1 == nullptr || !gemm_type(mat1->dtype, &type)) {
    return fail("aoti_torch_cuda_addmm_out: mat1 must be a float32, float16 or bfloat16 CUDA tensor");
  }
  for (auto [t, what] : {std::pair{out, "out"}, {mat1, "mat1"}, {mat2, "mat2"}}) {
    if (check_matrix(t, mat1->dtype, what) != AOTI_TORCH_SUCCESS) return AOTI_TORCH_FAILURE;
  }
  if (self && check_matrix(self, mat1->dtype, "self") != AOTI_TORCH_SUCCESS) return AOTI_TORCH_FAILURE;
  if (mat1->sizes.size() != 2 || mat2->sizes.size() != 2 || out->sizes.size() != 2 ||
      mat1->sizes[1] != mat2->sizes[0] || out->sizes[0] != mat1->sizes[0] || out->sizes[1] != mat2->sizes[1]) {
    return fail("aoti_torch_cuda_addmm_out: shapes do not multiply");
  }
  const int64_t m = out->sizes[0], n = out->sizes[1], k = mat1->sizes[1];
  const bool half = type != CUDA_R_32F;
  if (half && !kc::cublas_available()) {
    (void)rt::set_error(rt::Error::NotSupported, "aoti_torch_cuda_addmm_out: %s needs cuBLAS: %s",
                        rt::to_string(mat1->dtype), kc::cublas_unavailable_reason());
    return AOTI_TORCH_FAILURE;
  }
  const cudaStream_t stream = stream_now();
  // A linear layer's bias (one per column, added once) goes in cuBLASLt's epilogue where it can.
  if (self != nullptr && beta == 1.0 && alpha == 1.0 && self->numel() == n && !self->sizes.empty() &&
      self->sizes.back() == n && m > 0 && n > 0 && kc::cublas_available() &&
      kc::cublaslt_gemm_bias(type, m, n, k, mat1->data(), mat2->data(), self->data(), out->data(), stream) == nullptr) {
    return AOTI_TORCH_SUCCESS;
  }
  cudaError_t status = cudaSuccess;
  if (self != nullptr && beta != 0.0) {
    status = kc::launch_broadcast_rows(m, n, self->data(), self->numel(), out->data(),
                                       static_cast<int>(self->element_size()), stream);
  }
  if (status != cudaSuccess) return cuda_fail(status, "aoti_torch_cuda_addmm_out");
  const float b = self != nullptr ? static_cast<float>(beta) : 0.f;
  if (kc::cublas_available()) {
    if (m == 0 || n == 0) return AOTI_TORCH_SUCCESS;
    if (const char* e = kc::cublas_gemm(type, m, n, k, static_cast<float>(alpha), mat1->data(), mat2->data(), b,
                                        out->data(), stream)) {
      (void)rt::set_error(rt::Error::Internal, "aoti_torch_cuda_addmm_out: %s", e);
      return AOTI_TORCH_FAILURE;
    }
    return AOTI_TORCH_SUCCESS;
  }
  status = kc::launch_sgemm(m, n, k, static_cast<float>(alpha), static_cast<const float*>(mat1->data()),
                            static_cast<const float*>(mat2->data()), b, static_cast<float*>(out->data()), stream);
  return status == cudaSuccess ? AOTI_TORCH_SUCCESS : cuda_fail(status, "aoti_torch_cuda_addmm_out");
}

AOTITorchError executorch_cuda_linear_residual_out(AtenTensorHandle out, AtenTensorHandle bias, AtenTensorHandle mat1,
                                                   AtenTensorHandle mat2, AtenTensorHandle residual) {
  namespace kc = executorch::backends::cuda;
  const char* op = "executorch_cuda_linear_residual_out";
  cudaDataType type;
  if (mat1 == nullptr || !gemm_type(mat1->dtype, &type)) {
    return fail("executorch_cuda_linear_residual_out: mat1 must be a float32, float16 or bfloat16 CUDA tensor");
  }
  for (auto [t, what] : {std::pair{out, "out"}, {mat1, "mat1"}, {mat2, "mat2"}, {residual, "residual"}}) {
    if (check_matrix(t, mat1->dtype, what) != AOTI_TORCH_SUCCESS) return AOTI_TORCH_FAILURE;
  }
  if (bias && check_matrix(bias, mat1->dtype, "bias") != AOTI_TORCH_SUCCESS) return AOTI_TORCH_FAILURE;
  if (mat1->sizes.size() != 2 || mat2->sizes.size() != 2 || out->sizes.size() != 2 ||
      mat1->sizes[1] != mat2->sizes[0] || out->sizes[0] != mat1->sizes[0] || out->sizes[1] != mat2->sizes[1] ||
      residual->sizes != out->sizes || (bias && bias->numel() != out->sizes[1])) {
    return fail("executorch_cuda_linear_residual_out: shapes do not multiply");
  }
  const int64_t m = out->sizes[0], n = out->sizes[1], k = mat1->sizes[1];
  if (m == 0 || n == 0) return AOTI_TORCH_SUCCESS;
  if (type != CUDA_R_32F && !kc::cublas_available()) {
    (void)rt::set_error(rt::Error::NotSupported, "%s: %s needs cuBLAS: %s", op, rt::to_string(mat1->dtype),
                        kc::cublas_unavailable_reason());
    return AOTI_TORCH_FAILURE;
  }
  const cudaStream_t stream = stream_now();
  if (kc::cublas_available() &&
      kc::cublaslt_gemm_bias(type, m, n, k, mat1->data(), mat2->data(), bias ? bias->data() : nullptr, out->data(),
                             stream, residual->data()) == nullptr) {
    return AOTI_TORCH_SUCCESS;
  }
  cudaError_t status = cudaSuccess;
  if (residual->data() != out->data()) {
    status = cudaMemcpyAsync(out->data(), residual->data(), static_cast<size_t>(m * n) * out->element_size(),
                             cudaMemcpyDeviceToDevice, stream);
  }
  if (status != cudaSuccess) return cuda_fail(status, op);
  if (kc::cublas_available()) {
    if (const char* e = kc::cublas_gemm(type, m, n, k, 1.f, mat1->data(), mat2->data(), 1.f, out->data(), stream)) {
      (void)rt::set_error(rt::Error::Internal, "%s: %s", op, e);
      return AOTI_TORCH_FAILURE;
    }
  } else {
    status = kc::launch_sgemm(m, n, k, 1.f, static_cast<const float*>(mat1->data()),
                              static_cast<const float*>(mat2->data()), 1.f, static_cast<float*>(out->data()), stream);
  }
  if (status == cudaSuccess && bias) status = kc::launch_add_rows(m, n, bias->data(), out->data(), type, stream);
  return status == cudaSuccess ? AOTI_TORCH_SUCCESS : cuda_fail(status, op);
}

AOTITorchError aoti_torch_cuda_mm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
  return aoti_torch_cuda_addmm_out(out, nullptr, self, mat2, 0.0, 1.0);
}

// A 3-D CUDA tensor of `dtype` whose matrices are row-major; its batch stride in *batch_stride.
static bool batched_matrix(AtenTensorHandle t, rt::ScalarType dtype, int64_t* batch_stride) {
  if (t == nullptr || t->device_type != kCuda || t->dtype != dtype || t->sizes.size() != 3) return false;
  const auto& s = t->sizes;
  const auto& st = t->strides;
  if ((s[2] > 1 && st[2] != 1) || (s[1] > 1 && st[1] != s[2]) || st[0] < 0) return false;
  *batch_stride = s[0] > 1 ? st[0] : 0;
  return true;
}

AOTITorchError aoti_torch_cuda_bmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
  namespace kc = executorch::backends::cuda;
  cudaDataType type;
  if (self == nullptr || !gemm_type(self->dtype, &type)) {
    return fail("aoti_torch_cuda_bmm_out: self must be a float32, float16 or bfloat16 CUDA tensor");
  }
  int64_t sa = 0, sb = 0, sc = 0;
  if (!batched_matrix(self, self->dtype, &sa) || !batched_matrix(mat2, self->dtype, &sb) ||
      !batched_matrix(out, self->dtype, &sc)) {
    return fail(
        "aoti_torch_cuda_bmm_out: self, mat2 and out must be 3-D CUDA tensors of one dtype with row-major matrices");
  }
  const int64_t batch = out->sizes[0], m = out->sizes[1], n = out->sizes[2], k = self->sizes[2];
  if (self->sizes[0] != batch || mat2->sizes[0] != batch || self->sizes[1] != m || mat2->sizes[1] != k ||
      mat2->sizes[2] != n) {
    return fail("aoti_torch_cuda_bmm_out: shapes do not multiply");
  }
  if (batch > 1 && sc < m * n) return fail("aoti_torch_cuda_bmm_out: the matrices of out overlap");
  if (batch == 0 || m == 0 || n == 0) return AOTI_TORCH_SUCCESS;
  const cudaStream_t stream = stream_now();
  if (kc::cublas_available()) {
    if (const char* e = kc::cublas_gemm(type, m, n, k, 1.f, self->data(), mat2->data(), 0.f, out->data(), stream, batch,
                                        sa, sb, sc)) {
      (void)rt::set_error(rt::Error::Internal, "aoti_torch_cuda_bmm_out: %s", e);
      return AOTI_TORCH_FAILURE;
    }
    return AOTI_TORCH_SUCCESS;
  }
  if (type != CUDA_R_32F) {
    (void)rt::set_error(rt::Error::NotSupported, "aoti_torch_cuda_bmm_out: %s needs cuBLAS: %s",
                        rt::to_string(self->dtype), kc::cublas_unavailable_reason());
    return AOTI_TORCH_FAILURE;
  }
  const cudaError_t status =
      kc::launch_sgemm(m, n, k, 1.f, static_cast<const float*>(self->data()), static_cast<const float*>(mat2->data()),
                       0.f, static_cast<float*>(out->data()), stream, batch, sa, sb, sc);
  return status == cudaSuccess ? AOTI_TORCH_SUCCESS : cuda_fail(status, "aoti_torch_cuda_bmm_out");
}

}  // extern "C"
