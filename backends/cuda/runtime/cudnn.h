#pragma once

// cuDNN's convolutions, loaded on first use from the environment (libcudnn.so.9: pip's
// nvidia-cudnn-cu13 next to executorch in site-packages, LD_LIBRARY_PATH, or the copy PyTorch already
// loaded), as cuBLAS is; it is not bundled. Only the entry points used here are declared, with
// cuDNN's C ABI. Where it is absent, CudaBackend keeps its built-in im2col + GEMM convolution.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>
#include <library_types.h>

namespace executorch {
namespace backends {
namespace cuda {

// Whether cuDNN could be loaded (loads it on the first call). EXECUTORCH_CUDA_CONV=builtin makes
// this false.
bool cudnn_available();

// Why cudnn_available() is false: the loader's message.
const char* cudnn_unavailable_reason();

// The geometry of a 2-D convolution over NCHW tensors (weights OIHW); with `volumetric`, of a
// 3-D one over NCDHW tensors (weights OIDHW), its depth in the last six fields.
struct ConvGeometry {
  int64_t n, c, h, w;  // input
  int64_t k, kh, kw;   // output channels, kernel
  int64_t sh, sw, ph, pw, dh, dw, groups;
  int64_t oh, ow;  // output
  bool volumetric = false;
  int64_t d = 1, kd = 1, sd = 1, pd = 0, dd = 1, od = 1;  // input depth, kernel, stride, padding, dilation, output
};

// One convolution planned with cuDNN: its descriptors and the algorithm chosen for them. With
// `relu_bias`, run() computes y = relu(conv(x, w) + bias + z) in one kernel (z may be y's own bytes,
// or none); otherwise y = conv(x, w) and the caller applies any epilogue. `channels_last`: x, y and z
// are NHWC and w is OHWI (what tensor cores read without transposing); otherwise NCHW and OIHW.
// A volumetric convolution is planned NCDHW.
class CudnnConv {
 public:
  CudnnConv() = default;
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;
  ~CudnnConv();

  // Chooses the algorithm by cuDNN's heuristics, using at most `max_workspace` bytes. `type` is
  // CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF; float32 is computed in float32 unless `tf32` lets cuDNN
  // round its inputs to TF32 for tensor cores. Returns a message on failure.
  const char* plan(const ConvGeometry& g, cudaDataType type, bool tf32, bool relu_bias, bool channels_last,
                   size_t max_workspace);
  size_t workspace_bytes() const { return workspace_; }
  const char* run(const void* x, const void* w, const void* bias, const void* z, void* y, void* workspace,
                  cudaStream_t stream) const;

 private:
  void* x_desc_ = nullptr;
  void* y_desc_ = nullptr;
  void* bias_desc_ = nullptr;
  void* w_desc_ = nullptr;
  void* conv_desc_ = nullptr;
  void* act_desc_ = nullptr;
  int algo_ = 0;
  size_t workspace_ = 0;
  bool relu_bias_ = false;
};

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
