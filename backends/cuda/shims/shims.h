#pragma once

// The compatibility layer: AOTInductor's C ABI (`aoti_torch_*`) over executorch tensors, so code
// generated for AOTInductor's CUDA runtime can run on this one. Every function returns
// AOTI_TORCH_SUCCESS (0) or AOTI_TORCH_FAILURE (1); failures leave a message in
// executorch::runtime::last_error_message(). Exported only by libaoti_cuda_shims.so.
#include <stdbool.h>
#include <stdint.h>

#if defined(__GNUC__)
#define AOTI_SHIM_EXPORT __attribute__((visibility("default")))
#else
#define AOTI_SHIM_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t AOTITorchError;
#define AOTI_TORCH_SUCCESS 0
#define AOTI_TORCH_FAILURE 1

struct AtenTensorOpaque;
typedef struct AtenTensorOpaque* AtenTensorHandle;
struct CUDAGuardOpaque;
typedef struct CUDAGuardOpaque* CUDAGuardHandle;
struct CUDAStreamGuardOpaque;
typedef struct CUDAStreamGuardOpaque* CUDAStreamGuardHandle;

// Constants (PyTorch's codes).
AOTI_SHIM_EXPORT int32_t aoti_torch_device_type_cpu(void);
AOTI_SHIM_EXPORT int32_t aoti_torch_device_type_cuda(void);
AOTI_SHIM_EXPORT int32_t aoti_torch_dtype_float32(void);
AOTI_SHIM_EXPORT int32_t aoti_torch_dtype_float16(void);
AOTI_SHIM_EXPORT int32_t aoti_torch_dtype_bfloat16(void);
AOTI_SHIM_EXPORT int32_t aoti_torch_dtype_int64(void);
AOTI_SHIM_EXPORT int32_t aoti_torch_dtype_int32(void);
AOTI_SHIM_EXPORT int32_t aoti_torch_dtype_int8(void);
AOTI_SHIM_EXPORT int32_t aoti_torch_dtype_uint8(void);
AOTI_SHIM_EXPORT int32_t aoti_torch_dtype_bool(void);
AOTI_SHIM_EXPORT int32_t aoti_torch_layout_strided(void);

// Tensors.
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_create_tensor_from_blob_v2(void* data, int64_t ndim, const int64_t* sizes,
                                                                      const int64_t* strides, int64_t storage_offset,
                                                                      int32_t dtype, int32_t device_type,
                                                                      int32_t device_index, AtenTensorHandle* ret,
                                                                      int32_t layout, const uint8_t* opaque_metadata,
                                                                      int64_t opaque_metadata_size);
// The same, layout strided (the ABI's first form).
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_create_tensor_from_blob(void* data, int64_t ndim, const int64_t* sizes,
                                                                   const int64_t* strides, int64_t storage_offset,
                                                                   int32_t dtype, int32_t device_type,
                                                                   int32_t device_index, AtenTensorHandle* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t* sizes, const int64_t* strides,
                                                         int32_t dtype, int32_t device_type, int32_t device_index,
                                                         AtenTensorHandle* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle tensor, void** ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_sizes(AtenTensorHandle tensor, int64_t** ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_strides(AtenTensorHandle tensor, int64_t** ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_dtype(AtenTensorHandle tensor, int32_t* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_dim(AtenTensorHandle tensor, int64_t* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_numel(AtenTensorHandle tensor, int64_t* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_storage_offset(AtenTensorHandle tensor, int64_t* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_device_type(AtenTensorHandle tensor, int32_t* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_device_index(AtenTensorHandle tensor, int32_t* ret);
// Bytes of the memory the tensor views: allocated, or for a caller's blob those its first view reaches.
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_storage_size(AtenTensorHandle tensor, int64_t* ret);
// Another handle on the same memory, sizes and strides (deleted on its own).
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_new_tensor_handle(AtenTensorHandle orig, AtenTensorHandle* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_copy_(AtenTensorHandle self, AtenTensorHandle src, int32_t non_blocking);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_clone(AtenTensorHandle self, AtenTensorHandle* ret);
// A copy with the same strides (every element they reach copied, gaps included).
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_clone_preserve_strides(AtenTensorHandle self, AtenTensorHandle* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch__reinterpret_tensor(AtenTensorHandle self, int64_t ndim,
                                                               const int64_t* sizes, const int64_t* strides,
                                                               int64_t storage_offset, AtenTensorHandle* ret);

// Inference only: grad mode is always off, and switching it does nothing.
AOTI_SHIM_EXPORT bool aoti_torch_grad_mode_is_enabled(void);
AOTI_SHIM_EXPORT void aoti_torch_grad_mode_set_enabled(bool enabled);
// Generated code's warnings, to the runtime's log.
AOTI_SHIM_EXPORT void aoti_torch_warn(const char* func, const char* file, uint32_t line, const char* msg);

// Device and stream.
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_create_cuda_guard(int32_t device_index, CUDAGuardHandle* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_delete_cuda_guard(CUDAGuardHandle guard);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_cuda_guard_set_index(CUDAGuardHandle guard, int32_t device_index);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_create_cuda_stream_guard(void* stream, int32_t device_index,
                                                                    CUDAStreamGuardHandle* ret);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_delete_cuda_stream_guard(CUDAStreamGuardHandle guard);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_get_current_cuda_stream(int32_t device_index, void** ret_stream);

// Kernels (float32, float16, bfloat16; contiguous; CUDA): out = self @ mat2; out = beta * self + alpha * (mat1 @ mat2).
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_cuda_mm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                       AtenTensorHandle mat2);
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_cuda_addmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                          AtenTensorHandle mat1, AtenTensorHandle mat2, double beta,
                                                          double alpha);
// out[i] = self[i] @ mat2[i] for 3-D tensors whose matrices are row-major (the batch strides are
// free: 0 multiplies every matrix of the other operand by one matrix); float32, float16, bfloat16.
AOTI_SHIM_EXPORT AOTITorchError aoti_torch_cuda_bmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                        AtenTensorHandle mat2);

// Beyond AOTInductor's ABI, for the CUDA delegate's fused linear layers: out = bias + mat1 @ mat2 +
// residual, 2-D and contiguous, bias of one row (n elements) or null; residual may be out itself. One
// cuBLASLt call where it takes the shape, else the product, the residual and the bias in turn.
AOTI_SHIM_EXPORT AOTITorchError executorch_cuda_linear_residual_out(AtenTensorHandle out, AtenTensorHandle bias,
                                                                    AtenTensorHandle mat1, AtenTensorHandle mat2,
                                                                    AtenTensorHandle residual);

#ifdef __cplusplus
}
#endif
