#include <executorch/backends/cuda/shims/cublas.h>

#include <dlfcn.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>

#include <executorch/backends/cuda/shims/thread_handle.h>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

// cuBLAS's C ABI (cublas_api.h), the parts used here.
using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;
constexpr int kOpN = 0;           // CUBLAS_OP_N
constexpr int kCompute32F = 68;   // CUBLAS_COMPUTE_32F
constexpr int kGemmDefault = -1;  // CUBLAS_GEMM_DEFAULT
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

// cuBLASLt's C ABI (cublasLt.h), the parts used here; it ships beside cuBLAS, which loads it.
using LtHandle = struct cublasLtContext*;
using LtDesc = void*;    // cublasLtMatmulDesc_t
using LtLayout = void*;  // cublasLtMatrixLayout_t
using LtPref = void*;    // cublasLtMatmulPreference_t
struct LtAlgo {
  uint64_t data[8];
};
struct LtHeuristic {
  LtAlgo algo;
  size_t workspace_bytes;
  cublasStatus_t state;
  float waves;
  int reserved[4];
};
constexpr int kLtDescTransA = 3, kLtDescTransB = 4, kLtDescEpilogue = 7, kLtDescBiasPointer = 8;  // attributes
constexpr uint32_t kLtEpilogueDefault = 1, kLtEpilogueBias = 4;  // CUBLASLT_EPILOGUE_DEFAULT, _BIAS
constexpr int kLtPrefMaxWorkspace = 1;
constexpr int kScale32F = 0;  // CUDA_R_32F

struct LtLibrary {
  cublasStatus_t (*create)(LtHandle*) = nullptr;
  cublasStatus_t (*desc_create)(LtDesc*, int, int) = nullptr;
  cublasStatus_t (*desc_destroy)(LtDesc) = nullptr;
  cublasStatus_t (*desc_set)(LtDesc, int, const void*, size_t) = nullptr;
  cublasStatus_t (*layout_create)(LtLayout*, cudaDataType, uint64_t, uint64_t, int64_t) = nullptr;
  cublasStatus_t (*layout_destroy)(LtLayout) = nullptr;
  cublasStatus_t (*pref_create)(LtPref*) = nullptr;
  cublasStatus_t (*pref_destroy)(LtPref) = nullptr;
  cublasStatus_t (*pref_set)(LtPref, int, const void*, size_t) = nullptr;
  cublasStatus_t (*heuristic)(LtHandle, LtDesc, LtLayout, LtLayout, LtLayout, LtLayout, LtPref, int, LtHeuristic*,
                              int*) = nullptr;
  cublasStatus_t (*matmul)(LtHandle, LtDesc, const void*, const void*, LtLayout, const void*, LtLayout, const void*,
                           const void*, LtLayout, void*, LtLayout, const LtAlgo*, void*, size_t,
                           cudaStream_t) = nullptr;
  bool ok = false;

  LtLibrary() {
    if (!cublas_available()) return;
    void* h = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);  // loaded already, as cuBLAS needs it
    if (h == nullptr) return;
    const auto sym = [h](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      return fn != nullptr;
    };
    ok = sym(create, "cublasLtCreate") && sym(desc_create, "cublasLtMatmulDescCreate") &&
         sym(desc_destroy, "cublasLtMatmulDescDestroy") && sym(desc_set, "cublasLtMatmulDescSetAttribute") &&
         sym(layout_create, "cublasLtMatrixLayoutCreate") && sym(layout_destroy, "cublasLtMatrixLayoutDestroy") &&
         sym(pref_create, "cublasLtMatmulPreferenceCreate") && sym(pref_destroy, "cublasLtMatmulPreferenceDestroy") &&
         sym(pref_set, "cublasLtMatmulPreferenceSetAttribute") && sym(heuristic, "cublasLtMatmulAlgoGetHeuristic") &&
         sym(matmul, "cublasLtMatmul");
  }
};

LtLibrary& lt() {
  static LtLibrary lib;
  return lib;
}

// One product shape's descriptors and the algorithm the heuristic chose (found once per thread).
struct LtPlan {
  LtDesc desc = nullptr;
  LtLayout a = nullptr, b = nullptr, d = nullptr;
  LtAlgo algo{};
  bool ok = false;
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (desc) lt().desc_destroy(desc);
    for (LtLayout l : {a, b, d}) {
      if (l) lt().layout_destroy(l);
    }
  }
};

struct LtThread {
  LtHandle handle = nullptr;
  std::map<std::tuple<int, bool, int64_t, int64_t, int64_t>, LtPlan> plans;  // (type, bias, m, n, k)
  LtThread() {
    if (lt().create(&handle) != 0) handle = nullptr;
  }
  // The handle is left to the process's end: plans must not outlive it, and cublasLtDestroy
  // during static destruction may run after the CUDA runtime is gone.
};

}  // namespace

bool cublas_available() { return library().handle != nullptr; }

