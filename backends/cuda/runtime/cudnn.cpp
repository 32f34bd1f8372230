#include <executorch/backends/cuda/runtime/cudnn.h>

#include <dlfcn.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <executorch/backends/cuda/shims/thread_handle.h>

namespace executorch {
namespace backends {
namespace cuda {
namespace {

// cuDNN's C ABI (cudnn_graph.h, cudnn_cnn.h), the parts used here. Descriptors are opaque pointers.
using Handle = void*;
using Desc = void*;
using Status = int;
constexpr int kNchw = 0, kNhwc = 1;   // CUDNN_TENSOR_NCHW, CUDNN_TENSOR_NHWC
constexpr int kCrossCorrelation = 1;  // CUDNN_CROSS_CORRELATION (what PyTorch computes)
constexpr int kDataFloat = 0, kDataHalf = 2, kDataBFloat16 = 9;
constexpr int kTensorOpMath = 1, kFmaMath = 3;
constexpr int kActivationRelu = 1;
constexpr int kNotPropagateNan = 0;
constexpr int kAlgoCount = 8;  // CUDNN_CONVOLUTION_FWD_ALGO_COUNT

struct AlgoPerf {  // cudnnConvolutionFwdAlgoPerf_t
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

struct Library {
  void* handle = nullptr;
  std::string reason;
  Status (*create)(Handle*) = nullptr;
  Status (*destroy)(Handle) = nullptr;
  Status (*set_stream)(Handle, cudaStream_t) = nullptr;
  const char* (*error_string)(Status) = nullptr;
  Status (*create_tensor)(Desc*) = nullptr;
  Status (*set_tensor)(Desc, int, int, int, int, int, int) = nullptr;
  Status (*set_tensor_nd)(Desc, int, int, int, const int*) = nullptr;
  Status (*destroy_tensor)(Desc) = nullptr;
  Status (*create_filter)(Desc*) = nullptr;
  Status (*set_filter)(Desc, int, int, int, int, int, int) = nullptr;
  Status (*set_filter_nd)(Desc, int, int, int, const int*) = nullptr;
  Status (*destroy_filter)(Desc) = nullptr;
  Status (*create_conv)(Desc*) = nullptr;
  Status (*set_conv)(Desc, int, int, int, int, int, int, int, int) = nullptr;
  Status (*set_conv_nd)(Desc, int, const int*, const int*, const int*, int, int) = nullptr;
  Status (*set_groups)(Desc, int) = nullptr;
  Status (*set_math)(Desc, int) = nullptr;
  Status (*destroy_conv)(Desc) = nullptr;
  Status (*create_act)(Desc*) = nullptr;
  Status (*set_act)(Desc, int, int, double) = nullptr;
  Status (*destroy_act)(Desc) = nullptr;
  Status (*heuristics)(Handle, Desc, Desc, Desc, Desc, int, int*, AlgoPerf*) = nullptr;
  Status (*workspace)(Handle, Desc, Desc, Desc, Desc, int, size_t*) = nullptr;
  Status (*forward)(Handle, const void*, Desc, const void*, Desc, const void*, Desc, int, void*, size_t, const void*,
                    Desc, void*) = nullptr;
  Status (*bias_act_forward)(Handle, const void*, Desc, const void*, Desc, const void*, Desc, int, void*, size_t,
                             const void*, Desc, const void*, Desc, const void*, Desc, Desc, void*) = nullptr;

  template <typename F>
  bool bind(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(handle, name));
    if (fn == nullptr && reason.empty()) reason = std::string("libcudnn.so.9 lacks ") + name;
    return fn != nullptr;
  }

