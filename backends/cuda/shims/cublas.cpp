#include <executorch/backends/cuda/shims/cublas.h>

#include <dlfcn.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

// cuBLAS's C ABI (cublas_api.h), the parts used here.
using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;
constexpr int kOpN = 0;             // CUBLAS_OP_N
constexpr int kCompute32F = 68;     // CUBLAS_COMPUTE_32F
constexpr int kGemmDefault = -1;    // CUBLAS_GEMM_DEFAULT
using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, int, int, int, int, int, const void*, const void*, cudaDataType,
                                    int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int, int,
                                    int);
using GemmBatchedFn = cublasStatus_t (*)(cublasHandle_t, int, int, int, int, int, const void*, const void*,
                                         cudaDataType, int, long long, const void*, cudaDataType, int, long long,
                                         const void*, void*, cudaDataType, int, long long, int, int, int);

struct Library {
  void* handle = nullptr;
  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  SetStreamFn set_stream = nullptr;
  GemmExFn gemm_ex = nullptr;
  GemmBatchedFn gemm_batched = nullptr;
  std::string reason;

  Library() {
    const char* mode = std::getenv("EXECUTORCH_CUDA_GEMM");
    if (mode != nullptr && std::strcmp(mode, "builtin") == 0) {
      reason = "EXECUTORCH_CUDA_GEMM=builtin";
      return;
    }
    // Found through this library's runpath ($ORIGIN/../../nvidia/cu13/lib) or the usual search.
    handle = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      reason = std::string("cannot load libcublas.so.13 (pip install nvidia-cublas): ") + (e ? e : "not found");
      return;
    }
    create = reinterpret_cast<CreateFn>(dlsym(handle, "cublasCreate_v2"));
    destroy = reinterpret_cast<DestroyFn>(dlsym(handle, "cublasDestroy_v2"));
    set_stream = reinterpret_cast<SetStreamFn>(dlsym(handle, "cublasSetStream_v2"));
    gemm_ex = reinterpret_cast<GemmExFn>(dlsym(handle, "cublasGemmEx"));
    gemm_batched = reinterpret_cast<GemmBatchedFn>(dlsym(handle, "cublasGemmStridedBatchedEx"));
    if (!create || !destroy || !set_stream || !gemm_ex || !gemm_batched) {
      reason = "libcublas.so.13 lacks cublasCreate_v2, cublasSetStream_v2, cublasGemmEx or cublasGemmStridedBatchedEx";
      dlclose(handle);
      handle = nullptr;
    }
  }
  // Never dlclose'd: handles of other threads may outlive static destruction.
};

Library& library() {
  static Library lib;
  return lib;
}

// One handle per thread (a cuBLAS handle must not be used by two threads at once).
struct ThreadHandle {
  cublasHandle_t handle = nullptr;
  cublasStatus_t status = 0;
  ThreadHandle() { status = library().create(&handle); }
  ~ThreadHandle() {
    if (handle != nullptr) library().destroy(handle);
  }
};

}  // namespace

bool cublas_available() { return library().handle != nullptr; }

const char* cublas_unavailable_reason() { return library().reason.c_str(); }

const char* cublas_gemm(cudaDataType type, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                        const void* b, float beta, void* c, cudaStream_t stream, int64_t batch, int64_t stride_a,
                        int64_t stride_b, int64_t stride_c) {
  if (!cublas_available()) return cublas_unavailable_reason();
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX) return "matrix dimension over cuBLAS's 32-bit limit";
  thread_local ThreadHandle th;
  if (th.status != 0 || th.handle == nullptr) return "cublasCreate failed (out of device memory?)";
  Library& lib = library();
  if (lib.set_stream(th.handle, stream) != 0) return "cublasSetStream failed";
  // Row-major C = A B is column-major C^T = B^T A^T: swap the operands, no transposes.
  const int in = static_cast<int>(n), im = static_cast<int>(m), ik = static_cast<int>(k);
  const cublasStatus_t s =
      batch == 1 ? lib.gemm_ex(th.handle, kOpN, kOpN, in, im, ik, &alpha, b, type, in, a, type, ik, &beta, c, type, in,
                               kCompute32F, kGemmDefault)
                 : lib.gemm_batched(th.handle, kOpN, kOpN, in, im, ik, &alpha, b, type, in, stride_b, a, type, ik,
                                    stride_a, &beta, c, type, in, stride_c, static_cast<int>(batch), kCompute32F,
                                    kGemmDefault);
  if (s != 0) {
    static thread_local char message[64];
    std::snprintf(message, sizeof(message), "cublasGemmEx failed with status %d", s);
    return message;
  }
  return nullptr;
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