const char* cublas_unavailable_reason() { return library().reason.c_str(); }

const char* cublas_gemm(cudaDataType type, int64_t m, int64_t n, int64_t k, float alpha, const void* a, const void* b,
                        float beta, void* c, cudaStream_t stream, int64_t batch, int64_t stride_a, int64_t stride_b,
                        int64_t stride_c) {
  if (!cublas_available()) return cublas_unavailable_reason();
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX)
    return "matrix dimension over cuBLAS's 32-bit limit";
  thread_local ThreadHandle<Library, cublasHandle_t, cublasStatus_t> th(library());
  if (th.status != 0 || th.handle == nullptr) return "cublasCreate failed (out of device memory?)";
  Library& lib = library();
  if (lib.set_stream(th.handle, stream) != 0) return "cublasSetStream failed";
  // Row-major C = A B is column-major C^T = B^T A^T: swap the operands, no transposes.
  const int in = static_cast<int>(n), im = static_cast<int>(m), ik = static_cast<int>(k);
  const cublasStatus_t s = batch == 1 ? lib.gemm_ex(th.handle, kOpN, kOpN, in, im, ik, &alpha, b, type, in, a, type, ik,
                                                    &beta, c, type, in, kCompute32F, kGemmDefault)
                                      : lib.gemm_batched(th.handle, kOpN, kOpN, in, im, ik, &alpha, b, type, in,
                                                         stride_b, a, type, ik, stride_a, &beta, c, type, in, stride_c,
                                                         static_cast<int>(batch), kCompute32F, kGemmDefault);
  if (s != 0) {
    static thread_local char message[64];
    std::snprintf(message, sizeof(message), "cublasGemmEx failed with status %d", s);
    return message;
  }
  return nullptr;
}

const char* cublaslt_gemm_bias(cudaDataType type, int64_t m, int64_t n, int64_t k, const void* a, const void* b,
                               const void* bias, void* c, cudaStream_t stream, const void* residual) {
  LtLibrary& lib = lt();
  if (!lib.ok) return "cuBLASLt is not loaded";
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) return "matrix dimension over cuBLAS's 32-bit limit";
  // The algorithm is chosen once per shape for 16-byte aligned operands.
  if ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(bias) |
       reinterpret_cast<uintptr_t>(c) | reinterpret_cast<uintptr_t>(residual)) %
      16) {
    return "operands not 16-byte aligned";
  }
  thread_local LtThread th;
  if (th.handle == nullptr) return "cublasLtCreate failed";
  LtPlan& p = th.plans[{static_cast<int>(type), bias != nullptr, m, n, k}];
  if (p.desc == nullptr) {
    // Column-major, as C^T[n, m] = B^T[n, k] A^T[k, m]: the bias runs along D's rows (n).
    const int op_n = kOpN;
    const uint32_t epilogue = bias ? kLtEpilogueBias : kLtEpilogueDefault;
    const uint64_t workspace = 0;
    LtPref pref = nullptr;
    bool ok = lib.desc_create(&p.desc, kCompute32F, kScale32F) == 0 &&
              lib.desc_set(p.desc, kLtDescTransA, &op_n, sizeof(op_n)) == 0 &&
              lib.desc_set(p.desc, kLtDescTransB, &op_n, sizeof(op_n)) == 0 &&
              lib.desc_set(p.desc, kLtDescEpilogue, &epilogue, sizeof(epilogue)) == 0 &&
              (!bias || lib.desc_set(p.desc, kLtDescBiasPointer, &bias, sizeof(bias)) == 0) &&
              lib.layout_create(&p.a, type, n, k, n) == 0 && lib.layout_create(&p.b, type, k, m, k) == 0 &&
              lib.layout_create(&p.d, type, n, m, n) == 0 && lib.pref_create(&pref) == 0 &&
              lib.pref_set(pref, kLtPrefMaxWorkspace, &workspace, sizeof(workspace)) == 0;
    LtHeuristic found{};
    int count = 0;
    ok = ok && lib.heuristic(th.handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &found, &count) == 0 && count > 0;
    if (pref) lib.pref_destroy(pref);
    p.algo = found.algo;
    p.ok = ok;
  }
  if (!p.ok) return "cuBLASLt has no algorithm for this shape and epilogue";
  if (bias && lib.desc_set(p.desc, kLtDescBiasPointer, &bias, sizeof(bias)) != 0)
    return "cuBLASLt bias pointer refused";
  const float one = 1.f, zero = 0.f;
  const cublasStatus_t s = lib.matmul(th.handle, p.desc, &one, b, p.a, a, p.b, residual ? &one : &zero,
                                      residual ? residual : c, p.d, c, p.d, &p.algo, nullptr, 0, stream);
  if (s != 0) {
    static thread_local char message[64];
    std::snprintf(message, sizeof(message), "cublasLtMatmul failed with status %d", s);
    return message;
  }
  return nullptr;
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