  Library() {
    const char* mode = std::getenv("EXECUTORCH_CUDA_CONV");
    if (mode != nullptr && std::strcmp(mode, "builtin") == 0) {
      reason = "EXECUTORCH_CUDA_CONV=builtin";
      return;
    }
    // Found through the backend's runpath ($ORIGIN/../../nvidia/cudnn/lib) or the usual search.
    handle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      reason = std::string("cannot load libcudnn.so.9 (pip install nvidia-cudnn-cu13): ") + (e ? e : "not found");
      return;
    }
    const bool ok =
        bind(create, "cudnnCreate") & bind(destroy, "cudnnDestroy") & bind(set_stream, "cudnnSetStream") &
        bind(error_string, "cudnnGetErrorString") & bind(create_tensor, "cudnnCreateTensorDescriptor") &
        bind(set_tensor, "cudnnSetTensor4dDescriptor") & bind(set_tensor_nd, "cudnnSetTensorNdDescriptorEx") &
        bind(destroy_tensor, "cudnnDestroyTensorDescriptor") & bind(create_filter, "cudnnCreateFilterDescriptor") &
        bind(set_filter, "cudnnSetFilter4dDescriptor") & bind(set_filter_nd, "cudnnSetFilterNdDescriptor") &
        bind(destroy_filter, "cudnnDestroyFilterDescriptor") & bind(create_conv, "cudnnCreateConvolutionDescriptor") &
        bind(set_conv, "cudnnSetConvolution2dDescriptor") & bind(set_conv_nd, "cudnnSetConvolutionNdDescriptor") &
        bind(set_groups, "cudnnSetConvolutionGroupCount") & bind(set_math, "cudnnSetConvolutionMathType") &
        bind(destroy_conv, "cudnnDestroyConvolutionDescriptor") & bind(create_act, "cudnnCreateActivationDescriptor") &
        bind(set_act, "cudnnSetActivationDescriptor") & bind(destroy_act, "cudnnDestroyActivationDescriptor") &
        bind(heuristics, "cudnnGetConvolutionForwardAlgorithm_v7") &
        bind(workspace, "cudnnGetConvolutionForwardWorkspaceSize") & bind(forward, "cudnnConvolutionForward") &
        bind(bias_act_forward, "cudnnConvolutionBiasActivationForward");
    if (!ok) {
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

Handle thread_handle() {
  thread_local ThreadHandle<Library, Handle, Status> th(library());
  return th.status == 0 ? th.handle : nullptr;
}

// The message for a failed call: "<what>: <cuDNN's words>" in thread-local storage.
const char* failure(const char* what, Status s) {
  static thread_local char message[160];
  std::snprintf(message, sizeof(message), "%s: %s", what, library().error_string(s));
  return message;
}

int data_type(cudaDataType type) {
  return type == CUDA_R_16F ? kDataHalf : type == CUDA_R_16BF ? kDataBFloat16 : kDataFloat;
}

}  // namespace

bool cudnn_available() { return library().handle != nullptr; }

const char* cudnn_unavailable_reason() { return library().reason.c_str(); }

CudnnConv::~CudnnConv() {
  if (!cudnn_available()) return;
  Library& lib = library();
  for (void* d : {x_desc_, y_desc_, bias_desc_}) {
    if (d) lib.destroy_tensor(d);
  }
  if (w_desc_) lib.destroy_filter(w_desc_);
  if (conv_desc_) lib.destroy_conv(conv_desc_);
  if (act_desc_) lib.destroy_act(act_desc_);
}

const char* CudnnConv::plan(const ConvGeometry& g, cudaDataType type, bool tf32, bool relu_bias, bool channels_last,
                            size_t max_workspace) {
  if (!cudnn_available()) return cudnn_unavailable_reason();
  // Tensor-op math on float32 is TF32; FMA math keeps it IEEE (as torch.backends.cudnn.allow_tf32).
  const int math = type == CUDA_R_32F && !tf32 ? kFmaMath : kTensorOpMath;
  if (g.volumetric && channels_last) return "3-D convolution is planned NCDHW";
  for (int64_t v : {g.n,  g.c,  g.h,      g.w,  g.k,  g.kh, g.kw, g.sh, g.sw, g.ph, g.pw,
                    g.dh, g.dw, g.groups, g.oh, g.ow, g.d,  g.kd, g.sd, g.pd, g.dd, g.od}) {
    if (v > INT_MAX) return "convolution dimension over cuDNN's 32-bit limit";
  }
  Library& lib = library();
  const Handle h = thread_handle();
  if (h == nullptr) return "cudnnCreate failed (out of device memory?)";
  const int dt = data_type(type), format = channels_last ? kNhwc : kNchw;
  auto i = [](int64_t v) { return static_cast<int>(v); };
  Status s = 0;
  relu_bias_ = relu_bias;
  if ((s = lib.create_tensor(&x_desc_)) || (s = lib.create_tensor(&y_desc_)) || (s = lib.create_filter(&w_desc_)) ||
      (s = lib.create_conv(&conv_desc_)) || (relu_bias && (s = lib.create_tensor(&bias_desc_))) ||
      (relu_bias && (s = lib.create_act(&act_desc_)))) {
    return failure("cuDNN descriptors", s);
  }
  if (g.volumetric) {
    const int x[5] = {i(g.n), i(g.c), i(g.d), i(g.h), i(g.w)}, y[5] = {i(g.n), i(g.k), i(g.od), i(g.oh), i(g.ow)};
    const int w[5] = {i(g.k), i(g.c / g.groups), i(g.kd), i(g.kh), i(g.kw)};
    const int pad[3] = {i(g.pd), i(g.ph), i(g.pw)}, stride[3] = {i(g.sd), i(g.sh), i(g.sw)};
    const int dilation[3] = {i(g.dd), i(g.dh), i(g.dw)}, bias[5] = {1, i(g.k), 1, 1, 1};
    if ((s = lib.set_tensor_nd(x_desc_, kNchw, dt, 5, x)) || (s = lib.set_tensor_nd(y_desc_, kNchw, dt, 5, y)) ||
        (s = lib.set_filter_nd(w_desc_, dt, kNchw, 5, w)) ||
        (s = lib.set_conv_nd(conv_desc_, 3, pad, stride, dilation, kCrossCorrelation, kDataFloat)) ||
        (s = lib.set_groups(conv_desc_, i(g.groups))) || (s = lib.set_math(conv_desc_, math)) ||
        (relu_bias && (s = lib.set_tensor_nd(bias_desc_, kNchw, dt, 5, bias))) ||
        (relu_bias && (s = lib.set_act(act_desc_, kActivationRelu, kNotPropagateNan, 0.0)))) {
      return failure("cuDNN 3-D convolution", s);
    }
  } else if ((s = lib.set_tensor(x_desc_, format, dt, i(g.n), i(g.c), i(g.h), i(g.w))) ||
             (s = lib.set_tensor(y_desc_, format, dt, i(g.n), i(g.k), i(g.oh), i(g.ow))) ||
             (s = lib.set_filter(w_desc_, dt, format, i(g.k), i(g.c / g.groups), i(g.kh), i(g.kw))) ||
             (s = lib.set_conv(conv_desc_, i(g.ph), i(g.pw), i(g.sh), i(g.sw), i(g.dh), i(g.dw), kCrossCorrelation,
                               kDataFloat)) ||
             (s = lib.set_groups(conv_desc_, i(g.groups))) || (s = lib.set_math(conv_desc_, math)) ||
             (relu_bias && (s = lib.set_tensor(bias_desc_, kNchw, dt, 1, i(g.k), 1, 1))) ||
             (relu_bias && (s = lib.set_act(act_desc_, kActivationRelu, kNotPropagateNan, 0.0)))) {
    return failure("cuDNN convolution", s);
  }
  AlgoPerf perf[kAlgoCount];
  int returned = 0;
  if ((s = lib.heuristics(h, x_desc_, w_desc_, conv_desc_, y_desc_, kAlgoCount, &returned, perf))) {
    return failure("cudnnGetConvolutionForwardAlgorithm_v7", s);
  }
  // The best ranked that succeeds within the workspace bound.
  for (int r = 0; r < returned; ++r) {
    size_t bytes = 0;
    if (perf[r].status != 0 || lib.workspace(h, x_desc_, w_desc_, conv_desc_, y_desc_, perf[r].algo, &bytes) != 0 ||
        bytes > max_workspace) {
      continue;
    }
    algo_ = perf[r].algo;
    workspace_ = bytes;
    return nullptr;
  }
  return "cuDNN has no algorithm for this convolution within the workspace bound";
}

const char* CudnnConv::run(const void* x, const void* w, const void* bias, const void* z, void* y, void* workspace,
                           cudaStream_t stream) const {
  Library& lib = library();
  const Handle h = thread_handle();
  if (h == nullptr) return "cudnnCreate failed (out of device memory?)";
  Status s = lib.set_stream(h, stream);
  if (s) return failure("cudnnSetStream", s);
  const float one = 1.f, zero = 0.f;
  if (relu_bias_) {
    // y = relu(conv + alpha2 * z + bias); without a residual z is y itself, weighted 0.
    const float alpha2 = z ? 1.f : 0.f;
    s = lib.bias_act_forward(h, &one, x_desc_, x, w_desc_, w, conv_desc_, algo_, workspace, workspace_, &alpha2,
                             y_desc_, z ? z : y, bias_desc_, bias, act_desc_, y_desc_, y);
    return s ? failure("cudnnConvolutionBiasActivationForward", s) : nullptr;
  }
  s = lib.forward(h, &one, x_desc_, x, w_desc_, w, conv_desc_, algo_, workspace, workspace_, &zero, y_desc_, y);
  return s ? failure("cudnnConvolutionForward", s) : nullptr;
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
