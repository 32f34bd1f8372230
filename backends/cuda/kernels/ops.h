#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <executorch/backends/cuda/kernels/op_codes.h>

namespace executorch {
namespace backends {
namespace cuda {

// Shapes and element strides of broadcast operands, padded to the output's rank (stride 0 where
// the operand is broadcast).
struct Broadcast {
  int dim;
  int64_t out_sizes[kMaxOpDims];
  int64_t a_strides[kMaxOpDims];
  int64_t b_strides[kMaxOpDims];
  int64_t c_strides[kMaxOpDims];  // where: the condition
};

// cudaSuccess where this library holds code the current device can run (real code for its
// architecture, or PTX the driver can compile for it); cudaErrorNoKernelImageForDevice otherwise.
cudaError_t kernels_loadable();

// Kernels on `stream`; each returns the launch status. T is float, __half or __nv_bfloat16 (the
// three are instantiated); arithmetic is in float32 whatever T is.
// y[i] = op(x[i]) with the op's parameters p0, p1 (see Unary).
template <typename T>
cudaError_t launch_unary(Unary op, float p0, float p1, const T* x, T* y, int64_t n, cudaStream_t stream);
// out = a (op) alpha * b with broadcasting; b may be null (then `scalar` is used).
template <typename T>
cudaError_t launch_binary(Binary op, const T* a, const T* b, float scalar, float alpha, T* out, int64_t n,
                          const Broadcast& shape, cudaStream_t stream);
// A chain of elementwise ops run as one pass: each element's inputs are loaded into registers
// 0..inputs-1, step s writes register inputs + s from one or two registers (b < 0: `scalar`),
// and the last register is stored. Arithmetic stays in float32 between steps.
struct FusedStep {
  bool binary;
  Unary unary;
  Binary op;
  int8_t a, b;
  float p0, p1;         // unary parameters
  float scalar, alpha;  // binary: a (op) alpha * (b or scalar)
};
constexpr int kMaxFusedInputs = 4;
constexpr int kMaxFusedSteps = 12;
struct FusedProgram {
  int inputs, steps;
  FusedStep step[kMaxFusedSteps];
};
// out (contiguous, `dim` sizes, n elements) = program over inputs, input i read at strides[i].
template <typename T>
cudaError_t launch_fused(const FusedProgram& program, const T* const* inputs, const int64_t* const* strides, int dim,
                         const int64_t* sizes, T* out, int64_t n, cudaStream_t stream);
// out = cond ? a : b, each broadcast by `shape` (c_strides: the condition).
template <typename T>
cudaError_t launch_where(const bool* cond, const T* a, const T* b, T* out, int64_t n, const Broadcast& shape,
                         cudaStream_t stream);
// out[i] = x[i] (op) scalar, bool out.
template <typename T>
cudaError_t launch_compare_scalar(Compare op, const T* x, float scalar, bool* out, int64_t n, cudaStream_t stream);
// out[i] = x[i] converted as PyTorch converts: to bool, x != 0; floating to integer, truncated
// toward zero (saturating); integer or bool to floating, rounded to nearest.
cudaError_t launch_cast(const void* x, ElementType x_type, void* out, ElementType out_type, int64_t n,
                        cudaStream_t stream);
cudaError_t launch_logical_not(const bool* x, bool* out, int64_t n, cudaStream_t stream);
// Integer tensors (int32 or int64, `type`; bool for compare): out[i] = x[i] (op) scalar as
// PyTorch compares an integer tensor with a number (exactly for an integer scalar), bool out; and
// out = a (op) alpha * (b or scalar) with broadcasting, in 64-bit integer arithmetic (Binary::Div
// excluded: it is true division in PyTorch).
cudaError_t launch_compare_integer(Compare op, const void* x, ElementType type, bool integral_scalar, int64_t integer,
                                   double real, bool* out, int64_t n, cudaStream_t stream);
// out = a (op) b for two tensors of one element type `type`, each broadcast by `shape`, bool out.
cudaError_t launch_compare_tensors(Compare op, const void* a, const void* b, ElementType type, bool* out, int64_t n,
                                   const Broadcast& shape, cudaStream_t stream);
cudaError_t launch_binary_integer(Binary op, const void* a, const void* b, int64_t scalar, int64_t alpha, void* out,
                                  ElementType type, int64_t n, const Broadcast& shape, cudaStream_t stream);
// Running sums along the middle dimension of contiguous [outer, size, inner] `x`, converted to
// `out_type` as they accumulate (int64 for integer outputs, float32 for floating ones).
cudaError_t launch_cumsum(const void* x, ElementType x_type, void* out, ElementType out_type, int64_t outer,
                          int64_t size, int64_t inner, cudaStream_t stream);
// out[r] = the index of the largest of the `cols` contiguous elements of row r (the first such;
// NaN counts as largest), int64.
cudaError_t launch_row_argmax(const void* x, ElementType type, int64_t* out, int64_t rows, int64_t cols,
                              cudaStream_t stream);
// gather(self, dim, index): out (contiguous, index's shape) at position p reads self at p with
// coordinate `dim` replaced by index[p] (int64, or int32 where `int32_index`; index contiguous). An
// index outside [0, self_sizes[dim]) zeroes its element and sets *bad to 1.
struct GatherShape {
  int rank, dim;
  int64_t sizes[kMaxOpDims];         // index's (and out's)
  int64_t self_strides[kMaxOpDims];  // elements
  int64_t self_size;                 // self's extent along dim
};
cudaError_t launch_gather(const void* self, const void* index, bool int32_index, void* out, const GatherShape& g,
                          int64_t n, int element_size, int* bad, cudaStream_t stream);
// out = a (op) b on bool tensors, each broadcast by `shape`.
cudaError_t launch_logic(Logic op, const bool* a, const bool* b, bool* out, int64_t n, const Broadcast& shape,
                         cudaStream_t stream);
// Advanced indexing self[:, ..., :, i_0, ..., i_{count-1}] of a contiguous `self` by `count` integer
// index tensors after its whole leading dimensions, broadcast together to `index_dim` sizes: out
// (contiguous) is [leading sizes..., index sizes..., self's sizes after the indexed ones]. A
// negative index counts from the end; one outside the dimension zeroes its element and sets *bad.
struct IndexGather {
  int count, index_dim;
  int64_t block;         // elements of out per leading position (index elements x inner)
  int64_t outer_stride;  // elements of self per leading position
  int64_t index_sizes[kMaxOpDims];
  const void* index[kMaxOpDims];
  bool int32[kMaxOpDims];                         // int32 indices (else int64)
  int64_t index_strides[kMaxOpDims][kMaxOpDims];  // of index k, per broadcast dimension
  int64_t self_sizes[kMaxOpDims];                 // the indexed dimensions
  int64_t self_strides[kMaxOpDims];               // their element strides
  int64_t inner;                                  // elements after the indexed dimensions
};
cudaError_t launch_index(const void* self, void* out, const IndexGather& g, int64_t n, int element_size, int* bad,
                         cudaStream_t stream);
// The reverse: out[i_0, ..., i_{count-1}] = values (contiguous, of the indexed shape), in place in
// `out` (which holds self's contents already). An index outside its dimension writes nothing and
// sets *bad to 1.
cudaError_t launch_index_put(void* out, const void* values, const IndexGather& g, int64_t n, int element_size, int* bad,
                             cudaStream_t stream);
// y[r] = any of the `cols` contiguous elements of row r.
cudaError_t launch_row_any(const bool* x, bool* y, int64_t rows, int64_t cols, cudaStream_t stream);
// out[i, :] = weight[indices[i], :] for `n` indices (int64, or int32 where `int32_indices`) into
// `rows` rows of `width`; an index outside [0, rows) zeroes its row and sets *bad to 1.
template <typename T>
cudaError_t launch_embedding(const T* weight, const void* indices, bool int32_indices, T* out, int64_t n, int64_t rows,
                             int64_t width, int* bad, cudaStream_t stream);
// Softmax (or log-softmax) over the last dimension of rows x cols.
template <typename T>
cudaError_t launch_softmax(const T* x, T* y, int64_t rows, int64_t cols, bool log, cudaStream_t stream);
// Scaled dot-product attention over `batch` x `q_heads` heads: query [q_len, head_dim] per head,
// key [kv_len, head_dim] and value [kv_len, value_dim] per key/value head (query head h reads
// key/value head h / (q_heads / kv_heads)), out [q_len, value_dim] per head, contiguous; q, k
// and v at their strides.
// mask: None, bool (true: attend) or additive (of T), element (b, h, i, j) at
// b * mask_strides[0] + h * mask_strides[1] + i * mask_strides[2] + j * mask_strides[3].
// head_dim and value_dim are at most kMaxAttentionHeadDim; q_len at most kMaxAttentionQueries.
struct AttentionShape {
  int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, value_dim;
  float scale;
  bool causal;  // key j hidden from query i where j > i
  AttentionMask mask;
  int64_t mask_strides[4];
  // Element strides of batch, head and position in q, k and v (each row of head_dim or value_dim
  // elements contiguous): contiguous_attention_strides's, or those of a permuted view read in place.
  int64_t q_strides[3], k_strides[3], v_strides[3];
  // Element strides of batch, head and position in out (rows of value_dim contiguous): those of a
  // contiguous [batch, heads, len, value_dim], or of the permute after it written in place.
  int64_t out_strides[3];
};
// The strides of contiguous [batch, heads, len, dim] q, k, v and out.
void contiguous_attention_strides(AttentionShape* s);
// `partials`: attention_partial_floats(s) floats of device memory where that is above 0, else null;
// zeroed once before the first launch (each launch leaves the counters at its end at zero again).
// A decode step's work before its attention, done by the attention kernel (one query position): q,
// given before its rotary embedding, is rotated (executorch::rope with cos and sin) as it is read,
// and the step's new key (rotated likewise) and value rows go into the caches k and v at
// `position`, as the index_puts before attention would have put them: a position outside [0,
// kv_len) writes nothing and sets *bad. Each block reads the new rows where the caches would hold
// them, so none reads a cache row while it is written.
template <typename T>
struct AttentionStep {
  const T* k;  // [batch, kv_heads, 1, head_dim] at k_strides (batch, head): before its rotation
  const T* v;  // [batch, kv_heads, 1, value_dim] at v_strides
  int64_t k_strides[2], v_strides[2];
  const T* cos;  // head_dim elements each: the position's
  const T* sin;
  const void* position;  // one int64 (int32 where position_int32)
  bool position_int32;
  int* bad;
};
// Whether launch_attention takes an AttentionStep for shape s.
bool attention_takes_step(const AttentionShape& s);
template <typename T>
cudaError_t launch_attention(const T* q, const T* k, const T* v, const void* mask, T* out, const AttentionShape& s,
                             float* partials, cudaStream_t stream, const AttentionStep<T>* step = nullptr);
// Few query rows over many keys (a decoder's step over its cache) would leave most of the GPU idle
// with one block per head: the keys are then split, each block's partial softmax (its maximum, sum
// and weighted values) kept in float32 scratch of this many floats, and a second pass combines
// them. 0 where attention does not split.
int64_t attention_partial_floats(const AttentionShape& s);
// Layer norm over the last `cols` elements of each row, optional weight and bias.
template <typename T>
cudaError_t launch_layer_norm(const T* x, const T* weight, const T* bias, float eps, T* y, T* mean, T* rstd,
                              int64_t rows, int64_t cols, cudaStream_t stream);
// RMS norm over the last `cols` elements of each row (executorch::rms_norm): weight * round_T(x *
// rsqrt(mean(x^2) + eps)), the mean in float32.
template <typename T>
cudaError_t launch_rms_norm(const T* x, const T* weight, float eps, T* y, int64_t rows, int64_t cols,
                            cudaStream_t stream);
// Rotary embedding (executorch::rope) into a contiguous out of shape.out_sizes: x * cos +
// rotate_half(x) * sin, x at shape.a_strides, cos at b_strides, sin at c_strides; an even last size.
template <typename T>
cudaError_t launch_rope(const T* x, const T* cos, const T* sin, T* out, int64_t n, const Broadcast& shape,
                        cudaStream_t stream);
// ... its n elements written instead where index_put(out, g's indices, rope) puts them (launch_index_put:
// in place, an index out of range sets *bad and writes nothing).
template <typename T>
cudaError_t launch_rope_put(const T* x, const T* cos, const T* sin, T* out, int64_t n, const Broadcast& shape,
                            const IndexGather& g, int* bad, cudaStream_t stream);
// out[i] = in[sum_d idx_d(i) * in_strides[d]] for a contiguous out of shape out_sizes (any dtype
// of `element_size` bytes: 1, 2, 4 or 8).
cudaError_t launch_strided_copy(const void* in, void* out, int dim, const int64_t* out_sizes, const int64_t* in_strides,
                                int64_t n, int element_size, cudaStream_t stream);

// 2-D convolution support: col[i, (c*kh + ky)*kw + kx, oy*ow + ox] for a channel group of `images`
// images, image i at x + i * image_stride.
template <typename T>
cudaError_t launch_im2col(const T* x, T* col, int64_t images, int64_t image_stride, int64_t channels, int64_t h,
                          int64_t w, int64_t kh, int64_t kw, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                          int64_t pad_w, int64_t dil_h, int64_t dil_w, int64_t oh, int64_t ow, cudaStream_t stream);
// y[n, c, ...] = x * scale[c] + shift[c] (scale and shift in float32), `inner` elements per (n, c).
template <typename T>
cudaError_t launch_channel_affine(const T* x, const float* scale, const float* shift, T* y, int64_t n, int64_t c,
                                  int64_t inner, cudaStream_t stream);
// A 2-D convolution's sizes: batch n, channels c in and oc out, input h x w, kernel kh x kw,
// strides, paddings, dilations, output oh x ow.
struct ConvShape {
  int64_t n, c, h, w, oc, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  bool channels_last = false;  // x and y NHWC (the weight [oc, 1, kh, kw] either way)
};
// What a convolution does to each result before storing it: y = act(result + bias[channel] +
// residual), where the instructions after it asked for a residual add and an activation.
template <typename T>
struct Epilogue {
  const T* bias = nullptr;      // one per output channel, or none
  const T* residual = nullptr;  // of the output's shape, or none
  bool activate = false;
  Unary activation = Unary::Relu;
  float p0 = 0.f, p1 = 0.f;  // the activation's parameters (see Unary)
};
// Depthwise convolution (groups == c; oc a multiple of c), weight [oc, 1, kh, kw], then the
// epilogue, computed directly: no im2col, no GEMM.
template <typename T>
cudaError_t launch_depthwise_conv(const T* x, const T* weight, T* y, const ConvShape& s, const Epilogue<T>& e,
                                  cudaStream_t stream);
// Resampling of `planes` planes of h x w into oh x ow: bilinear (PyTorch's source coordinates, with or
// without align_corners) or nearest; scale_h/scale_w are source steps per output step.
struct Upsample {
  int64_t planes, h, w, oh, ow;
  float scale_h, scale_w;
  bool bilinear, align_corners;
};
template <typename T>
cudaError_t launch_upsample2d(const T* x, T* y, const Upsample& s, cudaStream_t stream);
// y = the epilogue of x (a GEMM's convolution result), planes p of `inner` elements, channel
// p % channels; y may be x.
template <typename T>
cudaError_t launch_epilogue(const T* x, T* y, int64_t planes, int64_t channels, int64_t inner, const Epilogue<T>& e,
                            cudaStream_t stream);
// Max (with flat indices) or average pooling over planes of h x w into oh x ow. channels_last: the
// channel count of NHWC tensors (planes = images x channels), or 0 for NCHW. adaptive: average
// pooling over adaptive_avg_pool2d's windows (kernel, stride and padding unused).
template <typename T>
cudaError_t launch_pool2d(const T* x, T* y, int64_t* indices, bool max, int64_t planes, int64_t h, int64_t w,
                          int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                          int64_t pw, int64_t dh, int64_t dw, bool count_include_pad, int64_t channels_last,
                          cudaStream_t stream, bool adaptive = false);
// Constant padding of a contiguous `dim`-D tensor: `before[d]` elements ahead of the input along
// each dimension (negative: cropped), `value` where out reads outside it.
template <typename T>
cudaError_t launch_constant_pad(const T* in, T* out, int dim, const int64_t* in_sizes, const int64_t* out_sizes,
                                const int64_t* before, float value, cudaStream_t stream);
// y[r] = mean (or sum) of the `cols` contiguous elements of row r.
template <typename T>
cudaError_t launch_row_reduce(const T* x, T* y, int64_t rows, int64_t cols, bool mean, cudaStream_t stream);
// One LSTM (lstm) or GRU time step over `rows` x `width` units from contiguous gate pre-activations
// [rows, G * width] (G = 4: input, forget, cell, output; G = 3: reset, update, new) and the state
// [rows, width] (the LSTM's cell, the GRU's hidden state). Writes `hidden`, and for an LSTM `cell`
// (docs/program_format.md states the arithmetic).
template <typename T>
cudaError_t launch_recurrent_cell(bool lstm, const T* input_gates, const T* hidden_gates, const T* state, T* hidden,
                                  T* cell, int64_t rows, int64_t width, cudaStream_t stream);
// Every time step of one LSTM (lstm) or GRU layer and direction (executorch::lstm_layer /
// gru_layer): per step the hidden gates h W^T + bias, rounded to T as a matrix product's output is,
// then the cell arithmetic of launch_recurrent_cell. Contiguous tensors.
template <typename T>
struct RecurrentLayer {
  const T* gates = nullptr;   // [steps, rows, G * units]: each step's input projection
  const T* weight = nullptr;  // [G * units, units]: W_hh
  const T* bias = nullptr;    // [G * units], or null
  const T* h0 = nullptr;      // [rows, units]
  const T* c0 = nullptr;      // [rows, units], an LSTM's
  T* y = nullptr;             // [steps, rows, units]: every step's hidden state, in time order
  T* h_n = nullptr;           // [rows, units]: the last step's
  T* c_n = nullptr;           // [rows, units], an LSTM's (also its running cell)
  int64_t steps = 0, rows = 0, units = 0;
  bool lstm = true, reverse = false;
};
// One kernel for all the steps where a step is small enough for one thread block (the steps then
// wait on each other for a block barrier, not a kernel launch), else one kernel per step.
template <typename T>
cudaError_t launch_recurrent_layer(const RecurrentLayer<T>& layer, cudaStream_t stream);
// y[n, c] = mean (or sum) over the hw pixels of image n of NHWC `x`, with `partial` holding
// pixel_reduce_partials(images, hw, c) floats of scratch.
int64_t pixel_reduce_partials(int64_t images, int64_t hw, int64_t c);
template <typename T>
cudaError_t launch_pixel_reduce(const T* x, T* y, float* partial, int64_t images, int64_t hw, int64_t c, bool mean,
                                cudaStream_t stream);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
