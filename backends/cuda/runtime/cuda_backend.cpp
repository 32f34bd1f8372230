#include <executorch/backends/cuda/runtime/cuda_backend.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <cuda_runtime_api.h>

#include <executorch/backends/cuda/kernels/gemv.h>
#include <executorch/backends/cuda/kernels/int8_linear.h>
#include <executorch/backends/cuda/kernels/ops.h>
#include <executorch/backends/cuda/kernels/weight_linear.h>
#include <executorch/backends/cuda/runtime/aoti_library.h>
#include <executorch/backends/cuda/runtime/cudnn.h>
#include <executorch/backends/cuda/runtime/payload.h>
#include <executorch/backends/cuda/shims/shims.h>
#include <executorch/extension/cuda/cuda_stream.h>
#include <executorch/extension/cuda/owned.h>
#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/data_loader.h>
#include <executorch/runtime/executor/memory_limit.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

namespace executorch {
namespace backends {
namespace cuda {
namespace {
namespace ecuda = extension::cuda;

using DeviceBuffer = ecuda::DeviceMemory;
using ecuda::out;

// A checked instruction (payload.h) and the device resources it needs.
struct Op {
  OpPlan plan;
  Span<EValue*> args;
  std::string name;
  std::vector<ShimTensor> shim;  // addmm: bias, mat1, mat2, out; (b)mm: mat1, mat2, out; conv: see prepare_conv
  // conv: im2col buffer; batch norm: scale and shift; int8 linear: quantized rows, their scales;
  // NHWC mean: partial sums
  std::vector<DeviceBuffer> scratch;
  int64_t conv_chunk = 0;    // conv: images per batched GEMM
  bool conv_direct = false;  // conv: 1x1, stride 1, no padding: the GEMM reads the input itself
  // conv through cuDNN (where it loads): the plan, whether it computes the whole epilogue (bias,
  // residual, relu) itself, and the delegate's workspace it runs in.
  std::unique_ptr<CudnnConv> cudnn;
  bool cudnn_fused = false;
  void* workspace = nullptr;
  // Channels-last (NHWC) memory, chosen at init by choose_layouts: the layout of a conv's output,
  // a pool's input, a unary or binary op's output. A conv whose input lies in the other layout
  // converts it into layout_x first; an NHWC conv reads its weight as OHWI, from layout_w.
  bool nhwc = false;
  bool x_nhwc = false;
  DeviceBuffer layout_x;
  DeviceBuffer layout_w;
  // conv: the instructions after it that it computes as its epilogue (fuse_epilogues): a residual
  // added, then an activation, written to `result` (its own output when nothing is fused). addmm:
  // the residual its cuBLASLt call adds, written to `result` (fuse_linear_residuals).
  EValue* residual = nullptr;
  const Op* activation = nullptr;
  EValue* result = nullptr;
  // attention: q, k and v read in place from the tensors the permutes before it would have copied
  // (read_permutes_in_place): each one's source (null: the argument itself) and its strides of
  // batch, head and position; the output moved to `scratch` where it lay on such a source.
  const EValue* attention_src[3] = {};
  int64_t attention_strides[3][3] = {};
  // ... and its output written in place of the permute after it (write_permutes_in_place): to
  // `result`, at these strides of batch, head and position.
  int64_t attention_out_strides[3] = {};
  // ... and the float32 scratch of its split-key pass (attention_partial_floats), where it splits.
  DeviceBuffer attention_partials;
  // ... and a decode step's work before it, which it does (fuse_attention_steps): q before its rope,
  // the rope's cos and sin, the new key row before its rope, the new value row and their position.
  struct Step {
    EValue *q, *cos, *sin, *k, *v, *position;
  };
  std::unique_ptr<Step> step;
  // The elementwise ops from this one on that run as one pass (fuse_elementwise); the others are
  // skipped.
  struct Fused {
    FusedProgram program{};
    EValue* inputs[kMaxFusedInputs] = {};
    int64_t strides[kMaxFusedInputs][kMaxOpDims] = {};
    EValue* out = nullptr;
    std::string label;
  };
  std::unique_ptr<Fused> fused;
  // rope: the arguments of the index_put whose values it is, which it writes itself (fuse_rope_puts).
  Span<EValue*> put;
  // mm, addmm of a few rows: through the built-in GEMV rather than cuBLAS (choose_gemvs timed both),
  // its constant weight laid out [n, k] for it. fuse_gemv_neighbours folds in the RMS norm before it
  // (x computed from prologue_a and prologue_b) and silu(gate) * up after it (written to epilogue_out).
  bool gemv = false;
  // int4 weight-only layer on the GEMV: its weights and scales laid out for tensor cores
  // (tile_int4_weights).
  bool int4_tiled = false;
  GemvPrologue prologue = GemvPrologue::None;
  EValue* prologue_a = nullptr;
  EValue* prologue_b = nullptr;
  float prologue_eps = 0.f;
  GemvEpilogue epilogue = GemvEpilogue::None;
  EValue* epilogue_out = nullptr;
  // Nothing to run: the convolution before it computes it (its epilogue), or a copy onto itself
  // (the exporter planned a view's output on its input's bytes).
  bool skipped = false;
};

// A shim view of `dim` sizes and strides over device memory `data` of element type `type`.
Error shim_blob(void* data, runtime::ScalarType type, int dim, const int64_t* sizes, const int64_t* strides,
                ShimTensor* shim) {
  if (aoti_torch_create_tensor_from_blob_v2(data, dim, sizes, strides, 0, static_cast<int32_t>(type),
                                            aoti_torch_device_type_cuda(), 0, out(*shim), aoti_torch_layout_strided(),
                                            nullptr, 0) != AOTI_TORCH_SUCCESS) {
    return ET_ERROR_CONTEXT(Error::Internal, "%s", kCudaBackendName);
  }
  return Error::Ok;
}

// A shim view of a device tensor of the sub-program (its memory never moves after init), of `dim`
// sizes and strides (its own, or another view of its bytes).
Error shim_view(EValue* v, ShimTensor* shim, int dim = -1, const int64_t* sizes = nullptr,
                const int64_t* strides = nullptr) {
  ET_CHECK_OR_RETURN(v->is_tensor(), Error::InvalidArgument, "%s: matrix argument is not a tensor", kCudaBackendName);
  const Tensor& t = v->to_tensor();
  if (sizes == nullptr) dim = t.dim(), sizes = t.sizes(), strides = t.strides();
  return shim_blob(t.mutable_data_ptr(), t.scalar_type(), dim, sizes, strides, shim);
}

// A weight-only quantized linear layer the GEMV does not take (more rows than kGemvMaxRows, or x
// too large for its shared memory): its weights are dequantized into the delegate's shared
// workspace, then one matrix product (tensor cores) reads them. Shims: x as [rows, k], the weights
// as [k, n] (dequantized transposed), y as [rows, n], the bias.
bool dequantizes(const Op& op) {
  const bool int4 = op.plan.kind == OpKind::Int4Linear;
  if (!int4 && op.plan.kind != OpKind::Int8WeightLinear) return false;
  const int64_t* v = op.plan.ints;  // rows, out features, in features, group
  return !gemv_supported(v[0], v[1], v[2], static_cast<int>(runtime::element_size(op.plan.dtype)),
                         int4 ? GemvWeights::Int4 : GemvWeights::Int8, v[3], GemvPrologue::None, GemvEpilogue::None);
}
size_t dequantized_bytes(const Op& op) {
  return static_cast<size_t>(op.plan.ints[1] * op.plan.ints[2]) * runtime::element_size(op.plan.dtype);
}
Error prepare_dequantized_product(Op& op, void* workspace) {
  const int64_t rows = op.plan.ints[0], n = op.plan.ints[1], k = op.plan.ints[2];
  const int64_t x_sizes[] = {rows, k}, x_strides[] = {k, 1}, w_sizes[] = {k, n}, w_strides[] = {n, 1},
                y_sizes[] = {rows, n}, y_strides[] = {n, 1};
  const size_t bias = op.plan.kind == OpKind::Int4Linear ? 4 : 3;
  op.shim.clear();
  op.shim.resize(op.args[bias]->is_tensor() ? 4 : 3);
  ET_TRY(shim_view(op.args[0], &op.shim[0], 2, x_sizes, x_strides));
  ET_TRY(shim_blob(workspace, op.plan.dtype, 2, w_sizes, w_strides, &op.shim[1]));
  ET_TRY(shim_view(op.args[bias + 1], &op.shim[2], 2, y_sizes, y_strides));
  if (op.shim.size() == 4) ET_TRY(shim_view(op.args[bias], &op.shim[3]));
  return Error::Ok;
}

// A captured sequence of the delegate's kernels, replayed with one launch (the executable graph
// goes first).
struct Graph {
  ecuda::Graph graph;
  ecuda::GraphExec exec;
  void reset() { exec.reset(), graph.reset(); }
};

// One delegate call site: the sub-program (the payload is a .pte), its device memory and its ops.
struct Delegate {
  std::unique_ptr<runtime::Program> program;
  std::vector<DeviceBuffer> buffers;  // planned memory, on the device
  std::vector<Span<uint8_t>> spans;
  std::unique_ptr<runtime::MemoryManager> memory;
  std::unique_ptr<runtime::Method> method;
  std::vector<DeviceBuffer> constants;  // uploaded once, at init
  std::vector<Op> ops;
  // Shared by the ops that need one (they run one after another): cuDNN's workspace, and the
  // dequantized weights of a quantized linear layer's matrix product.
  DeviceBuffer conv_workspace;
  size_t conv_workspace_bytes = 0;
  ecuda::Stream own_stream;
  // A caller on the legacy default stream (torch's unless it set one), where CUDA graphs cannot be
  // captured: the work goes on own_stream, ordered after the caller's by `joined_in` and before
  // the caller's next work by `joined_out`.
  ecuda::Event joined_in, joined_out;
  // Every tensor's address is fixed at init, so after one eager run (which checks every op) the
  // kernels are captured once into a CUDA graph and replayed: one launch instead of one per op.
  Graph graph;
  uint64_t runs = 0;
  // Set by a kernel that met an index out of range (embedding, gather); read back after each execute.
  DeviceBuffer index_error;
  ecuda::PinnedMemory index_error_host;  // an int
  bool checks_indices = false;
  // A deferred check (ecuda::deferred_index_checks): index_error_host is filled when `index_checked`
  // completes, and read by the next execute.
  ecuda::Event index_checked;
  bool check_pending = false;
  // EXECUTORCH_PROFILE: device time per operator (ms, calls), printed when the delegate goes.
  std::map<std::string, std::pair<double, long>> profile;
  // An AOTInductor payload's model (no ops): its container reads the method's tensors in place.
  std::unique_ptr<AotiModel> aoti;
  ~Delegate() {
    if (!profile.empty()) {
      std::vector<std::pair<double, std::string>> rows;
      for (auto& [op, e] : profile) rows.emplace_back(e.first, op + " x" + std::to_string(e.second));
      std::sort(rows.rbegin(), rows.rend());
      std::fprintf(stderr, "%s profile (device time after the first call, no CUDA graph):\n", kCudaBackendName);
      for (auto& [ms, op] : rows) std::fprintf(stderr, "  %10.3f ms  %s\n", ms, op.c_str());
    }
    graph.reset();
    aoti.reset();  // before the method whose tensors it reads
    method.reset();
  }
};

// A buffer of program state in device memory: created by the first delegate call that updates it,
// kept by the method's ProgramState, and updated in place by every delegate call sharing that state.
class DeviceStateCopy final : public runtime::ProgramState::DeviceCopy {
 public:
  static runtime::Result<std::unique_ptr<DeviceStateCopy>> make(size_t bytes) {
    auto copy = std::unique_ptr<DeviceStateCopy>(new (std::nothrow) DeviceStateCopy(bytes));
    ET_CHECK_OR_RETURN(copy != nullptr, Error::MemoryAllocationFailed, "%s: out of host memory", kCudaBackendName);
    ET_TRY(ecuda::to_error(cudaMalloc(out(copy->memory_), bytes ? bytes : 1), "CudaBackend: program state"));
    return copy;
  }
  Span<uint8_t> memory() override { return {static_cast<uint8_t*>(memory_.get()), bytes_}; }
  // Delegates run on non-blocking streams, which the synchronous copies below do not wait for.
  Error upload(Span<const uint8_t> host) override {
    ET_TRY(ecuda::to_error(cudaDeviceSynchronize(), "CudaBackend: program state"));
    return ecuda::to_error(cudaMemcpy(memory_.get(), host.data(), bytes_, cudaMemcpyHostToDevice),
                           "CudaBackend: program state upload");
  }
  Error download(Span<uint8_t> host) override {
    ET_TRY(ecuda::to_error(cudaDeviceSynchronize(), "CudaBackend: program state"));
    return ecuda::to_error(cudaMemcpy(host.data(), memory_.get(), bytes_, cudaMemcpyDeviceToHost),
                           "CudaBackend: program state download");
  }
  Error zero(Span<const uint8_t>) override {
    ET_TRY(ecuda::to_error(cudaDeviceSynchronize(), "CudaBackend: program state"));
    ET_TRY(ecuda::to_error(cudaMemset(memory_.get(), 0, bytes_), "CudaBackend: program state reset"));
    return ecuda::to_error(cudaDeviceSynchronize(), "CudaBackend: program state reset");  // before the next call
  }

 private:
  explicit DeviceStateCopy(size_t bytes) : bytes_(bytes) {}
  size_t bytes_;
  DeviceBuffer memory_;
};

// The state the payload's method runs on: for each buffer the payload declares, the device copy of
// the method's buffer of that name (made here where the method's state has none yet).
runtime::Result<std::shared_ptr<runtime::ProgramState>> device_state(const runtime::Program& payload,
                                                                     runtime::ProgramState* state) {
  ET_CHECK_OR_RETURN(state != nullptr, Error::InvalidProgram,
                     "%s payload updates program state, but its method has none", kCudaBackendName);
  std::vector<Span<uint8_t>> memory;
  for (size_t i = 0; i < payload.num_mutable_buffers(); ++i) {
    const char* name = payload.mutable_buffer_name(i);
    auto index = state->find(name);
    ET_CHECK_OR_RETURN(index.ok(), Error::InvalidProgram,
                       "%s payload updates buffer '%s', which the program does not declare", kCudaBackendName, name);
    const size_t bytes = state->buffer(*index).size();
    ET_CHECK_OR_RETURN(bytes == payload.mutable_buffer_size(i), Error::InvalidProgram,
                       "%s payload: buffer '%s' has %llu bytes, the program's %zu", kCudaBackendName, name,
                       static_cast<unsigned long long>(payload.mutable_buffer_size(i)), bytes);
    if (state->device_copy(*index) == nullptr) {
      ET_TRY_ASSIGN(auto copy, DeviceStateCopy::make(bytes));
      ET_TRY(state->set_device_copy(*index, std::move(copy)));
    }
    memory.push_back(state->device_copy(*index)->memory());
  }
  return runtime::ProgramState::over(payload, Span<const Span<uint8_t>>(memory.data(), memory.size()));
}

// 90 for ("sm_90", "sm_"); -1 where `arch` is not `prefix` and digits.
int arch_number(const std::string& arch, const char* prefix) {
  const size_t n = std::strlen(prefix);
  if (arch.compare(0, n, prefix) != 0 || arch.size() == n || arch.size() > n + 4) return -1;
  int v = 0;
  for (size_t i = n; i < arch.size(); ++i) {
    if (arch[i] < '0' || arch[i] > '9') return -1;
    v = v * 10 + (arch[i] - '0');
  }
  return v;
}

// The current device and its compute capability as one number (90 for sm_90).
Error current_device(int* device, int* cc) {
  int major = 0, minor = 0;
  ET_TRY(ecuda::to_error(cudaGetDevice(device), "CudaBackend: device"));
  ET_TRY(ecuda::to_error(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, *device),
                         "CudaBackend: device"));
  ET_TRY(ecuda::to_error(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, *device),
                         "CudaBackend: device"));
  *cc = major * 10 + minor;
  return Error::Ok;
}

// The architectures a program was exported for (compile spec "cuda_archs": "sm_90,compute_90"),
// against the device's: real code for exactly its architecture, or PTX for one at most its own.
Error check_archs(Span<const runtime::CompileSpec> specs) {
  for (const auto& spec : specs) {
    if (std::strcmp(spec.key, "cuda_archs") != 0) continue;
    int device = 0, cc = 0;
    ET_TRY(current_device(&device, &cc));
    const std::string archs(reinterpret_cast<const char*>(spec.value.data()), spec.value.size());
    size_t at = 0;
    while (at <= archs.size()) {
      const size_t end = std::min(archs.find(',', at), archs.size());
      const std::string a = archs.substr(at, end - at);
      if (arch_number(a, "sm_") == cc) return Error::Ok;
      const int ptx = arch_number(a, "compute_");
      if (ptx >= 0 && ptx <= cc) return Error::Ok;
      at = end + 1;
    }
    return ET_ERROR(Error::DelegateInvalidCompatibility, "%s: the program was exported for %s; device %d is sm_%d",
                    kCudaBackendName, archs.c_str(), device, cc);
  }
  return Error::Ok;
}

// Compile spec "tf32_convolutions": "1" lets cuDNN compute float32 convolutions in TF32, as
// PyTorch's do by default; absent or "0", they stay IEEE float32.
runtime::Result<bool> tf32_convolutions(Span<const runtime::CompileSpec> specs) {
  for (const auto& spec : specs) {
    if (std::strcmp(spec.key, "tf32_convolutions") != 0) continue;
    const std::string v(reinterpret_cast<const char*>(spec.value.data()), spec.value.size());
    ET_CHECK_OR_RETURN(v == "0" || v == "1", Error::InvalidProgram,
                       "%s: compile spec tf32_convolutions is \"%s\", not \"0\" or \"1\"", kCudaBackendName, v.c_str());
    return v == "1";
  }
  return false;
}

template <typename T>
T* ptr(EValue* v) {
  return static_cast<T*>(v->to_tensor().mutable_data_ptr());
}
char* bytes(EValue* v) { return static_cast<char*>(v->to_tensor().mutable_data_ptr()); }
bool* bp(EValue* v) { return v->to_tensor().data_ptr<bool>(); }

// The element counts of contiguous `x` before and after dimension `dim`.
void around(const Tensor& x, int dim, int64_t* outer, int64_t* inner) {
  *outer = 1, *inner = 1;
  for (int d = 0; d < dim; ++d) *outer *= x.size(d);
  for (int d = dim + 1; d < x.dim(); ++d) *inner *= x.size(d);
}

// The kernels' code for `t`'s element type (plan_op admitted only those element_type_of knows).
Error element_type(const Tensor& t, const char* name, ElementType* out) {
  ET_CHECK_OR_RETURN(element_type_of(t.scalar_type(), out), Error::InvalidArgument, "%s: %s element type %s",
                     kCudaBackendName, name, runtime::to_string(t.scalar_type()));
  return Error::Ok;
}

// The output shape and each operand's strides for the broadcasting kernels: operands a, b and,
// for where, c (the condition); a null operand (a scalar) keeps zero strides.
Error make_broadcast(const Tensor& out, std::initializer_list<const Tensor*> operands, const char* name,
                     Broadcast* shape) {
  *shape = Broadcast{out.dim(), {}, {}, {}, {}};
  for (int d = 0; d < out.dim(); ++d) shape->out_sizes[d] = out.size(d);
  int64_t* strides[] = {shape->a_strides, shape->b_strides, shape->c_strides};
  size_t i = 0;
  for (const Tensor* t : operands) {
    ET_CHECK_OR_RETURN(t == nullptr || broadcast_strides(*t, out.dim(), out.sizes(), strides[i]),
                       Error::InvalidArgument, "%s: %s shapes do not broadcast", kCudaBackendName, name);
    ++i;
  }
  return Error::Ok;
}

// im2col buffers above this hold fewer images per GEMM.
constexpr size_t kConvScratchBytes = size_t{256} << 20;

// Contiguous `out` read from `in` at element strides `strides` (any element type): the copy behind
// expands, permutes, slices, selects, as_strided and splits.
cudaError_t gather_into(const Tensor& out, const void* in, const int64_t* strides, cudaStream_t stream) {
  return launch_strided_copy(in, out.mutable_data_ptr(), out.dim(), out.sizes(), strides, out.numel(),
                             static_cast<int>(out.element_size()), stream);
}

// A tensor whose bytes depend on the layout: 4-D with several channels and several pixels. The
// others (one channel, or one pixel, as a squeeze-excite block's [N, C, 1, 1]) read the same in both.
bool spatial(const Tensor& t) { return t.dim() == 4 && t.size(1) > 1 && t.size(2) * t.size(3) > 1; }
bool spatial(const EValue* v) { return v->is_tensor() && spatial(v->to_tensor()); }

// Copies the NCHW tensor `x` (data at `in`) into NHWC at `out`, or the other way round.
cudaError_t convert_layout(const Tensor& x, const void* in, void* out, bool to_nhwc, cudaStream_t stream) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t nhwc_sizes[4] = {n, h, w, c}, nchw_strides[4] = {c * h * w, w, 1, h * w};
  const int64_t nchw_sizes[4] = {n, c, h, w}, nhwc_strides[4] = {h * w * c, 1, w * c, c};
  return launch_strided_copy(in, out, 4, to_nhwc ? nhwc_sizes : nchw_sizes, to_nhwc ? nchw_strides : nhwc_strides,
                             x.numel(), static_cast<int>(x.element_size()), stream);
}

// The broadcast of an elementwise op on NHWC tensors in their memory order (N, H, W, C): spatial
// operands take NHWC strides, the others keep theirs (their bytes are the same in both layouts).
void to_channels_last(Broadcast* shape, std::initializer_list<const Tensor*> operands) {
  constexpr int order[4] = {0, 2, 3, 1};
  int64_t* strides[] = {shape->a_strides, shape->b_strides, shape->c_strides};
  size_t i = 0;
  for (const Tensor* t : operands) {
    int64_t* st = strides[i++];
    if (t != nullptr && spatial(*t)) {
      const int64_t c = t->size(1), h = t->size(2), w = t->size(3);
      const int64_t nhwc[4] = {h * w * c, 1, w * c, c};
      for (int d = 0; d < 4; ++d) st[d] = t->size(d) == 1 ? 0 : nhwc[d];
    }
    const int64_t logical[4] = {st[0], st[1], st[2], st[3]};
    for (int d = 0; d < 4; ++d) st[d] = logical[order[d]];
  }
  const int64_t sizes[4] = {shape->out_sizes[0], shape->out_sizes[1], shape->out_sizes[2], shape->out_sizes[3]};
  for (int d = 0; d < 4; ++d) shape->out_sizes[d] = sizes[order[d]];
}

// One input channel per group: computed directly, with no scratch and no GEMM.
bool is_depthwise(const OpPlan& plan) { return plan.ints[13] > 1 && plan.ints[1] == plan.ints[13]; }

// The convolution's input as it reads it: converted to its output's layout where they differ.
char* conv_input(const Op& op) { return op.layout_x.get() ? static_cast<char*>(op.layout_x.get()) : bytes(op.args[0]); }

// Convolution as im2col + one batched GEMM per (chunk of images, group) through the shim library
// (plan_op checked the arguments): out[b, g] = weight[g] @ col[b] for each image b of the chunk,
// the weight's batch stride 0; a 1x1 convolution multiplies the input itself. shim: for each
// chunk, for each group: weight, col, out.
Error prepare_conv(Op& op) {
  if (is_depthwise(op.plan)) return Error::Ok;
  const auto& a = op.args;
  const int64_t* v = op.plan.ints;
  const int64_t images = v[0], groups = v[13], cg = v[1] / groups, ocg = v[4] / groups, k = cg * v[5] * v[6],
                hw = v[14] * v[15];
  const size_t es = a[0]->to_tensor().element_size();
  const size_t image_bytes = static_cast<size_t>(k * hw) * es;
  // A 1x1 kernel at stride 1 without padding: the input planes are the im2col matrix already.
  op.conv_direct = v[5] == 1 && v[6] == 1 && v[7] == 1 && v[8] == 1 && v[9] == 0 && v[10] == 0;
  op.conv_chunk = op.conv_direct
                      ? images
                      : std::max<int64_t>(
                            1, std::min<int64_t>(images, static_cast<int64_t>(kConvScratchBytes / (image_bytes + 1))));
  if (!op.conv_direct) {
    op.scratch.emplace_back();
    ET_TRY(ecuda::to_error(cudaMalloc(out(op.scratch.back()), image_bytes * static_cast<size_t>(op.conv_chunk) + 4),
                           "CudaBackend: convolution scratch"));
  }
  auto view = [&](void* data, int64_t batch, int64_t rows, int64_t cols, int64_t batch_stride) -> Error {
    const int64_t sizes[3] = {batch, rows, cols}, strides[3] = {batch_stride, cols, 1};
    op.shim.emplace_back();
    if (aoti_torch_create_tensor_from_blob_v2(data, 3, sizes, strides, 0, static_cast<int32_t>(op.plan.dtype),
                                              aoti_torch_device_type_cuda(), 0, out(op.shim.back()),
                                              aoti_torch_layout_strided(), nullptr, 0) != AOTI_TORCH_SUCCESS) {
      return ET_ERROR_CONTEXT(Error::Internal, "%s", kCudaBackendName);
    }
    return Error::Ok;
  };
  for (int64_t b = 0; b < images; b += op.conv_chunk) {
    const int64_t count = std::min(op.conv_chunk, images - b);
    for (int64_t g = 0; g < groups; ++g) {
      ET_TRY(view(bytes(a[1]) + g * ocg * k * es, count, ocg, k, 0));
      if (op.conv_direct) {
        ET_TRY(view(conv_input(op) + (b * v[1] + g * cg) * hw * es, count, k, hw, v[1] * hw));
      } else {
        ET_TRY(view(op.scratch.back().get(), count, k, hw, k * hw));
      }
      ET_TRY(view(bytes(a[9]) + (b * v[4] + g * ocg) * hw * es, count, ocg, hw, v[4] * hw));
    }
  }
  return Error::Ok;
}

// Inference batch norm folded into a per-channel scale and shift, computed once at init.
Error prepare_batch_norm(Op& op) {
  const auto& a = op.args;
  const int64_t c = a[0]->to_tensor().size(1);
  // The statistics in float32, whatever the model's element type.
  auto host = [&](EValue* v, float fill) -> std::vector<float> {
    std::vector<float> out(static_cast<size_t>(c), fill);
    if (!v->is_tensor() || v->to_tensor().numel() != c) return out;
    const Tensor& t = v->to_tensor();
    std::vector<uint8_t> raw(t.nbytes());
    cudaMemcpy(raw.data(), t.const_data_ptr(), raw.size(), cudaMemcpyDeviceToHost);
    for (int64_t i = 0; i < c; ++i) {
      const uint8_t* e = raw.data() + i * t.element_size();
      switch (t.scalar_type()) {
        case runtime::ScalarType::Half: out[i] = __half2float(*reinterpret_cast<const __half*>(e)); break;
        case runtime::ScalarType::BFloat16:
          out[i] = __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(e));
          break;
        default: std::memcpy(&out[i], e, sizeof(float)); break;
      }
    }
    return out;
  };
  const std::vector<float> w = host(a[1], 1.f), b = host(a[2], 0.f), mean = host(a[3], 0.f), var = host(a[4], 1.f);
  const float eps = static_cast<float>(a[6]->scalar_as_double());
  std::vector<float> scale_shift(static_cast<size_t>(2 * c));
  for (int64_t i = 0; i < c; ++i) {
    scale_shift[i] = w[i] / std::sqrt(var[i] + eps);
    scale_shift[c + i] = b[i] - mean[i] * scale_shift[i];
  }
  op.scratch.emplace_back();
  ET_TRY(ecuda::to_error(cudaMalloc(out(op.scratch.back()), scale_shift.size() * sizeof(float) + 4),
                         "CudaBackend: batch norm"));
  return ecuda::to_error(cudaMemcpy(op.scratch.back().get(), scale_shift.data(), scale_shift.size() * sizeof(float),
                                    cudaMemcpyHostToDevice),
                         "CudaBackend: batch norm");
}

// The int8 linear layer's activations, quantized on each call: rows x k int8 values, rows scales.
Error prepare_int8_linear(Op& op) {
  const int64_t rows = op.plan.ints[0], k = op.plan.ints[2];
  for (size_t bytes : {static_cast<size_t>(rows * k), static_cast<size_t>(rows) * sizeof(float)}) {
    op.scratch.emplace_back();
    ET_TRY(ecuda::to_error(cudaMalloc(out(op.scratch.back()), bytes + 4), "CudaBackend: int8 linear scratch"));
  }
  return Error::Ok;
}

// What a convolution's epilogue computes: its bias, and the residual and activation folded into it
// (fuse_epilogues).
template <typename T>
Epilogue<T> conv_epilogue(const Op& op) {
  Epilogue<T> epilogue;
  epilogue.bias = op.args[2]->is_tensor() ? ptr<T>(op.args[2]) : nullptr;
  epilogue.residual = op.residual ? ptr<T>(op.residual) : nullptr;
  if (op.activation) {
    epilogue.activate = true;
    epilogue.activation = op.activation->plan.unary;
    epilogue.p0 = op.activation->plan.scalars[0], epilogue.p1 = op.activation->plan.scalars[1];
  }
  return epilogue;
}

// Whether a convolution's product still needs `epilogue`'s pass into op.result: cuDNN, where it
// runs the convolution (cudnn_fused outlives a plan that keep_faster_conv drops), did not fuse it,
// and there is something to add, activate or move.
template <typename T>
bool epilogue_pending(const Op& op, const Epilogue<T>& epilogue) {
  return !(op.cudnn && op.cudnn_fused) &&
         (epilogue.bias || epilogue.residual || epilogue.activate || op.result != op.args[9]);
}

// Runs a convolution's cuDNN plan: into op.result with the epilogue where cuDNN fused it, else into
// the convolution's own output for epilogue_pending's pass.
template <typename T>
Error run_cudnn_conv(const Op& op, const Epilogue<T>& epilogue, cudaStream_t stream) {
  const bool fused = op.cudnn_fused;
  const auto& a = op.args;
  if (const char* e = op.cudnn->run(conv_input(op), op.nhwc ? op.layout_w.get() : ptr<T>(a[1]),
                                    fused ? epilogue.bias : nullptr, fused ? epilogue.residual : nullptr,
                                    fused ? ptr<T>(op.result) : ptr<T>(a[9]), op.workspace, stream)) {
    return ET_ERROR(Error::Internal, "%s %s: %s", kCudaBackendName, op.name.c_str(), e);
  }
  return Error::Ok;
}

// The kernels' view of an attention op's plan (ints as payload.h lists them), with contiguous
// strides; read_permutes_in_place and write_permutes_in_place may change them per call site.
AttentionShape attention_shape(const Op& op) {
  const int64_t* v = op.plan.ints;
  const EValue* scale = op.args[6];
  AttentionShape shape{v[0],
                       v[1],
                       v[2],
                       v[3],
                       v[4],
                       v[5],
                       v[6],
                       scale->is_none() ? 1.f / std::sqrt(static_cast<float>(std::max<int64_t>(v[5], 1)))
                                        : static_cast<float>(scale->scalar_as_double()),
                       v[7] != 0,
                       static_cast<AttentionMask>(v[8]),
                       {v[9], v[10], v[11], v[12]},
                       {},
                       {},
                       {},
                       {}};
  contiguous_attention_strides(&shape);
  return shape;
}

// The kernels' view of indexing `x` with `items` (leading Nones, then index tensors: indexing()).
Error index_gather(const Tensor& x, Span<EValue* const> items, const char* name, IndexGather* g) {
  Indexing ix;
  ET_TRY(indexing(items, x.dim(), name, &ix));
  g->count = ix.count;
  g->index_dim = ix.rank;
  g->inner = 1;
  for (int d = ix.lead + ix.count; d < x.dim(); ++d) g->inner *= x.size(d);
  g->block = g->inner;
  for (int d = 0; d < ix.rank; ++d) g->index_sizes[d] = ix.shape[d], g->block *= ix.shape[d];
  g->outer_stride = ix.lead > 0 ? x.strides()[ix.lead - 1] : 0;
  for (int k = 0; k < ix.count; ++k) {
    const Tensor& t = items[ix.lead + k]->to_tensor();
    g->index[k] = t.const_data_ptr();
    g->int32[k] = t.scalar_type() == runtime::ScalarType::Int;
    ET_CHECK_OR_RETURN(broadcast_strides(t, g->index_dim, g->index_sizes, g->index_strides[k]), Error::InvalidArgument,
                       "%s: %s index %d does not broadcast", kCudaBackendName, name, k);
    g->self_sizes[k] = x.size(ix.lead + k);
    g->self_strides[k] = x.strides()[ix.lead + k];
  }
  return Error::Ok;
}

// A product with its residual (fuse_linear_residuals): shims bias, x, w, product (addmm) or x, w,
// product (mm), then the add's output and the residual.
AOTITorchError linear_residual(const Op& op) {
  const bool addmm = op.plan.kind == OpKind::Addmm;
  const size_t o = addmm ? 4 : 3;
  return executorch_cuda_linear_residual_out(op.shim[o].get(), addmm ? op.shim[0].get() : nullptr, op.shim[o - 3].get(),
                                             op.shim[o - 2].get(), op.shim[o + 1].get());
}

// The GEMV's view of a product: mm(x, w, out) or addmm(bias, x, w, 1, 1, out) (which choose_gemvs
// may give it), or a weight-only quantized layer (x, weight, scale(s), [group,] bias, out) of up to
// kGemvMaxRows rows; y is where it writes (the residual add's output where one is fused).
struct GemvOperands {
  EValue* x;
  EValue* w;
  EValue* bias;
  EValue* y;
  int64_t rows, n, k;
  GemvWeights weights;
  EValue* scales;
  int64_t group;
};
GemvOperands gemv_operands(const Op& op) {
  const auto& a = op.args;
  EValue* y = op.residual ? op.result : a[a.size() - 1];
  if (op.plan.kind == OpKind::Int4Linear || op.plan.kind == OpKind::Int8WeightLinear) {
    const bool int4 = op.plan.kind == OpKind::Int4Linear;
    EValue* bias = a[int4 ? 4 : 3];
    return {a[0],
            a[1],
            bias->is_tensor() ? bias : nullptr,
            y,
            op.plan.ints[0],
            op.plan.ints[1],
            op.plan.ints[2],
            int4 ? (op.int4_tiled ? GemvWeights::Int4Tiled : GemvWeights::Int4) : GemvWeights::Int8,
            a[2],
            op.plan.ints[3]};
  }
  const bool addmm = op.plan.kind == OpKind::Addmm;
  const Tensor& w = a[addmm ? 2 : 1]->to_tensor();
  const Tensor& x = a[addmm ? 1 : 0]->to_tensor();
  return {a[addmm ? 1 : 0],
          a[addmm ? 2 : 1],
          addmm ? a[0] : nullptr,
          y,
          x.dim() == 2 ? x.size(0) : 0,
          w.dim() == 2 ? w.size(1) : 0,
          w.dim() == 2 ? w.size(0) : 0,
          GemvWeights::Dense,
          nullptr,
          0};
}

// Whether `op` runs on the GEMV: a product choose_gemvs gave it, or a weight-only quantized layer
// of few enough rows.
bool runs_gemv(const Op& op) {
  return op.gemv ||
         ((op.plan.kind == OpKind::Int4Linear || op.plan.kind == OpKind::Int8WeightLinear) && !dequantizes(op));
}

template <typename T>
cudaError_t run_gemv(const Op& op, cudaStream_t stream) {
  const GemvOperands o = gemv_operands(op);
  GemvArgs<T> g;
  g.prologue = op.prologue;
  if (op.prologue == GemvPrologue::None) {
    g.x = ptr<T>(o.x);
  } else {
    g.a = ptr<T>(op.prologue_a), g.b = ptr<T>(op.prologue_b), g.eps = op.prologue_eps;
  }
  g.w = o.w->to_tensor().const_data_ptr();
  g.weights = o.weights, g.group = o.group;
  g.scales = o.scales ? ptr<float>(o.scales) : nullptr;
  g.bias = o.bias ? ptr<T>(o.bias) : nullptr;
  g.residual = op.residual ? ptr<T>(op.residual) : nullptr;
  g.y = ptr<T>(o.y);
  if (op.epilogue != GemvEpilogue::None) g.epilogue = op.epilogue, g.y = ptr<T>(op.epilogue_out);
  g.rows = o.rows, g.n = o.n, g.k = o.k;
  return launch_gemv(g, stream);
}

// Runs one op on `stream`. Argument layout follows the ATen schema, outputs last (as the CPU kernels);
// plan_op checked kinds, dtypes and shapes at init, and they never change.
template <typename T>
Error run_typed(const Op& op, void* index_error, cudaStream_t stream) {
  const auto& a = op.args;
  const char* name = op.name.c_str();
  cudaError_t status = cudaSuccess;
  if (op.fused) {
    const Op::Fused& f = *op.fused;
    const Tensor& o = f.out->to_tensor();
    const T* in[kMaxFusedInputs] = {};
    const int64_t* strides[kMaxFusedInputs] = {};
    for (int k = 0; k < f.program.inputs; ++k) in[k] = ptr<T>(f.inputs[k]), strides[k] = f.strides[k];
    return ecuda::to_error(launch_fused(f.program, in, strides, o.dim(), o.sizes(), ptr<T>(f.out), o.numel(), stream),
                           name);
  }
  switch (op.plan.kind) {
    case OpKind::Unary: {
      status = launch_unary(op.plan.unary, op.plan.scalars[0], op.plan.scalars[1], ptr<T>(a[0]),
                            ptr<T>(a[a.size() - 1]), a[0]->to_tensor().numel(), stream);
      break;
    }
    case OpKind::Binary: {
      EValue* out = a[a.size() - 1];
      const Tensor& o = out->to_tensor();
      const Tensor& x = a[0]->to_tensor();
      const float alpha = a.size() == 4 ? static_cast<float>(a[2]->scalar_as_double()) : 1.f;
      const bool tensor_b = a[1]->is_tensor();
      Broadcast shape;
      ET_TRY(make_broadcast(o, {&x, tensor_b ? &a[1]->to_tensor() : nullptr}, name, &shape));
      if (op.nhwc) to_channels_last(&shape, {&x, tensor_b ? &a[1]->to_tensor() : nullptr});
      const T* b = tensor_b ? ptr<T>(a[1]) : nullptr;
      const float scalar = tensor_b ? 0.f : static_cast<float>(a[1]->scalar_as_double());
      status = launch_binary(op.plan.binary, ptr<T>(a[0]), b, scalar, alpha, ptr<T>(out), o.numel(), shape, stream);
      break;
    }
    case OpKind::Addmm:
    case OpKind::Mm:
    case OpKind::Bmm: {
      if (op.gemv) {
        status = run_gemv<T>(op, stream);
        break;
      }
      // Through the shim library, on the current stream (execute() set it).
      const AOTITorchError e =
          op.residual != nullptr ? linear_residual(op)
          : op.plan.kind == OpKind::Addmm
              ? aoti_torch_cuda_addmm_out(op.shim[3].get(), op.shim[0].get(), op.shim[1].get(), op.shim[2].get(),
                                          a[3]->scalar_as_double(), a[4]->scalar_as_double())
          : op.plan.kind == OpKind::Mm ? aoti_torch_cuda_mm_out(op.shim[2].get(), op.shim[0].get(), op.shim[1].get())
                                       : aoti_torch_cuda_bmm_out(op.shim[2].get(), op.shim[0].get(), op.shim[1].get());
      if (e != AOTI_TORCH_SUCCESS) return ET_ERROR_CONTEXT(Error::InvalidArgument, "%s %s", kCudaBackendName, name);
      break;
    }
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      const Tensor& x = a[0]->to_tensor();
      const int64_t cols = x.size(x.dim() - 1);
      status = launch_softmax(ptr<T>(a[0]), ptr<T>(a[3]), cols ? x.numel() / cols : 0, cols,
                              op.plan.kind == OpKind::LogSoftmax, stream);
      break;
    }
    case OpKind::LayerNorm: {
      int64_t cols = 1;
      for (int64_t s : a[1]->to_int_list()) cols *= s;
      const Tensor& x = a[0]->to_tensor();
      status =
          launch_layer_norm(ptr<T>(a[0]), a[2]->is_tensor() ? ptr<T>(a[2]) : nullptr,
                            a[3]->is_tensor() ? ptr<T>(a[3]) : nullptr, static_cast<float>(a[4]->scalar_as_double()),
                            ptr<T>(a[5]), ptr<T>(a[6]), ptr<T>(a[7]), cols ? x.numel() / cols : 0, cols, stream);
      break;
    }
    case OpKind::Rope: {
      const Tensor& o = a[3]->to_tensor();
      Broadcast shape;
      ET_TRY(make_broadcast(o, {&a[0]->to_tensor(), &a[1]->to_tensor(), &a[2]->to_tensor()}, name, &shape));
      if (op.put.empty()) {
        status = launch_rope(ptr<T>(a[0]), ptr<T>(a[1]), ptr<T>(a[2]), ptr<T>(a[3]), o.numel(), shape, stream);
        break;
      }
      // index_put(self, indices, values = this rope, accumulate, out), as OpKind::IndexPut runs it.
      const Tensor &self = op.put[0]->to_tensor(), &cache = op.put[4]->to_tensor();
      IndexGather g{};
      ET_TRY(index_gather(self, op.put[1]->to_tensor_list(), name, &g));
      if (cache.const_data_ptr() != self.const_data_ptr()) {
        status = cudaMemcpyAsync(cache.mutable_data_ptr(), self.const_data_ptr(), self.nbytes(),
                                 cudaMemcpyDeviceToDevice, stream);
        if (status != cudaSuccess) break;
      }
      status = launch_rope_put(ptr<T>(a[0]), ptr<T>(a[1]), ptr<T>(a[2]), ptr<T>(op.put[4]), o.numel(), shape, g,
                               static_cast<int*>(index_error), stream);
      break;
    }
    case OpKind::RmsNorm:
      status = launch_rms_norm(ptr<T>(a[0]), ptr<T>(a[1]), op.plan.scalars[0], ptr<T>(a[3]), op.plan.ints[0],
                               op.plan.ints[1], stream);
      break;
    case OpKind::Copy: {
      const Tensor& x = a[0]->to_tensor();
      const Tensor& o = a[a.size() - 1]->to_tensor();
      ET_CHECK_OR_RETURN(x.nbytes() == o.nbytes(), Error::InvalidArgument, "%s: %s sizes differ", kCudaBackendName,
                         name);
      status = cudaMemcpyAsync(o.mutable_data_ptr(), x.const_data_ptr(), x.nbytes(), cudaMemcpyDeviceToDevice, stream);
      break;
    }
    case OpKind::Conv: {
      const int64_t* v = op.plan.ints;
      const int64_t groups = v[13], cg = v[1] / groups, hw = v[14] * v[15];
      const Epilogue<T> epilogue = conv_epilogue<T>(op);
      if (op.layout_x.get()) {
        status = convert_layout(a[0]->to_tensor(), ptr<T>(a[0]), op.layout_x.get(), op.nhwc, stream);
        if (status != cudaSuccess) return ecuda::to_error(status, name);
      }
      if (is_depthwise(op.plan) && !op.cudnn) {
        const ConvShape shape{v[0], v[1], v[2],  v[3],  v[4],  v[5],  v[6],  v[7],
                              v[8], v[9], v[10], v[11], v[12], v[14], v[15], op.nhwc};
        status = launch_depthwise_conv(reinterpret_cast<const T*>(conv_input(op)), ptr<T>(a[1]), ptr<T>(op.result),
                                       shape, epilogue, stream);
        break;
      }
      if (op.cudnn) ET_TRY(run_cudnn_conv(op, epilogue, stream));
      size_t view = 0;
      for (int64_t b = 0; !op.cudnn && b < v[0]; b += op.conv_chunk) {
        const int64_t count = std::min(op.conv_chunk, v[0] - b);
        for (int64_t g = 0; g < groups; ++g, view += 3) {
          if (!op.conv_direct) {
            const T* x = reinterpret_cast<const T*>(conv_input(op)) + (b * v[1] + g * cg) * v[2] * v[3];
            status = launch_im2col(x, static_cast<T*>(op.scratch[0].get()), count, v[1] * v[2] * v[3], cg, v[2], v[3],
                                   v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[14], v[15], stream);
            if (status != cudaSuccess) return ecuda::to_error(status, name);
          }
          if (aoti_torch_cuda_bmm_out(op.shim[view + 2].get(), op.shim[view].get(), op.shim[view + 1].get()) !=
              AOTI_TORCH_SUCCESS) {
            return ET_ERROR_CONTEXT(Error::Internal, "%s convolution", kCudaBackendName);
          }
        }
      }
      if (epilogue_pending(op, epilogue)) {
        // Channel c of pixel p lies at p * channels + c in NHWC, at (image * channels + c) * hw + p in NCHW.
        status = op.nhwc ? launch_epilogue(ptr<T>(a[9]), ptr<T>(op.result), v[0] * hw * v[4], v[4], 1, epilogue, stream)
                         : launch_epilogue(ptr<T>(a[9]), ptr<T>(op.result), v[0] * v[4], v[4], hw, epilogue, stream);
      }
      break;
    }
    case OpKind::Conv3d: {
      // cuDNN (prepare_conv3d planned it), with its epilogue fused where cuDNN computes it (bias,
      // residual, relu), else followed by ours.
      const Epilogue<T> epilogue = conv_epilogue<T>(op);
      ET_TRY(run_cudnn_conv(op, epilogue, stream));
      if (epilogue_pending(op, epilogue)) {
        const Tensor& o = a[9]->to_tensor();
        status = launch_epilogue(ptr<T>(a[9]), ptr<T>(op.result), o.size(0) * o.size(1), o.size(1),
                                 o.size(1) ? o.numel() / (o.size(0) * o.size(1)) : 0, epilogue, stream);
      }
      break;
    }
    case OpKind::BatchNorm: {
      const Tensor& x = a[0]->to_tensor();
      const int64_t c = x.size(1), n = x.size(0), inner = (n && c) ? x.numel() / (n * c) : 0;
      const float* ss = static_cast<const float*>(op.scratch[0].get());
      status = launch_channel_affine(ptr<T>(a[0]), ss, ss + c, ptr<T>(a[7]), n, c, inner, stream);
      break;
    }
    case OpKind::MaxPool:
    case OpKind::AvgPool:
    case OpKind::AdaptiveAvgPool: {
      const bool is_max = op.plan.kind == OpKind::MaxPool;
      const Tensor& x = a[0]->to_tensor();
      EValue* out = a[is_max ? 6 : op.plan.kind == OpKind::AvgPool ? 7 : 2];
      const Tensor& o = out->to_tensor();
      const int64_t* v = op.plan.ints;
      // NHWC pooling leaves max pooling's indices unwritten (choose_layouts saw nothing read them).
      status = launch_pool2d(
          ptr<T>(a[0]), ptr<T>(out), is_max && !op.nhwc ? a[7]->to_tensor().data_ptr<int64_t>() : nullptr, is_max,
          x.size(0) * x.size(1), x.size(2), x.size(3), o.size(2), o.size(3), v[0], v[1], v[2], v[3], v[4], v[5], v[6],
          v[7], v[8] != 0, op.nhwc ? x.size(1) : 0, stream, op.plan.kind == OpKind::AdaptiveAvgPool && v[9] != 0);
      break;
    }
    case OpKind::RowReduce: {
      const Tensor& x = a[0]->to_tensor();
      const Tensor& o = a[a.size() - 1]->to_tensor();
      if (op.nhwc) {
        status = launch_pixel_reduce(ptr<T>(a[0]), ptr<T>(a[a.size() - 1]), static_cast<float*>(op.scratch[0].get()),
                                     x.size(0), x.size(2) * x.size(3), x.size(1), op.plan.ints[0] != 0, stream);
        break;
      }
      const int64_t rows = o.numel(), cols = rows ? x.numel() / rows : 0;
      status = launch_row_reduce(ptr<T>(a[0]), ptr<T>(a[a.size() - 1]), rows, cols, op.plan.ints[0] != 0, stream);
      break;
    }
    case OpKind::Expand: {
      const Tensor& x = a[0]->to_tensor();
      const Tensor& o = a[3]->to_tensor();
      int64_t strides[kMaxOpDims];
      ET_CHECK_OR_RETURN(broadcast_strides(x, o.dim(), o.sizes(), strides), Error::InvalidArgument,
                         "%s: %s shapes do not broadcast", kCudaBackendName, name);
      status = gather_into(o, x.const_data_ptr(), strides, stream);
      break;
    }
    case OpKind::Split: {
      const Tensor& x = a[0]->to_tensor();
      const int64_t dim = op.plan.ints[0];
      int64_t at = 0;
      for (size_t i = 3; i < a.size() && status == cudaSuccess; ++i) {
        const Tensor& o = a[i]->to_tensor();
        status =
            gather_into(o, static_cast<const uint8_t*>(x.const_data_ptr()) + at * x.strides()[dim] * x.element_size(),
                        x.strides(), stream);
        at += o.size(static_cast<int>(dim));
      }
      break;
    }
    case OpKind::Slice:
    case OpKind::Select: {
      // A strided read of the input from the first element kept.
      const Tensor& x = a[0]->to_tensor();
      const Tensor& o = a[a.size() - 1]->to_tensor();
      const int64_t dim = op.plan.ints[0], first = op.plan.ints[1];
      int64_t strides[kMaxOpDims];
      for (int d = 0, od = 0; d < x.dim(); ++d) {
        if (op.plan.kind == OpKind::Slice)
          strides[od++] = x.strides()[d] * (d == dim ? op.plan.ints[2] : 1);
        else if (d != dim)
          strides[od++] = x.strides()[d];
      }
      const auto* base = static_cast<const uint8_t*>(x.const_data_ptr()) + first * x.strides()[dim] * x.element_size();
      status = gather_into(o, base, strides, stream);
      break;
    }
    case OpKind::Upsample: {
      const Tensor& x = a[0]->to_tensor();
      const Tensor& o = a[a.size() - 1]->to_tensor();
      const Upsample shape{x.size(0) * x.size(1),
                           x.size(2),
                           x.size(3),
                           o.size(2),
                           o.size(3),
                           op.plan.scalars[0],
                           op.plan.scalars[1],
                           op.plan.ints[0] != 0,
                           op.plan.ints[1] != 0};
      status = launch_upsample2d(ptr<T>(a[0]), ptr<T>(a[a.size() - 1]), shape, stream);
      break;
    }
    case OpKind::IndexSelect: {
      // Each slice before dim is an embedding lookup: rows of `inner` elements picked by the index.
      const Tensor &x = a[0]->to_tensor(), &idx = a[2]->to_tensor();
      const int dim = static_cast<int>(op.plan.ints[0]);
      int64_t outer, inner;
      around(x, dim, &outer, &inner);
      const int64_t rows = x.size(dim), n = idx.numel();
      for (int64_t o = 0; o < outer && status == cudaSuccess; ++o) {
        status = launch_embedding(ptr<T>(a[0]) + o * rows * inner, idx.const_data_ptr(),
                                  idx.scalar_type() == runtime::ScalarType::Int, ptr<T>(a[3]) + o * n * inner, n, rows,
                                  inner, static_cast<int*>(index_error), stream);
      }
      break;
    }
    case OpKind::ConstantPad: {
      const Tensor& x = a[0]->to_tensor();
      const Tensor& o = a[3]->to_tensor();
      status = launch_constant_pad(ptr<T>(a[0]), ptr<T>(a[3]), x.dim(), x.sizes(), o.sizes(), op.plan.ints,
                                   op.plan.scalars[0], stream);
      break;
    }
    case OpKind::AsStrided: {
      const Tensor& x = a[0]->to_tensor();
      const Tensor& o = a[4]->to_tensor();
      const auto* base = static_cast<const uint8_t*>(x.const_data_ptr()) + op.plan.ints[0] * x.element_size();
      status = gather_into(o, base, a[2]->to_int_list().data(), stream);
      break;
    }
    case OpKind::Cat: {
      // Each piece is `outer` rows of its extent along dim, written at its column of the output's rows.
      const Tensor& o = a[2]->to_tensor();
      const int64_t dim = op.plan.ints[0];
      int64_t outer = 1;
      for (int d = 0; d < dim; ++d) outer *= o.size(d);
      const size_t row = static_cast<size_t>(o.size(static_cast<int>(dim)) * o.strides()[dim]) * o.element_size();
      size_t at = 0;
      for (const EValue* item : a[0]->to_tensor_list()) {
        const Tensor& t = item->to_tensor();
        const size_t width = static_cast<size_t>(t.size(static_cast<int>(dim)) * o.strides()[dim]) * o.element_size();
        const bool in_place = outer == 1 && t.const_data_ptr() == static_cast<uint8_t*>(o.mutable_data_ptr()) + at;
        if (width && outer && !in_place) {  // in place: planned there by the exporter (stacks)
          status = cudaMemcpy2DAsync(static_cast<uint8_t*>(o.mutable_data_ptr()) + at, row, t.const_data_ptr(), width,
                                     width, static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, stream);
          if (status != cudaSuccess) break;
        }
        at += width;
      }
      break;
    }
    case OpKind::Compare: {
      const Tensor& x = a[0]->to_tensor();
      ElementType type = ElementType::Float32;
      ET_TRY(element_type(x, name, &type));
      if (op.plan.ints[0] == 1) {
        const Tensor& o = a[2]->to_tensor();
        Broadcast shape;
        ET_TRY(make_broadcast(o, {&x, &a[1]->to_tensor()}, name, &shape));
        status = launch_compare_tensors(op.plan.compare, x.const_data_ptr(), a[1]->to_tensor().const_data_ptr(), type,
                                        bp(a[2]), o.numel(), shape, stream);
      } else if (type == ElementType::Float32 || type == ElementType::Float16 || type == ElementType::BFloat16) {
        status = launch_compare_scalar(op.plan.compare, ptr<T>(a[0]), static_cast<float>(a[1]->scalar_as_double()),
                                       bp(a[2]), x.numel(), stream);
      } else {
        const bool integral = a[1]->is_int() || a[1]->is_bool();
        const int64_t whole = a[1]->is_int() ? a[1]->to_int() : a[1]->is_bool() ? a[1]->to_bool() : 0;
        status = launch_compare_integer(op.plan.compare, x.const_data_ptr(), type, integral, whole,
                                        a[1]->scalar_as_double(), bp(a[2]), x.numel(), stream);
      }
      break;
    }
    case OpKind::IntegerBinary: {
      const Tensor &x = a[0]->to_tensor(), &o = a[a.size() - 1]->to_tensor();
      const bool tensor_b = a[1]->is_tensor();
      Broadcast shape;
      ET_TRY(make_broadcast(o, {&x, tensor_b ? &a[1]->to_tensor() : nullptr}, name, &shape));
      ElementType type = ElementType::Int64;
      ET_TRY(element_type(x, name, &type));
      status = launch_binary_integer(op.plan.binary, x.const_data_ptr(),
                                     tensor_b ? a[1]->to_tensor().const_data_ptr() : nullptr,
                                     tensor_b ? 0 : a[1]->to_int(), a.size() == 4 ? a[2]->to_int() : 1,
                                     o.mutable_data_ptr(), type, o.numel(), shape, stream);
      break;
    }
    case OpKind::Cumsum: {
      const Tensor &x = a[0]->to_tensor(), &o = a[3]->to_tensor();
      ElementType from = ElementType::Float32, to = ElementType::Float32;
      ET_TRY(element_type(x, name, &from));
      ET_TRY(element_type(o, name, &to));
      const int dim = static_cast<int>(op.plan.ints[0]);
      int64_t outer, inner;
      around(x, dim, &outer, &inner);
      status = launch_cumsum(x.const_data_ptr(), from, o.mutable_data_ptr(), to, outer, x.size(dim), inner, stream);
      break;
    }
    case OpKind::ArgMax: {
      const Tensor& x = a[0]->to_tensor();
      ElementType type = ElementType::Float32;
      ET_TRY(element_type(x, name, &type));
      status = launch_row_argmax(x.const_data_ptr(), type, static_cast<int64_t*>(a[3]->to_tensor().mutable_data_ptr()),
                                 op.plan.ints[0], op.plan.ints[1], stream);
      break;
    }
    case OpKind::Gather: {
      const Tensor &x = a[0]->to_tensor(), &idx = a[2]->to_tensor(), &o = a[4]->to_tensor();
      GatherShape g{};
      g.rank = x.dim(), g.dim = static_cast<int>(op.plan.ints[0]);
      for (int d = 0; d < x.dim(); ++d) g.sizes[d] = idx.size(d), g.self_strides[d] = x.strides()[d];
      g.self_size = x.size(g.dim);
      status = launch_gather(x.const_data_ptr(), idx.const_data_ptr(), idx.scalar_type() == runtime::ScalarType::Int,
                             o.mutable_data_ptr(), g, o.numel(), static_cast<int>(x.element_size()),
                             static_cast<int*>(index_error), stream);
      break;
    }
    case OpKind::Cast: {
      const Tensor &x = a[op.plan.ints[0]]->to_tensor(), &o = a[op.args.size() - 1]->to_tensor();
      ElementType from = ElementType::Float32, to = ElementType::Float32;
      ET_TRY(element_type(x, name, &from));
      ET_TRY(element_type(o, name, &to));
      status = launch_cast(x.const_data_ptr(), from, o.mutable_data_ptr(), to, x.numel(), stream);
      break;
    }
    case OpKind::Logic: {
      const Tensor& o = a[2]->to_tensor();
      Broadcast shape;
      ET_TRY(make_broadcast(o, {&a[0]->to_tensor(), &a[1]->to_tensor()}, name, &shape));
      status = launch_logic(op.plan.logic, bp(a[0]), bp(a[1]), bp(a[2]), o.numel(), shape, stream);
      break;
    }
    case OpKind::Index: {
      const Tensor &x = a[0]->to_tensor(), &o = a[2]->to_tensor();
      IndexGather g{};
      ET_TRY(index_gather(x, a[1]->to_tensor_list(), name, &g));
      status = launch_index(x.const_data_ptr(), o.mutable_data_ptr(), g, o.numel(), static_cast<int>(x.element_size()),
                            static_cast<int*>(index_error), stream);
      break;
    }
    case OpKind::IndexPut: {
      const Tensor &x = a[0]->to_tensor(), &values = a[2]->to_tensor(), &o = a[4]->to_tensor();
      IndexGather g{};
      ET_TRY(index_gather(x, a[1]->to_tensor_list(), name, &g));
      if (o.const_data_ptr() != x.const_data_ptr()) {  // in place where out is self (program state)
        status =
            cudaMemcpyAsync(o.mutable_data_ptr(), x.const_data_ptr(), x.nbytes(), cudaMemcpyDeviceToDevice, stream);
        if (status != cudaSuccess) break;
      }
      status = launch_index_put(o.mutable_data_ptr(), values.const_data_ptr(), g, values.numel(),
                                static_cast<int>(x.element_size()), static_cast<int*>(index_error), stream);
      break;
    }
    case OpKind::LogicalNot: status = launch_logical_not(bp(a[0]), bp(a[1]), a[0]->to_tensor().numel(), stream); break;
    case OpKind::Any: {
      const Tensor& x = a[0]->to_tensor();
      const int64_t cols = x.size(x.dim() - 1);
      status = launch_row_any(bp(a[0]), bp(a[3]), cols ? x.numel() / cols : 0, cols, stream);
      break;
    }
    case OpKind::Where: {
      const Tensor& o = a[3]->to_tensor();
      Broadcast shape;
      ET_TRY(make_broadcast(o, {&a[1]->to_tensor(), &a[2]->to_tensor(), &a[0]->to_tensor()}, name, &shape));
      status = launch_where(bp(a[0]), ptr<T>(a[1]), ptr<T>(a[2]), ptr<T>(a[3]), o.numel(), shape, stream);
      break;
    }
    case OpKind::Attention: {
      AttentionShape shape = attention_shape(op);
      T* out = ptr<T>(a[8]);
      if (op.result != nullptr) {  // written where the permute after it puts it
        out = ptr<T>(op.result);
        std::copy(op.attention_out_strides, op.attention_out_strides + 3, shape.out_strides);
      }
      const T* in[3] = {ptr<T>(a[0]), ptr<T>(a[1]), ptr<T>(a[2])};
      int64_t* strides[3] = {shape.q_strides, shape.k_strides, shape.v_strides};
      for (int i = 0; i < 3; ++i) {
        if (op.attention_src[i] == nullptr) continue;
        in[i] = static_cast<const T*>(op.attention_src[i]->to_tensor().const_data_ptr());
        std::copy(op.attention_strides[i], op.attention_strides[i] + 3, strides[i]);
      }
      const void* mask = a[3]->is_tensor() ? a[3]->to_tensor().const_data_ptr() : nullptr;
      float* partials = static_cast<float*>(op.attention_partials.get());
      if (op.step) {  // q is the rope's input; the new rows come from the step's tensors
        const Op::Step& st = *op.step;
        const Tensor &q = st.q->to_tensor(), &k = st.k->to_tensor(), &v = st.v->to_tensor();
        const Tensor& position = st.position->to_tensor();
        std::copy(q.strides(), q.strides() + 3, shape.q_strides);
        const AttentionStep<T> step{ptr<T>(st.k),
                                    ptr<T>(st.v),
                                    {k.strides()[0], k.strides()[1]},
                                    {v.strides()[0], v.strides()[1]},
                                    ptr<T>(st.cos),
                                    ptr<T>(st.sin),
                                    position.const_data_ptr(),
                                    position.scalar_type() == runtime::ScalarType::Int,
                                    static_cast<int*>(index_error)};
        status = launch_attention(ptr<T>(st.q), in[1], in[2], mask, out, shape, partials, stream, &step);
        break;
      }
      status = launch_attention(in[0], in[1], in[2], mask, out, shape, partials, stream);
      break;
    }
    case OpKind::Embedding: {
      const Tensor &w = a[0]->to_tensor(), &idx = a[1]->to_tensor();
      status =
          launch_embedding(ptr<T>(a[0]), idx.const_data_ptr(), idx.scalar_type() == runtime::ScalarType::Int,
                           ptr<T>(a[5]), idx.numel(), w.size(0), w.size(1), static_cast<int*>(index_error), stream);
      break;
    }
    case OpKind::LstmCell:
    case OpKind::GruCell: {
      const bool lstm = op.plan.kind == OpKind::LstmCell;
      status = launch_recurrent_cell(lstm, ptr<T>(a[0]), ptr<T>(a[1]), ptr<T>(a[2]), ptr<T>(a[3]),
                                     lstm ? ptr<T>(a[4]) : nullptr, op.plan.ints[0], op.plan.ints[1], stream);
      break;
    }
    case OpKind::LstmLayer:
    case OpKind::GruLayer: {  // (gates, w_hh, b_hh, h0, [c0,] reverse, y, h_n[, c_n])
      const bool lstm = op.plan.kind == OpKind::LstmLayer;
      const size_t y = lstm ? 6 : 5;
      RecurrentLayer<T> layer;
      layer.gates = ptr<T>(a[0]), layer.weight = ptr<T>(a[1]), layer.bias = a[2]->is_tensor() ? ptr<T>(a[2]) : nullptr;
      layer.h0 = ptr<T>(a[3]), layer.y = ptr<T>(a[y]), layer.h_n = ptr<T>(a[y + 1]);
      if (lstm) layer.c0 = ptr<T>(a[4]), layer.c_n = ptr<T>(a[y + 2]);
      layer.steps = op.plan.ints[0], layer.rows = op.plan.ints[1], layer.units = op.plan.ints[2];
      layer.lstm = lstm, layer.reverse = op.plan.ints[3] != 0;
      status = launch_recurrent_layer(layer, stream);
      break;
    }
    case OpKind::Int8WeightLinear:
    case OpKind::Int4Linear: {  // (x, weight, scale(s), [group_size,] bias, out)
      if (!dequantizes(op)) {   // with what fuse_linear_residuals and fuse_gemv_neighbours folded in
        status = run_gemv<T>(op, stream);
        break;
      }
      const bool int4 = op.plan.kind == OpKind::Int4Linear;
      const int64_t n = op.plan.ints[1], k = op.plan.ints[2], group = op.plan.ints[3];
      const size_t bias = int4 ? 4 : 3;
      const T* b = a[bias]->is_tensor() ? ptr<T>(a[bias]) : nullptr;
      const float* scales = ptr<float>(a[2]);
      T* w = static_cast<T*>(op.workspace);
      status = int4 ? launch_dequantize_int4(ptr<uint8_t>(a[1]), scales, group, w, n, k, stream)
                    : launch_dequantize_int8(ptr<int8_t>(a[1]), scales, w, n, k, stream);
      if (status != cudaSuccess) break;
      const AOTITorchError e = b != nullptr
                                   ? aoti_torch_cuda_addmm_out(op.shim[2].get(), op.shim[3].get(), op.shim[0].get(),
                                                               op.shim[1].get(), 1.0, 1.0)
                                   : aoti_torch_cuda_mm_out(op.shim[2].get(), op.shim[0].get(), op.shim[1].get());
      if (e != AOTI_TORCH_SUCCESS) return ET_ERROR_CONTEXT(Error::InvalidArgument, "%s %s", kCudaBackendName, name);
      break;
    }
    case OpKind::Int8Linear: {
      const int64_t rows = op.plan.ints[0], n = op.plan.ints[1], k = op.plan.ints[2];
      int8_t* q = static_cast<int8_t*>(op.scratch[0].get());
      float* scale = static_cast<float*>(op.scratch[1].get());
      status = launch_quantize_rows(ptr<float>(a[0]), q, scale, rows, k, stream);
      if (status == cudaSuccess) {
        status =
            launch_int8_linear(q, scale, ptr<int8_t>(a[1]), ptr<float>(a[2]),
                               a[3]->is_tensor() ? ptr<float>(a[3]) : nullptr, ptr<float>(a[4]), rows, n, k, stream);
      }
      break;
    }
    case OpKind::Permute: {
      ET_CHECK_OR_RETURN(a.size() == 3 && a[1]->is_int_list(), Error::InvalidArgument, "%s: %s arguments",
                         kCudaBackendName, name);
      const Tensor& x = a[0]->to_tensor();
      const Tensor& o = a[2]->to_tensor();
      const auto dims = a[1]->to_int_list();
      ET_CHECK_OR_RETURN(static_cast<int>(dims.size()) == x.dim() && o.dim() == x.dim() && x.dim() <= kMaxOpDims,
                         Error::InvalidArgument, "%s: %s dims", kCudaBackendName, name);
      int64_t strides[kMaxOpDims];
      for (int d = 0; d < x.dim(); ++d) {
        const int64_t p = dims[d] < 0 ? dims[d] + x.dim() : dims[d];
        ET_CHECK_OR_RETURN(p >= 0 && p < x.dim() && o.size(d) == x.size(static_cast<int>(p)), Error::InvalidArgument,
                           "%s: %s dims", kCudaBackendName, name);
        strides[d] = x.strides()[p];
      }
      status = gather_into(o, x.const_data_ptr(), strides, stream);
      break;
    }
  }
  return ecuda::to_error(status, name);
}

// Runs one op in its element type (plan_op chose it from the op's floating tensors).
Error run(const Op& op, void* index_error, cudaStream_t stream) {
  switch (op.plan.dtype) {
    case runtime::ScalarType::Half: return run_typed<__half>(op, index_error, stream);
    case runtime::ScalarType::BFloat16: return run_typed<__nv_bfloat16>(op, index_error, stream);
    default: return run_typed<float>(op, index_error, stream);
  }
}

bool graphs_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("EXECUTORCH_CUDA_GRAPHS");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

// Each op between two events, in the profile under its name and what its epilogue computes.
Error run_profiled(Delegate& d, cudaStream_t stream) {
  std::vector<ecuda::Event> events(d.ops.size() + 1);
  for (ecuda::Event& e : events) ET_TRY(ecuda::to_error(cudaEventCreate(out(e)), "CudaBackend: profile"));
  Error failed = ecuda::to_error(cudaEventRecord(events[0].get(), stream), "CudaBackend: profile");
  for (size_t k = 0; k < d.ops.size() && failed == Error::Ok; ++k) {
    if (!d.ops[k].skipped) failed = run(d.ops[k], d.index_error.get(), stream);
    if (failed == Error::Ok)
      failed = ecuda::to_error(cudaEventRecord(events[k + 1].get(), stream), "CudaBackend: profile");
  }
  if (failed == Error::Ok) failed = ecuda::to_error(cudaStreamSynchronize(stream), "CudaBackend: profile");
  // The first call loads kernels and picks cuBLAS/cuDNN algorithms: not counted.
  const bool counted = d.runs++ > 0;
  for (size_t k = 0; counted && k < d.ops.size() && failed == Error::Ok; ++k) {
    const Op& op = d.ops[k];
    if (op.skipped) continue;
    float ms = 0.f;
    cudaEventElapsedTime(&ms, events[k].get(), events[k + 1].get());
    std::string label = op.fused ? op.fused->label : op.name;
    if (op.residual) label += "+add";
    if (op.activation) label += "+" + op.activation->name;
    if (op.plan.kind == OpKind::Conv && op.nhwc != op.x_nhwc)
      label += op.nhwc ? " nchw->nhwc" : " nhwc->nchw";
    else if (op.nhwc)
      label += " nhwc";
    auto& row = d.profile[label];
    row.first += ms;
    row.second += 1;
  }
  return failed;
}

// Runs the delegate's ops on `stream`: eagerly on the first call (and on a stream the caller is
// already capturing, into which the kernels then go), from the graph afterwards. `stream` is never
// the legacy default stream, which cannot be captured: execute joins that one through events.
Error run_ops(Delegate& d, cudaStream_t stream) {
  static const bool profile = std::getenv("EXECUTORCH_PROFILE") != nullptr;
  if (profile) return run_profiled(d, stream);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  ET_TRY(ecuda::to_error(cudaStreamIsCapturing(stream, &capturing), "CudaBackend: stream state"));
  const bool capturable = graphs_enabled() && capturing == cudaStreamCaptureStatusNone;
  if (!capturable || d.runs++ == 0) {
    for (const Op& op : d.ops) {
      if (!op.skipped) ET_TRY(run(op, d.index_error.get(), stream));
    }
    return Error::Ok;
  }
  if (d.graph.exec == nullptr) {
    d.graph.reset();
    ET_TRY(ecuda::to_error(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                           "CudaBackend: graph capture"));
    Error failed = Error::Ok;
    for (const Op& op : d.ops) {
      if (!op.skipped && (failed = run(op, d.index_error.get(), stream)) != Error::Ok) break;
    }
    const cudaError_t ended = cudaStreamEndCapture(stream, out(d.graph.graph));
    if (failed != Error::Ok || ended != cudaSuccess) {
      d.graph.reset();
      cudaGetLastError();
      return failed != Error::Ok ? failed : ecuda::to_error(ended, "CudaBackend: graph capture");
    }
    const cudaError_t made = cudaGraphInstantiate(out(d.graph.exec), d.graph.graph.get(), 0);
    if (made != cudaSuccess) {
      d.graph.reset();
      d.runs = 0;  // the next call runs eagerly, then tries again
      return ecuda::to_error(made, "CudaBackend: graph instantiation");
    }
  }
  return ecuda::to_error(cudaGraphLaunch(d.graph.exec.get(), stream), "CudaBackend: graph launch");
}

// Whether permuting x by `dims` only moves dimensions of size 1 (its bytes stay in order).
bool keeps_layout(const Tensor& x, Span<const int64_t> dims) {
  if (static_cast<int>(dims.size()) != x.dim()) return false;
  int64_t last = -1;
  for (int64_t d : dims) {
    const int64_t p = d < 0 ? d + x.dim() : d;
    if (p < 0 || p >= x.dim()) return false;
    if (x.size(static_cast<int>(p)) == 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

// A copy, select, unit-step slice or layout-keeping permute whose output the exporter planned on
// exactly the bytes it would copy (a view of its input): nothing to do.
bool lies_in_place(const Op& op) {
  const OpKind kind = op.plan.kind;
  if (kind != OpKind::Copy && kind != OpKind::Slice && kind != OpKind::Select && kind != OpKind::Permute) return false;
  const Tensor& in = op.args[0]->to_tensor();
  const Tensor& out = op.args[op.args.size() - 1]->to_tensor();
  const auto* src = static_cast<const uint8_t*>(in.const_data_ptr());
  if (kind == OpKind::Copy) return src == out.const_data_ptr();
  if (kind == OpKind::Permute) return src == out.const_data_ptr() && keeps_layout(in, op.args[1]->to_int_list());
  const int64_t dim = op.plan.ints[0];
  if (kind == OpKind::Slice && op.plan.ints[2] != 1) return false;
  for (int64_t d = 0; d < dim; ++d) {
    if (in.size(static_cast<int>(d)) != 1) return false;
  }
  return src + op.plan.ints[1] * in.strides()[dim] * static_cast<int64_t>(in.element_size()) == out.const_data_ptr();
}

// Whether the bytes of tensors `v` and `w` overlap; overlaps_shifted: other than exactly (same
// first byte), where an elementwise pass reading one and writing the other would race.
bool overlaps(const EValue* v, const EValue* w) {
  const Tensor& a = v->to_tensor();
  const Tensor& b = w->to_tensor();
  const auto* pa = static_cast<const uint8_t*>(a.const_data_ptr());
  const auto* pb = static_cast<const uint8_t*>(b.const_data_ptr());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

bool overlaps_shifted(const EValue* v, const EValue* w) {
  return v->to_tensor().const_data_ptr() != w->to_tensor().const_data_ptr() && overlaps(v, w);
}

// Folds what finishes a convolution's result into its epilogue: an add of a tensor of the same
// shape (a residual), then an activation, each computed by the next instruction from the value
// before it and read by nothing else. ResNet's conv -> add -> relu becomes one GEMM and one
// elementwise pass instead of three. Planned memory is reused, so the chain's last output may lie
// on bytes the epilogue reads: such a chain stops before that instruction.
using Uses = std::unordered_map<const EValue*, int>;

// Each value's appearances in instruction arguments; the method's outputs count two more (they
// are read after execute).
Uses count_uses(const std::vector<Op>& ops, runtime::Method& m) {
  Uses uses;
  for (const Op& op : ops) {
    for (const EValue* v : op.args) {
      ++uses[v];
      if (v->is_tensor_list()) {
        for (const EValue* t : v->to_tensor_list()) ++uses[t];
      }
    }
  }
  for (size_t i = 0; i < m.num_outputs(); ++i) uses[&m.get_output(i)] += 2;
  return uses;
}

// The other operand where `add` is `v + other` or `other + v` (alpha 1, both tensors, other not v
// itself): the residual an epilogue can add to v in its place; nullptr otherwise.
EValue* residual_added_to(const Op& add, const EValue* v) {
  const auto& a = add.args;
  if (add.plan.kind != OpKind::Binary || add.plan.binary != Binary::Add || a.size() != 4 || !a[1]->is_tensor() ||
      a[2]->scalar_as_double() != 1.0) {
    return nullptr;
  }
  EValue* other = a[0] == v ? a[1] : a[1] == v ? a[0] : nullptr;
  return other == v ? nullptr : other;
}

void fuse_epilogues(std::vector<Op>& ops, runtime::Method& m) {
  Uses uses = count_uses(ops, m);
  auto alike = [](const EValue* v, const EValue* w) {  // dtype and shape
    const Tensor& a = v->to_tensor();
    const Tensor& b = w->to_tensor();
    return a.scalar_type() == b.scalar_type() && runtime::same_shape(a, b);
  };
  // Intermediates appear twice: written by one instruction, read by the next.
  auto private_value = [&](const EValue* v) { return uses[v] == 2; };
  for (size_t i = 0; i < ops.size(); ++i) {
    Op& conv = ops[i];
    if (conv.plan.kind != OpKind::Conv && conv.plan.kind != OpKind::Conv3d) continue;
    conv.result = conv.args[9];
    // The built-in depthwise kernel writes `result` while reading its input.
    const bool direct = conv.plan.kind == OpKind::Conv && is_depthwise(conv.plan);
    size_t j = i + 1;
    EValue* other = j < ops.size() && private_value(conv.result) ? residual_added_to(ops[j], conv.result) : nullptr;
    EValue* sum = other ? ops[j].args[3] : nullptr;
    if (other && alike(other, sum) && alike(conv.result, sum) && !overlaps_shifted(sum, other) &&
        !overlaps_shifted(sum, conv.result) && !(direct && overlaps(sum, conv.args[0]))) {
      conv.residual = other;
      conv.result = sum;
      ops[j++].skipped = true;
    }
    if (j < ops.size() && ops[j].plan.kind == OpKind::Unary && ops[j].args[0] == conv.result &&
        private_value(conv.result)) {
      EValue* out = ops[j].args[ops[j].args.size() - 1];
      if (alike(conv.result, out) && !overlaps_shifted(out, conv.args[9]) &&
          !(conv.residual && overlaps_shifted(out, conv.residual)) && !(direct && overlaps(out, conv.args[0]))) {
        conv.activation = &ops[j];
        conv.result = out;
        ops[j].skipped = true;
      }
    }
  }
}

// A linear layer (addmm with a bias row, or mm) and the residual added to its output right after,
// through views that lie in place (transformers' attention out-projection and second MLP layer; Llama's
// have no bias), are one cuBLASLt call that reads the residual as its C matrix: the add's pass goes.
// The product is then written to the add's output (the shim after the product's own, the residual's
// next: see linear_residual); the views in between stay unwritten.
Error fuse_linear_residuals(std::vector<Op>& ops, runtime::Method& m) {
  Uses uses = count_uses(ops, m);
  for (size_t i = 0; i < ops.size(); ++i) {
    Op& mm = ops[i];
    const auto& a = mm.args;
    const bool addmm = mm.plan.kind == OpKind::Addmm;  // addmm(bias, x, w, beta, alpha, out); mm(x, w, out)
    // A weight-only quantized layer's GEMV (x, weight, scale(s), [group,] bias, out) adds it itself.
    const bool gemv = runs_gemv(mm);
    if (mm.skipped || !(addmm || gemv || mm.plan.kind == OpKind::Mm) ||
        (!gemv && mm.shim.size() != (addmm ? 4u : 3u)) ||
        (addmm && (!a[0]->is_tensor() || a[3]->scalar_as_double() != 1.0 || a[4]->scalar_as_double() != 1.0))) {
      continue;
    }
    int64_t rows, cols;  // the product's
    EValue* x_value = a[addmm ? 1 : 0];
    EValue* w_value = a[addmm ? 2 : 1];
    EValue* cur = a[a.size() - 1];
    if (gemv) {
      rows = mm.plan.ints[0], cols = mm.plan.ints[1];
    } else {
      const Tensor& x = x_value->to_tensor();
      const Tensor& w = w_value->to_tensor();
      if (x.dim() != 2 || w.dim() != 2 || (addmm && a[0]->to_tensor().numel() != w.size(1))) continue;
      rows = x.size(0), cols = w.size(1);
    }
    const runtime::ScalarType dtype = x_value->to_tensor().scalar_type();
    size_t j = i + 1;
    while (j < ops.size() && uses[cur] == 2 && ops[j].skipped && ops[j].args[0] == cur &&
           (ops[j].plan.kind == OpKind::Copy || ops[j].plan.kind == OpKind::Permute)) {
      cur = ops[j].args[ops[j].args.size() - 1];
      ++j;
    }
    if (j >= ops.size() || uses[cur] != 2) continue;
    Op& add = ops[j];
    EValue* other = add.skipped ? nullptr : residual_added_to(add, cur);
    if (other == nullptr) continue;
    EValue* out = add.args[3];
    const Tensor& r = other->to_tensor();
    const Tensor& o = out->to_tensor();
    if (r.scalar_type() != dtype || o.scalar_type() != dtype || !runtime::same_shape(r, o) ||
        !runtime::same_shape(cur->to_tensor(), o) || o.numel() != rows * cols || overlaps(out, x_value) ||
        overlaps(out, w_value) || overlaps_shifted(out, other)) {
      continue;
    }
    mm.residual = other;
    mm.result = out;
    add.skipped = true;
    if (gemv) continue;
    const int64_t sizes[2] = {rows, cols}, strides[2] = {cols, 1};  // as [rows, cols] matrices
    for (EValue* v : {out, other}) {
      mm.shim.emplace_back();
      ET_TRY(shim_view(v, &mm.shim.back(), 2, sizes, strides));
    }
  }
  return Error::Ok;
}

// A rotary embedding whose output only an index_put reads, as its values (a key written into a static
// cache), writes into the cache itself: one pass, the rotated key never stored apart. It runs at the
// index_put's place in the order (the indices may be computed in between), so nothing in between
// may write where its inputs lie.
void fuse_rope_puts(std::vector<Op>& ops, runtime::Method& m) {
  Uses uses = count_uses(ops, m);
  for (size_t i = 0; i < ops.size(); ++i) {
    Op& rope = ops[i];
    if (rope.plan.kind != OpKind::Rope || rope.skipped || rope.fused || uses[rope.args[3]] != 2) continue;
    const EValue* rotated = rope.args[3];
    auto touches_inputs = [&](const Op& op) {  // any tensor it names lies on the rope's inputs
      std::vector<const EValue*> named(op.args.begin(), op.args.end());
      named.push_back(op.result);
      if (op.fused) named.push_back(op.fused->out);
      for (const EValue* v : named) {
        if (v == nullptr || !v->is_tensor()) continue;
        for (int k = 0; k < 3; ++k) {
          if (v != rope.args[k] && overlaps(v, rope.args[k])) return true;
        }
      }
      return false;
    };
    size_t j = i + 1;
    bool clobbers = false;
    for (; j < ops.size() && std::find(ops[j].args.begin(), ops[j].args.end(), rotated) == ops[j].args.end(); ++j) {
      clobbers |= !ops[j].skipped && touches_inputs(ops[j]);
    }
    if (j == ops.size() || clobbers) continue;
    const Op& put = ops[j];
    if (put.plan.kind != OpKind::IndexPut || put.skipped || put.args.size() != 5 || put.args[2] != rotated ||
        put.args[0] == rotated || put.args[4]->to_tensor().scalar_type() != rotated->to_tensor().scalar_type()) {
      continue;
    }
    rope.put = put.args;
    std::swap(ops[i], ops[j]);
    ops[i].skipped = true;  // the index_put, which the rope now at its place does
  }
}

// Whether `v` is one row per (batch, head) of a decode step: [batch, heads, 1, dim], its rows contiguous.
bool step_rows(const EValue* v, int64_t batch, int64_t heads, int64_t dim, runtime::ScalarType type) {
  if (!v->is_tensor()) return false;
  const Tensor& t = v->to_tensor();
  return t.scalar_type() == type && t.dim() == 4 && t.size(0) == batch && t.size(1) == heads && t.size(2) == 1 &&
         t.size(3) == dim && (dim == 1 || t.strides()[3] == 1);
}

// The index tensor of an index_put into a decode step's cache [batch, heads, positions, dim] in place:
// one position, indexing the third dimension; null for any other put.
const EValue* step_position(Span<EValue* const> put) {
  const Tensor &self = put[0]->to_tensor(), &out = put[4]->to_tensor();
  if (self.dim() != 4 || self.const_data_ptr() != out.const_data_ptr() || !put[3]->is_bool() || put[3]->to_bool()) {
    return nullptr;
  }
  Indexing ix;
  const auto items = put[1]->to_tensor_list();
  if (indexing(items, 4, "index_put", &ix) != Error::Ok || ix.lead != 2 || ix.count != 1) return nullptr;
  const EValue* position = items[2];
  return position->to_tensor().numel() == 1 ? position : nullptr;
}

// A decode step's rope of q, and the puts of its new key (a rope_put: fuse_rope_puts) and value rows
// into the static caches attention reads, run in the attention kernel (launch_attention's
// AttentionStep): three launches fewer per layer. Between the first of them and attention, only
// skipped ops may lie; the rotated q is read by attention alone.
void fuse_attention_steps(std::vector<Op>& ops, runtime::Method& m) {
  Uses uses = count_uses(ops, m);
  std::unordered_map<const EValue*, size_t> writer;  // what each running op writes
  for (size_t j = 0; j < ops.size(); ++j) {
    if (ops[j].skipped) continue;
    writer[ops[j].put.empty() ? ops[j].args[ops[j].args.size() - 1] : ops[j].put[4]] = j;
    if (ops[j].result != nullptr) writer[ops[j].result] = j;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    Op& att = ops[i];
    if (att.plan.kind != OpKind::Attention || att.skipped || att.step || att.attention_src[0] || att.attention_src[1] ||
        att.attention_src[2]) {
      continue;
    }
    const AttentionShape shape = attention_shape(att);
    if (!attention_takes_step(shape)) continue;
    auto written_by = [&](const EValue* v) {
      const auto w = writer.find(v);
      return w == writer.end() || w->second >= i ? ops.size() : w->second;
    };
    const size_t qi = written_by(att.args[0]), ki = written_by(att.args[1]), vi = written_by(att.args[2]);
    if (qi == ops.size() || ki == ops.size() || vi == ops.size()) continue;
    Op &q_rope = ops[qi], &k_rope = ops[ki], &v_put = ops[vi];
    if (q_rope.plan.kind != OpKind::Rope || !q_rope.put.empty() || uses[att.args[0]] != 2 ||
        k_rope.plan.kind != OpKind::Rope || k_rope.put.empty() || v_put.plan.kind != OpKind::IndexPut ||
        v_put.args.size() != 5 || k_rope.args[1] != q_rope.args[1] || k_rope.args[2] != q_rope.args[2]) {
      continue;
    }
    const runtime::ScalarType type = att.plan.dtype;
    const EValue* position = step_position(k_rope.put);
    const EValue* v_position = step_position(v_put.args);
    if (position == nullptr || v_position == nullptr ||
        position->to_tensor().const_data_ptr() != v_position->to_tensor().const_data_ptr() ||
        !step_rows(q_rope.args[0], shape.batch, shape.q_heads, shape.head_dim, type) ||
        !step_rows(k_rope.args[0], shape.batch, shape.kv_heads, shape.head_dim, type) ||
        !step_rows(v_put.args[2], shape.batch, shape.kv_heads, shape.value_dim, type)) {
      continue;
    }
    bool tables = true;  // cos and sin: the position's row, contiguous
    for (int t = 1; t < 3; ++t) {
      const Tensor& table = q_rope.args[t]->to_tensor();
      tables &= table.scalar_type() == type && table.numel() == shape.head_dim && table.strides()[table.dim() - 1] == 1;
    }
    bool alone = tables;
    for (size_t j = std::min({qi, ki, vi}) + 1; j < i && alone; ++j) {
      alone = ops[j].skipped || j == qi || j == ki || j == vi;
    }
    if (!alone) continue;
    att.step.reset(new Op::Step{q_rope.args[0], q_rope.args[1], q_rope.args[2], k_rope.args[0], v_put.args[2],
                                const_cast<EValue*>(position)});
    q_rope.skipped = k_rope.skipped = v_put.skipped = true;
  }
}

// The strides of `sizes` (dim of them) viewing the strided tensor (old_sizes, old_strides), as a
// reshape that copies nothing would give them; false where no strides do (the view needs a copy).
bool view_strides(const int64_t* old_sizes, const int64_t* old_strides, int old_dim, const int64_t* sizes, int dim,
                  int64_t* strides) {
  // Runs of old dimensions that are contiguous with each other split or merge freely.
  int d_new = dim - 1;
  int64_t base = old_dim > 0 ? old_strides[old_dim - 1] : 1, old_numel = 1, new_numel = 1;
  for (int d = old_dim - 1; d >= 0; --d) {
    old_numel *= old_sizes[d];
    if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != old_numel * base)) {
      while (d_new >= 0 && (new_numel < old_numel || sizes[d_new] == 1)) {
        strides[d_new] = new_numel * base;
        new_numel *= sizes[d_new--];
      }
      if (new_numel != old_numel) return false;
      if (d > 0) base = old_strides[d - 1], old_numel = 1, new_numel = 1;
    }
  }
  for (; d_new >= 0; --d_new) strides[d_new] = 0;  // trailing size-1 dimensions
  return true;
}

// Whether every index tensor of a planned index.Tensor is a constant of the payload (its bytes on
// the host in `host_constants`) with every entry inside its dimension: checked once at init, so
// such an op needs no check on the device, nor the wait for its answer after each execute.
bool constant_indices_in_range(const Op& op, const std::unordered_map<const EValue*, const void*>& host_constants) {
  const Tensor& x = op.args[0]->to_tensor();
  const auto items = op.args[1]->to_tensor_list();
  for (size_t d = 0; d < items.size(); ++d) {
    const auto found = host_constants.find(items[d]);
    if (found == host_constants.end()) return false;
    const Tensor& t = items[d]->to_tensor();
    const bool int32 = t.scalar_type() == runtime::ScalarType::Int;  // else int64 (plan_op checked)
    const int64_t size = x.size(static_cast<int>(d));
    for (int64_t j = 0; j < t.numel(); ++j) {
      const int64_t v =
          int32 ? static_cast<const int32_t*>(found->second)[j] : static_cast<const int64_t*>(found->second)[j];
      if (v < -size || v >= size) return false;
    }
  }
  return true;
}

// Attention reads q, k and v at any strides, so a permute whose copy only attention reads (through
// views that lie in place) need not run: attention reads the permute's input instead. Its input
// must survive until then: no op in between touches its bytes, and an attention output planned on
// them moves to a buffer of its own. Saves multi-head attention's copies into [batch, heads, len, dim].
Error read_permutes_in_place(std::vector<Op>& ops, runtime::Method& m) {
  Uses uses = count_uses(ops, m);
  // Each value's writer: the op whose last argument it is.
  std::unordered_map<const EValue*, size_t> writer;
  for (size_t j = 0; j < ops.size(); ++j) writer[ops[j].args[ops[j].args.size() - 1]] = j;
  auto touches = [&](const Op& op, const EValue* v) {  // reads or writes v's bytes
    for (const EValue* a : op.args) {
      if (a->is_tensor() && overlaps(a, v)) return true;
    }
    return (op.result && overlaps(op.result, v)) || (op.residual && overlaps(op.residual, v));
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    Op& att = ops[i];
    if (att.plan.kind != OpKind::Attention || att.skipped) continue;
    for (int idx = 0; idx < 3; ++idx) {
      const Tensor& arg = att.args[idx]->to_tensor();
      if (arg.dim() != 4) continue;
      // Back through the views to the permute.
      const EValue* v = att.args[idx];
      size_t j = 0;
      bool found = false;
      while (uses[v] == 2) {
        auto w = writer.find(v);
        if (w == writer.end() || w->second >= i) break;
        j = w->second;
        if (ops[j].skipped && (ops[j].plan.kind == OpKind::Copy || ops[j].plan.kind == OpKind::Permute)) {
          v = ops[j].args[0];
          continue;
        }
        found = ops[j].plan.kind == OpKind::Permute && !ops[j].skipped;
        break;
      }
      if (!found) continue;
      const Op& perm = ops[j];
      const EValue* source = perm.args[0];
      const Tensor& x = source->to_tensor();
      const Tensor& o = perm.args[2]->to_tensor();
      const auto dims = perm.args[1]->to_int_list();
      if (x.dim() > kMaxOpDims || static_cast<int>(dims.size()) != x.dim()) continue;
      int64_t p_strides[kMaxOpDims], strides[4];
      for (int d = 0; d < x.dim(); ++d) p_strides[d] = x.strides()[dims[d] < 0 ? dims[d] + x.dim() : dims[d]];
      if (!view_strides(o.sizes(), p_strides, o.dim(), arg.sizes(), 4, strides) ||
          (arg.size(3) > 1 && strides[3] != 1)) {
        continue;
      }
      bool safe = true;
      for (size_t k = j + 1; k < i && safe; ++k) safe = ops[k].skipped || !touches(ops[k], source);
      if (!safe) continue;
      EValue* out = att.args[8];
      if (overlaps(out, source)) {
        // The output moves where nothing else reads it in place: only ops that copy read it.
        // (no view lying in place on it, no shim tensor made on its bytes at init, not a result).
        bool movable = true;
        for (size_t k = 0; k < m.num_outputs() && movable; ++k) movable = &m.get_output(k) != out;
        for (const Op& r : ops) {
          if ((r.skipped || !r.shim.empty()) && std::find(r.args.begin(), r.args.end(), out) != r.args.end()) {
            movable = false;
          }
        }
        if (!movable) continue;
        Tensor& t = out->to_tensor();
        att.scratch.emplace_back();
        ET_TRY(ecuda::to_error(cudaMalloc(ecuda::out(att.scratch.back()), t.nbytes() ? t.nbytes() : 1),
                               "CudaBackend: attention output"));
        t.set_data(att.scratch.back().get());
      }
      att.attention_src[idx] = source;
      std::copy(strides, strides + 3, att.attention_strides[idx]);
      ops[j].skipped = true;
    }
  }
  return Error::Ok;
}

// Attention writes its output at any strides, so a permute that is its output's one reader (multi-
// head attention's [batch, heads, len, dim] back to [batch, len, heads, dim]) need not run:
// attention writes the permute's output instead. Only skipped ops lie in between, and those bytes
// may not overlap what attention reads.
void write_permutes_in_place(std::vector<Op>& ops, runtime::Method& m) {
  Uses uses = count_uses(ops, m);
  for (size_t i = 0; i + 1 < ops.size(); ++i) {
    Op& att = ops[i];
    if (att.plan.kind != OpKind::Attention || att.skipped || att.result != nullptr || uses[att.args[8]] != 2) continue;
    size_t j = i + 1;
    while (j < ops.size() && ops[j].skipped) ++j;  // ops fused away before it run nothing
    if (j >= ops.size()) continue;
    Op& perm = ops[j];
    if (perm.plan.kind != OpKind::Permute || perm.args[0] != att.args[8]) continue;
    const Tensor& x = att.args[8]->to_tensor();
    const Tensor& o = perm.args[2]->to_tensor();
    const auto dims = perm.args[1]->to_int_list();
    if (x.dim() != 4 || o.dim() != 4 || dims.size() != 4) continue;
    int64_t strides[4] = {};  // of x's dimensions in o
    for (int d = 0; d < 4; ++d) {
      const int64_t p = dims[d] < 0 ? dims[d] + 4 : dims[d];
      if (p < 0 || p >= 4) break;
      strides[p] = o.strides()[d];
    }
    if (x.size(3) > 1 && strides[3] != 1) continue;
    bool safe = true;  // what attention reads: q, k and v (or their sources) and the mask
    for (int k = 0; k < 4 && safe; ++k) {
      const EValue* read = k < 3 && att.attention_src[k] ? att.attention_src[k] : att.args[k];
      safe = !read->is_tensor() || !overlaps(perm.args[2], read);
    }
    if (!safe) continue;
    att.result = perm.args[2];
    std::copy(strides, strides + 3, att.attention_out_strides);
    perm.skipped = true;
  }
}

// Runs of elementwise ops (unary, and binary on tensors or a scalar) over one output shape, each
// reading a value an earlier one of the run computed, become one pass: GPT-2's GELU, written as
// eight multiplies, adds, a power and a tanh, reads its input once and writes once. A run keeps
// only values read by nothing after it (its last output aside), at most kMaxFusedInputs tensors
// from outside (broadcast as the ops would), and an output apart from those inputs' bytes.
void fuse_elementwise(std::vector<Op>& ops, runtime::Method& m) {
  Uses uses = count_uses(ops, m);
  auto elementwise = [](const Op& op) {
    return !op.skipped && !op.nhwc && !op.fused && (op.plan.kind == OpKind::Unary || op.plan.kind == OpKind::Binary);
  };
  auto output = [](const Op& op) { return op.args[op.args.size() - 1]; };
  // An operand: a member's output (internal, by member index) or an outside tensor.
  struct Operand {
    bool internal;
    int index;  // member, or outside input
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!elementwise(ops[i])) continue;
    const Tensor& shape = output(ops[i])->to_tensor();
    std::vector<size_t> members;
    std::vector<const EValue*> outside;
    std::vector<std::pair<Operand, Operand>> reads;  // per member: a, b (b.index -1: scalar)
    std::unordered_map<const EValue*, int> internal;
    std::unordered_map<const EValue*, int> reads_inside;
    size_t best = 0;  // members in the longest valid run
    size_t best_outside = 0;
    for (size_t j = i; j < ops.size() && members.size() < static_cast<size_t>(kMaxFusedSteps); ++j) {
      const Op& op = ops[j];
      // A view planned in place (no kernel: a column slice of joined products, say) is passed over,
      // unless it views a member's output, which the run keeps in registers only.
      if (j > i && op.skipped && !op.fused && lies_in_place(op)) {
        if (internal.count(op.args[0])) break;
        continue;
      }
      if (!elementwise(op) || op.plan.dtype != ops[i].plan.dtype) break;
      const Tensor& o = output(op)->to_tensor();
      if (!runtime::same_shape(o, shape) || internal.count(output(op))) break;
      const bool binary = op.plan.kind == OpKind::Binary;
      const EValue* operands[2] = {op.args[0], binary && op.args[1]->is_tensor() ? op.args[1] : nullptr};
      Operand got[2] = {{false, -1}, {false, -1}};
      bool connected = j == i, fits = true;
      for (int t = 0; t < 2 && fits; ++t) {
        const EValue* v = operands[t];
        if (v == nullptr) continue;
        if (auto it = internal.find(v); it != internal.end()) {
          got[t] = {true, it->second};
          connected = true;
          continue;
        }
        int64_t strides[kMaxOpDims];
        if (!v->is_tensor() || !broadcast_strides(v->to_tensor(), shape.dim(), shape.sizes(), strides) ||
            v->to_tensor().scalar_type() != shape.scalar_type()) {
          fits = false;
          break;
        }
        auto at = std::find(outside.begin(), outside.end(), v);
        if (at == outside.end()) {
          if (outside.size() == static_cast<size_t>(kMaxFusedInputs)) fits = false;
          at = outside.insert(outside.end(), v);
        }
        got[t] = {false, static_cast<int>(at - outside.begin())};
      }
      if (!fits || !connected) break;
      internal[output(op)] = static_cast<int>(members.size());
      members.push_back(j);
      reads.push_back({got[0], got[1]});
      for (int t = 0; t < 2; ++t) {
        if (got[t].internal) ++reads_inside[operands[t]];
      }
      // Valid so far: every member's output but the last is read by members only (once written).
      bool valid = members.size() >= 2;
      for (size_t k = 0; k + 1 < members.size() && valid; ++k) {
        const EValue* v = output(ops[members[k]]);
        valid = uses[v] == 1 + reads_inside[v];
      }
      for (const EValue* v : outside) {  // written in place only over the same elements
        const EValue* o = output(op);
        if (valid && overlaps(o, v))
          valid = !overlaps_shifted(o, v) && runtime::same_shape(o->to_tensor(), v->to_tensor());
      }
      if (valid) best = members.size(), best_outside = outside.size();
    }
    if (best == 0) continue;
    // Outside inputs past the run's end are not read by it; their indices are the last ones.
    auto f = std::make_unique<Op::Fused>();
    f->program.inputs = static_cast<int>(best_outside);
    f->program.steps = static_cast<int>(best);
    f->out = output(ops[members[best - 1]]);
    const Tensor& out = f->out->to_tensor();
    for (size_t k = 0; k < best_outside; ++k) {
      f->inputs[k] = const_cast<EValue*>(outside[k]);
      broadcast_strides(outside[k]->to_tensor(), out.dim(), out.sizes(), f->strides[k]);
    }
    const int base = static_cast<int>(best_outside);
    auto reg = [&](const Operand& o) { return static_cast<int8_t>(o.internal ? base + o.index : o.index); };
    for (size_t k = 0; k < best; ++k) {
      const Op& op = ops[members[k]];
      FusedStep& step = f->program.step[k];
      step.binary = op.plan.kind == OpKind::Binary;
      step.unary = op.plan.unary;
      step.op = op.plan.binary;
      step.p0 = op.plan.scalars[0], step.p1 = op.plan.scalars[1];
      step.a = reg(reads[k].first);
      step.b = reads[k].second.index < 0 ? -1 : reg(reads[k].second);
      step.scalar = step.binary && !op.args[1]->is_tensor() ? static_cast<float>(op.args[1]->scalar_as_double()) : 0.f;
      step.alpha = step.binary && op.args.size() == 4 ? static_cast<float>(op.args[2]->scalar_as_double()) : 1.f;
      f->label += (k ? "+" : "") + op.name;
    }
    ops[members[0]].fused = std::move(f);
    for (size_t k = 1; k < best; ++k) ops[members[k]].skipped = true;
    i = members[best - 1];
  }
}

// Whether `op` can run on NHWC tensors: cuDNN's convolutions, elementwise ops, 2-D pooling (max
// pooling when nothing reads its indices, which NHWC pooling leaves unwritten) and means over pixels.
bool takes_nhwc(const Op& op, Uses& uses) {
  const auto& a = op.args;
  switch (op.plan.kind) {
    case OpKind::Conv:  // in half precision, where tensor cores read NHWC
      return a[0]->to_tensor().dim() == 4 && op.plan.dtype != runtime::ScalarType::Float;
    case OpKind::AvgPool:
    case OpKind::AdaptiveAvgPool: return a[0]->to_tensor().dim() == 4;
    case OpKind::MaxPool: return a[0]->to_tensor().dim() == 4 && uses[a[7]] == 1;
    case OpKind::RowReduce: {  // over the pixels of each channel
      const Tensor& x = a[0]->to_tensor();
      return x.dim() == 4 && a[a.size() - 1]->to_tensor().numel() == x.size(0) * x.size(1);
    }
    case OpKind::Unary: return true;
    case OpKind::Binary: return a[a.size() - 1]->to_tensor().dim() == 4;
    default: return false;
  }
}

// Chooses NHWC for the tensors between convolutions wherever every op touching them takes it:
// cuDNN's tensor-core convolutions read NHWC, and on NCHW they transpose each way. Tensors joined
// by such ops form groups (a convolution does not join its input and output: it converts a
// differing input); a group is NHWC when it holds a convolution's output and none of its tensors
// is a delegate input or output, a constant, an argument of another op (a view, a layer norm) or
// in `nchw`.
void choose_layouts(std::vector<Op>& ops, runtime::Method& m, const std::unordered_set<const EValue*>& nchw) {
  std::unordered_map<const EValue*, const EValue*> parent;
  auto root = [&](const EValue* v) {
    for (auto it = parent.find(v); it != parent.end() && it->second != v; it = parent.find(v)) v = it->second;
    return v;
  };
  std::unordered_set<const EValue*> kept = nchw, produced;  // kept NCHW; convolution outputs
  Uses uses = count_uses(ops, m);
  for (Op& op : ops) {
    const bool conv = op.plan.kind == OpKind::Conv;
    std::vector<const EValue*> touched;
    if (conv) {
      touched.push_back(op.args[9]);  // its input converts; its weight is OIHW or a copy
    } else {
      for (const EValue* v : op.args) {
        if (v->is_tensor_list()) {
          for (const EValue* t : v->to_tensor_list()) touched.push_back(t);
        } else {
          touched.push_back(v);
        }
      }
    }
    const bool flexible = takes_nhwc(op, uses);
    const EValue* first = nullptr;
    for (const EValue* v : touched) {
      if (!spatial(v)) continue;
      if (!flexible) {
        kept.insert(v);
      } else if (first == nullptr) {
        first = v;
      } else if (root(v) != root(first)) {
        parent[root(v)] = root(first);
      }
    }
    if (conv && flexible && spatial(op.args[9])) produced.insert(op.args[9]);
  }
  for (size_t i = 0; i < m.num_inputs(); ++i) kept.insert(&m.input(i));
  for (size_t i = 0; i < m.num_outputs(); ++i) kept.insert(&m.get_output(i));
  for (size_t i = 0; i < m.num_values(); ++i) {
    if (m.value_memory(i) == runtime::Method::Memory::Constant) kept.insert(&m.value(i));
  }
  std::unordered_set<const EValue*> kept_groups, conv_groups;
  for (const EValue* v : kept) kept_groups.insert(root(v));
  for (const EValue* v : produced) conv_groups.insert(root(v));
  auto nhwc = [&](const EValue* v) { return spatial(v) && conv_groups.count(root(v)) && !kept_groups.count(root(v)); };
  for (Op& op : ops) {
    const auto& a = op.args;
    op.nhwc = op.x_nhwc = false;
    if (!takes_nhwc(op, uses)) continue;
    switch (op.plan.kind) {
      case OpKind::Conv:
        op.nhwc = nhwc(a[9]);
        op.x_nhwc = nhwc(a[0]);
        break;
      case OpKind::Unary:
      case OpKind::Binary: op.nhwc = nhwc(a[a.size() - 1]); break;
      default:  // pooling and means: by the input (the output may be one pixel per channel)
        op.nhwc = nhwc(a[0]);
        break;
    }
  }
}

// A convolution's buffers for its layouts: its input converted where that differs from its
// output's, its weight as OHWI for NHWC (permuted once, here).
Error prepare_layouts(Op& op) {
  const Tensor& x = op.args[0]->to_tensor();
  if (op.x_nhwc != op.nhwc && spatial(op.args[0])) {  // (otherwise the same bytes in both)
    ET_TRY(ecuda::to_error(cudaMalloc(out(op.layout_x), x.nbytes() + 4), "CudaBackend: layout conversion"));
  }
  if (!op.nhwc) return Error::Ok;
  const Tensor& w = op.args[1]->to_tensor();
  const int64_t k = w.size(0), c = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t sizes[4] = {k, kh, kw, c}, strides[4] = {c * kh * kw, kw, 1, kh * kw};
  ET_TRY(ecuda::to_error(cudaMalloc(out(op.layout_w), w.nbytes() + 4), "CudaBackend: NHWC weight"));
  ET_TRY(ecuda::to_error(launch_strided_copy(w.const_data_ptr(), op.layout_w.get(), 4, sizes, strides, w.numel(),
                                             static_cast<int>(w.element_size()), nullptr),
                         "CudaBackend: NHWC weight"));
  return ecuda::to_error(cudaDeviceSynchronize(), "CudaBackend: NHWC weight");
}

// EXECUTORCH_CUDA_LAYOUT=nchw keeps every tensor NCHW.
bool layouts_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("EXECUTORCH_CUDA_LAYOUT");
    return v == nullptr || std::strcmp(v, "nchw") != 0;
  }();
  return enabled;
}

// cuDNN's workspace bound per convolution.
constexpr size_t kCudnnWorkspaceBytes = size_t{256} << 20;

// A Conv or Conv3d plan as cuDNN's geometry.
ConvGeometry conv_geometry(const OpPlan& plan) {
  const int64_t *v = plan.ints, *z = plan.depth;
  ConvGeometry g{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15]};
  if (plan.kind == OpKind::Conv3d) {
    g.volumetric = true;
    g.d = z[0], g.kd = z[1], g.sd = z[2], g.pd = z[3], g.dd = z[4], g.od = z[5];
  }
  return g;
}

cudaDataType cudnn_type(runtime::ScalarType t) {
  return t == runtime::ScalarType::Half ? CUDA_R_16F : t == runtime::ScalarType::BFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

// Grows the delegate's shared workspace to `bytes`; false where the device is out of memory (the
// workspace is then unchanged).
bool grow_workspace(size_t bytes, DeviceBuffer& workspace, size_t& workspace_bytes) {
  if (bytes <= workspace_bytes) return true;
  DeviceBuffer grown;
  if (cudaMalloc(out(grown), bytes) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  workspace = std::move(grown);
  workspace_bytes = bytes;
  return true;
}

// Grows the delegate's shared cuDNN workspace to `conv`'s need; false where the device is out of memory.
bool fit_workspace(const CudnnConv& conv, DeviceBuffer& workspace, size_t& workspace_bytes) {
  return grow_workspace(conv.workspace_bytes(), workspace, workspace_bytes);
}

// A convolution through cuDNN where it loads and takes it; false keeps the built-in im2col + GEMM.
// Fused: cuDNN computes bias, residual and relu too, which needs a bias and an output apart from
// the input. Each plan is run once here, so a configuration cuDNN refuses falls back at init.
bool plan_cudnn(Op& op, bool tf32, DeviceBuffer& workspace, size_t& workspace_bytes) {
  // NCHW depthwise convolutions run the built-in kernel.
  if ((op.plan.kind == OpKind::Conv && is_depthwise(op.plan) && !op.nhwc) || !cudnn_available()) return false;
  const auto& a = op.args;
  const ConvGeometry g = conv_geometry(op.plan);
  const cudaDataType type = cudnn_type(op.plan.dtype);
  const bool relu = op.activation && op.activation->plan.unary == Unary::Relu;
  for (const bool fused : {a[2]->is_tensor() && relu && (op.layout_x.get() || !overlaps(op.result, a[0])), false}) {
    auto conv = std::make_unique<CudnnConv>();
    EValue* y = fused ? op.result : a[9];
    if (conv->plan(g, type, tf32, fused, op.nhwc, kCudnnWorkspaceBytes) != nullptr ||
        !fit_workspace(*conv, workspace, workspace_bytes)) {
      continue;
    }
    const bool ran =
        conv->run(conv_input(op), op.nhwc ? op.layout_w.get() : bytes(a[1]), fused ? bytes(a[2]) : nullptr,
                  fused && op.residual ? bytes(op.residual) : nullptr, bytes(y), workspace.get(), nullptr) == nullptr &&
        cudaDeviceSynchronize() == cudaSuccess;
    cudaGetLastError();
    if (!ran) continue;
    op.cudnn = std::move(conv);
    op.cudnn_fused = fused;
    return true;
  }
  return false;
}

// A 3-D convolution, which only cuDNN runs here: planned once (with its epilogue where cuDNN
// fuses it), its workspace shared; an error naming cuDNN's reason where it takes none.
Error prepare_conv3d(Op& op, bool tf32, DeviceBuffer& workspace, size_t& workspace_bytes) {
  ET_CHECK_OR_RETURN(cudnn_available(), Error::NotSupported, "%s %s: 3-D convolution needs cuDNN, which is missing: %s",
                     kCudaBackendName, op.name.c_str(), cudnn_unavailable_reason());
  if (plan_cudnn(op, tf32, workspace, workspace_bytes)) return Error::Ok;
  auto conv = std::make_unique<CudnnConv>();
  if (const char* e =
          conv->plan(conv_geometry(op.plan), cudnn_type(op.plan.dtype), tf32, false, false, kCudnnWorkspaceBytes)) {
    return ET_ERROR(Error::NotSupported, "%s %s: %s", kCudaBackendName, op.name.c_str(), e);
  }
  return ET_ERROR(Error::MemoryAllocationFailed,
                  "%s %s: cuDNN plans it but it did not run (out of device memory for its %zu-byte workspace?)",
                  kCudaBackendName, op.name.c_str(), conv->workspace_bytes());
}

// EXECUTORCH_CUDA_CONV=cudnn: cuDNN for every convolution it plans, untimed.
bool cudnn_forced() {
  static const bool forced = [] {
    const char* v = std::getenv("EXECUTORCH_CUDA_CONV");
    return v != nullptr && std::strcmp(v, "cudnn") == 0;
  }();
  return forced;
}

// Milliseconds of one run of `op` on `stream`, or infinity where it fails.
float time_op(const Op& op, cudaStream_t stream, cudaEvent_t start, cudaEvent_t end) {
  float ms = INFINITY;
  if (cudaEventRecord(start, stream) != cudaSuccess || run(op, nullptr, stream) != Error::Ok ||
      cudaEventRecord(end, stream) != cudaSuccess || cudaEventSynchronize(end) != cudaSuccess ||
      cudaEventElapsedTime(&ms, start, end) != cudaSuccess) {
    cudaGetLastError();
    return INFINITY;
  }
  return ms;
}

// A convolution prepared both ways (cuDNN, and im2col + GEMM) keeps the one that runs faster here:
// cuDNN wins on large batches, the GEMM on some small and 1x1 ones (cuDNN transposes NCHW
// half-precision tensors for its tensor-core kernels). The two alternate, so that clocks rising
// during the measurement favour neither; the first round (loading kernels) is not counted.
void keep_faster_conv(Op& op, cudaStream_t stream) {
  ecuda::StreamGuard on_stream(stream);  // the GEMM runs through the shims, on the current stream
  ecuda::Event start, end;
  float best[2] = {INFINITY, INFINITY};  // cuDNN, built-in
  std::unique_ptr<CudnnConv> cudnn = std::move(op.cudnn);
  if (cudaEventCreate(out(start)) == cudaSuccess && cudaEventCreate(out(end)) == cudaSuccess) {
    for (int round = 0; round < 6; ++round) {
      for (int way = 0; way < 2; ++way) {
        if (way == 0) op.cudnn = std::move(cudnn);
        const float ms = time_op(op, stream, start.get(), end.get());
        if (way == 0) cudnn = std::move(op.cudnn);
        if (round > 0) best[way] = std::min(best[way], ms);
      }
    }
  }
  if (best[0] <= best[1]) {
    op.cudnn = std::move(cudnn);
    op.shim.clear();
    op.scratch.clear();
  }
}

// Whether the GEMV can compute `op`: an mm, or an addmm adding a bias row once, of at most
// kGemvMaxRows rows in float or half precision, whose weight is a constant that nothing else reads
// (choose_gemvs lays it out anew), writing where none of its operands lie.
bool gemv_eligible(const Op& op, const std::unordered_map<const EValue*, const void*>& constants, Uses& uses) {
  const auto& a = op.args;
  const bool addmm = op.plan.kind == OpKind::Addmm;
  if (op.skipped || op.fused || !(addmm || op.plan.kind == OpKind::Mm) ||
      (addmm && (!a[0]->is_tensor() || a[3]->scalar_as_double() != 1.0 || a[4]->scalar_as_double() != 1.0))) {
    return false;
  }
  const GemvOperands o = gemv_operands(op);
  const Tensor& x = o.x->to_tensor();
  const Tensor& w = o.w->to_tensor();
  const runtime::ScalarType t = op.plan.dtype;
  if (!constants.count(o.w) || uses[o.w] != 1 || x.dim() != 2 || w.dim() != 2 || x.size(1) != w.size(0) ||
      x.scalar_type() != t || w.scalar_type() != t || reinterpret_cast<uintptr_t>(w.const_data_ptr()) % 16 != 0 ||
      !gemv_supported(o.rows, o.n, o.k, static_cast<int>(runtime::element_size(t)), GemvWeights::Dense, 0,
                      GemvPrologue::None, GemvEpilogue::None) ||
      (o.bias && o.bias->to_tensor().numel() != w.size(1)) || o.y->to_tensor().numel() != x.size(0) * w.size(1)) {
    return false;
  }
  return !overlaps(o.y, o.x) && !overlaps(o.y, o.w) && !(o.bias && overlaps(o.y, o.bias));
}

// EXECUTORCH_CUDA_GEMV=always gives every eligible product to the GEMV untimed, =never keeps cuBLAS
// for all; otherwise each is timed. Read at each init.
enum class GemvChoice { Timed, Always, Never };
GemvChoice gemv_choice() {
  const char* v = std::getenv("EXECUTORCH_CUDA_GEMV");
  if (v != nullptr && std::strcmp(v, "always") == 0) return GemvChoice::Always;
  if (v != nullptr && std::strcmp(v, "never") == 0) return GemvChoice::Never;
  return GemvChoice::Timed;
}

// The weight of a product the GEMV takes, turned between cuBLAS's [k, n] and the GEMV's [n, k] in
// place (through a buffer of its size). MemoryAllocationFailed, with the weight as it was, where
// the device has no room for that buffer.
Error relayout_weight(const Op& op, bool for_gemv, cudaStream_t stream) {
  const Tensor& w = gemv_operands(op).w->to_tensor();
  const int64_t k = w.size(0), n = w.size(1);
  DeviceBuffer staged;
  if (cudaMalloc(out(staged), w.nbytes()) != cudaSuccess) {
    cudaGetLastError();
    return Error::MemoryAllocationFailed;
  }
  // The transpose of [k, n] (for the GEMV) or of [n, k] (back), as a strided read.
  const int64_t sizes[2] = {for_gemv ? n : k, for_gemv ? k : n}, strides[2] = {1, sizes[0]};
  ET_TRY(ecuda::to_error(launch_strided_copy(w.const_data_ptr(), staged.get(), 2, sizes, strides, w.numel(),
                                             static_cast<int>(w.element_size()), stream),
                         "CudaBackend: GEMV weight layout"));
  ET_TRY(
      ecuda::to_error(cudaMemcpyAsync(w.mutable_data_ptr(), staged.get(), w.nbytes(), cudaMemcpyDeviceToDevice, stream),
                      "CudaBackend: GEMV weight layout"));
  return ecuda::to_error(cudaStreamSynchronize(stream), "CudaBackend: GEMV weight layout");
}

// Products of a few rows (decode steps) that the built-in GEMV computes faster than cuBLAS here:
// each eligible one runs through cuBLAS, then (its weight laid out anew) through the GEMV, and keeps
// the faster (the weight laid out back for cuBLAS). Each way runs six times; the first run (loading
// kernels) is not counted.
Error choose_gemvs(std::vector<Op>& ops, runtime::Method& m,
                   const std::unordered_map<const EValue*, const void*>& constants, cudaStream_t stream) {
  const GemvChoice choice = gemv_choice();
  if (choice == GemvChoice::Never) return Error::Ok;
  Uses uses = count_uses(ops, m);
  ecuda::StreamGuard on_stream(stream);  // cuBLAS runs through the shims, on the current stream
  ecuda::Event start, end;
  if (choice == GemvChoice::Timed &&
      (cudaEventCreate(out(start)) != cudaSuccess || cudaEventCreate(out(end)) != cudaSuccess)) {
    cudaGetLastError();
    return Error::Ok;
  }
  auto best_of = [&](Op& op) {
    float best = INFINITY;
    for (int round = 0; round < 6; ++round) {
      const float ms = time_op(op, stream, start.get(), end.get());
      if (round > 0) best = std::min(best, ms);
    }
    return best;
  };
  for (Op& op : ops) {
    if (!gemv_eligible(op, constants, uses)) continue;
    const float cublas = choice == GemvChoice::Timed ? best_of(op) : INFINITY;
    if (const Error e = relayout_weight(op, true, stream); e != Error::Ok) {
      if (e == Error::MemoryAllocationFailed) continue;  // cuBLAS keeps it
      return e;
    }
    op.gemv = true;
    if (choice == GemvChoice::Always || best_of(op) <= cublas) continue;
    const Error back = relayout_weight(op, false, stream);
    if (back == Error::MemoryAllocationFailed) continue;  // laid out for the GEMV, which keeps it
    ET_TRY(back);
    op.gemv = false;
  }
  return Error::Ok;
}

// Weight-only int4 layers on the GEMV in 16-bit floats have their weights and scales laid out anew
// for its tensor-core form (launch_int4_tiles), in place, where the device has tensor cores for them,
// the shape whole tiles and nothing else reads those constants. Where device memory for the staging
// copy runs out, a layer keeps its layout and the GEMV's own loop.
Error tile_int4_weights(std::vector<Op>& ops, runtime::Method& m, cudaStream_t stream) {
  if (!gemv_tiles_available()) return Error::Ok;
  Uses uses = count_uses(ops, m);
  for (Op& op : ops) {
    if (op.plan.kind != OpKind::Int4Linear || !runs_gemv(op)) continue;
    const GemvOperands o = gemv_operands(op);
    if (uses[o.w] != 1 || uses[o.scales] != 1 ||
        !gemv_supported(o.rows, o.n, o.k, static_cast<int>(runtime::element_size(op.plan.dtype)),
                        GemvWeights::Int4Tiled, o.group, GemvPrologue::None, GemvEpilogue::None)) {
      continue;
    }
    Tensor& w = o.w->to_tensor();
    Tensor& scales = o.scales->to_tensor();
    DeviceBuffer staged;
    if (cudaMalloc(out(staged), w.nbytes() + scales.nbytes()) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    auto* w_staged = static_cast<uint8_t*>(staged.get());
    auto* scales_staged = reinterpret_cast<float*>(w_staged + w.nbytes());  // whole tiles: 16-byte aligned
    constexpr const char* kWhat = "CudaBackend: int4 weight tiles";
    ET_TRY(ecuda::to_error(cudaMemcpyAsync(w_staged, w.const_data_ptr(), w.nbytes(), cudaMemcpyDeviceToDevice, stream),
                           kWhat));
    ET_TRY(ecuda::to_error(
        cudaMemcpyAsync(scales_staged, scales.const_data_ptr(), scales.nbytes(), cudaMemcpyDeviceToDevice, stream),
        kWhat));
    ET_TRY(ecuda::to_error(launch_int4_tiles(w_staged, scales_staged, static_cast<uint8_t*>(w.mutable_data_ptr()),
                                             static_cast<float*>(scales.mutable_data_ptr()), o.n, o.k, o.group, stream),
                           kWhat));
    ET_TRY(ecuda::to_error(cudaStreamSynchronize(stream), kWhat));
    op.int4_tiled = true;
  }
  return Error::Ok;
}

// Where `v` (read by ops[i]) comes from, passing back over views of it planned in place that only
// this chain reads (slices and selects too where `slices`): the value reached and the instruction
// that writes it, or ops.size() where it is not found or another instruction runs in between (it
// might write what a folded instruction reads).
std::pair<const EValue*, size_t> source_of(const std::vector<Op>& ops, Uses& uses, size_t i, const EValue* v,
                                           bool slices) {
  for (size_t j = i; j-- > 0;) {
    const Op& op = ops[j];
    if (op.args[op.args.size() - 1] != v) {
      if (op.skipped && !op.fused) continue;  // runs nothing here
      break;
    }
    const bool view = op.skipped && !op.fused && lies_in_place(op) &&
                      (slices || (op.plan.kind != OpKind::Slice && op.plan.kind != OpKind::Select));
    if (!view) return {v, j};
    if (uses[v] != 2) break;
    v = op.args[0];
  }
  return {v, ops.size()};
}

// The instruction before ops[i] that computes `v` for it alone (see source_of), or ops.size().
size_t producer_of(const std::vector<Op>& ops, Uses& uses, size_t i, const EValue* v) {
  const auto [value, j] = source_of(ops, uses, i, v, false);
  return j < ops.size() && uses[value] == 2 && !ops[j].skipped && !ops[j].fused ? j : ops.size();
}

// The next instruction after ops[i] that runs, or ops.size().
size_t next_running(const std::vector<Op>& ops, size_t i) {
  size_t j = i + 1;
  while (j < ops.size() && ops[j].skipped && !ops[j].fused) ++j;
  return j;
}

// Folds into a GEMV the instructions next to it that only it reads from or writes for, with nothing
// else running in between: the RMS norm before each layer's attention and MLP products computes its
// x, and silu(gate) * up after the MLP's joined gate|up product (one row: gate and up its halves, in
// place) becomes its epilogue. Each saves a launch and a round trip through memory. Runs before
// fuse_elementwise, which would join silu and mul.
void fuse_gemv_neighbours(std::vector<Op>& ops, runtime::Method& m) {
  Uses uses = count_uses(ops, m);
  for (size_t i = 0; i < ops.size(); ++i) {
    Op& op = ops[i];
    if (!runs_gemv(op)) continue;
    const GemvOperands o = gemv_operands(op);
    const int64_t rows = o.rows, k = o.k, n = o.n;
    const runtime::ScalarType dtype = op.plan.dtype;
    const int size = static_cast<int>(runtime::element_size(dtype));
    auto fits = [&](const EValue* v, int64_t numel) {
      return v->is_tensor() && v->to_tensor().scalar_type() == dtype && v->to_tensor().numel() == numel;
    };
    std::vector<const EValue*> reads = {o.x, o.w};
    if (o.scales) reads.push_back(o.scales);
    if (const size_t j = producer_of(ops, uses, i, o.x); j < ops.size()) {
      Op& norm = ops[j];
      if (norm.plan.kind == OpKind::RmsNorm && norm.plan.ints[0] == rows && norm.plan.ints[1] == k &&
          fits(norm.args[0], rows * k) && fits(norm.args[1], k) && !overlaps(o.y, norm.args[0]) &&
          !overlaps(o.y, norm.args[1]) &&
          gemv_supported(rows, n, k, size, o.weights, o.group, GemvPrologue::RmsNorm, GemvEpilogue::None)) {
        op.prologue = GemvPrologue::RmsNorm;
        op.prologue_a = norm.args[0], op.prologue_b = norm.args[1], op.prologue_eps = norm.plan.scalars[0];
        norm.skipped = true;
        reads.insert(reads.end(), {norm.args[0], norm.args[1]});
      }
    }
    // silu(gu[:, :half]) * gu[:, half:] of the product gu, which nothing else reads.
    const EValue* gu = o.y;
    const int64_t half = n / 2;
    const size_t s = next_running(ops, i), p = s < ops.size() ? next_running(ops, s) : ops.size();
    if (rows != 1 || op.residual || o.bias || uses[gu] != 3 || p == ops.size() ||
        !gemv_supported(rows, n, k, size, o.weights, o.group, op.prologue, GemvEpilogue::SiluMul)) {
      continue;
    }
    Op& silu = ops[s];
    Op& mul = ops[p];
    if (silu.plan.kind != OpKind::Unary || silu.plan.unary != Unary::Silu || mul.plan.kind != OpKind::Binary ||
        mul.plan.binary != Binary::Mul || mul.args.size() != 3 || !fits(mul.args[2], half)) {
      continue;
    }
    const int side = producer_of(ops, uses, p, mul.args[0]) == s   ? 0
                     : producer_of(ops, uses, p, mul.args[1]) == s ? 1
                                                                   : -1;
    if (side < 0) continue;
    const auto gate = source_of(ops, uses, s, silu.args[0], true);
    silu.skipped = true;  // folded in below, it no longer runs between up and the mul
    const auto up = source_of(ops, uses, p, mul.args[1 - side], true);
    silu.skipped = false;
    const auto* base = static_cast<const uint8_t*>(gu->to_tensor().const_data_ptr());
    const Tensor& g = silu.args[0]->to_tensor();
    const Tensor& u = mul.args[1 - side]->to_tensor();
    if (gate.first != gu || up.first != gu || gate.second != i || up.second != i || !fits(silu.args[0], half) ||
        !fits(mul.args[1 - side], half) || g.const_data_ptr() != base ||
        u.const_data_ptr() != base + half * static_cast<int64_t>(u.element_size())) {
      continue;
    }
    bool apart = true;
    for (const EValue* v : reads) apart &= !overlaps(mul.args[2], v);
    if (!apart) continue;
    op.epilogue = GemvEpilogue::SiluMul;
    op.epilogue_out = mul.args[2];
    silu.skipped = mul.skipped = true;
  }
}

// An AOTInductor payload: checked against this device and torch release, its library loaded and
// its container given the method's tensors (constants already on the device). Its kernels run as
// the container launches them: no CUDA graph (the container allocates as it runs).
Error load_aoti_model(Delegate& d) {
  int device = 0, cc = 0;
  ET_TRY(current_device(&device, &cc));
  ET_TRY_ASSIGN(const AotiPayload payload, read_aoti_payload(*d.program, cc));
  char name[32];
  std::snprintf(name, sizeof(name), "cuda:%d", device);
  ET_TRY_ASSIGN(d.aoti, AotiModel::load(payload.library, payload.constant_names, *d.method, name));
  return Error::Ok;
}

class CudaBackend final : public runtime::BackendInterface {
 public:
  bool is_available() const override {
    int devices = 0;
    // No driver, no device, a driver older than the runtime, or a device this library has no code
    // for all mean "not here".
    return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0 && kernels_loadable() == cudaSuccess;
  }

  runtime::Result<runtime::DelegateHandle*> init(runtime::BackendInitContext& context, Span<const uint8_t> processed,
                                                 Span<const runtime::CompileSpec> specs) const override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      cudaGetLastError();
      return ET_ERROR(Error::DelegateInvalidCompatibility, "%s: no usable CUDA device", kCudaBackendName);
    }
    ET_TRY(check_archs(specs));
    ET_TRY_ASSIGN(const bool tf32, tf32_convolutions(specs));
    if (const cudaError_t e = kernels_loadable(); e != cudaSuccess) {
      cudaGetLastError();
      return ET_ERROR(Error::DelegateInvalidCompatibility, "%s: this build has no GPU code for the device (%s)",
                      kCudaBackendName, cudaGetErrorString(e));
    }
    auto d = std::unique_ptr<Delegate>(new (std::nothrow) Delegate());
    if (!d) return ET_ERROR(Error::MemoryAllocationFailed, "%s: out of host memory", kCudaBackendName);
    // The payload is a program of its own; loading it runs every check a .pte gets.
    ET_TRY_ASSIGN(auto loader, runtime::OwnedBufferDataLoader::copy_of(processed.data(), processed.size()));
    auto program = runtime::Program::load(std::move(loader));
    if (!program.ok()) return ET_ERROR_CONTEXT(program.error(), "%s payload", kCudaBackendName);
    d->program = std::move(program.get());
    const char* method_name = d->program->method_name(0);
    ET_TRY_ASSIGN(const auto sizes, d->program->planned_buffer_sizes(method_name));
    if (const Error e = runtime::check_planned_bytes(runtime::sum_saturating(sizes), "its device memory");
        e != Error::Ok) {
      return ET_ERROR_CONTEXT(e, "%s payload", kCudaBackendName);
    }
    for (uint64_t bytes : sizes) {
      DeviceBuffer b;
      ET_TRY(ecuda::to_error(cudaMalloc(out(b), bytes ? bytes : 1), "CudaBackend: planned device memory"));
      d->spans.emplace_back(static_cast<uint8_t*>(b.get()), static_cast<size_t>(bytes));
      d->buffers.push_back(std::move(b));
    }
    d->memory = std::make_unique<runtime::MemoryManager>(Span<Span<uint8_t>>(d->spans.data(), d->spans.size()));
    std::shared_ptr<runtime::ProgramState> state;  // null: the payload updates no buffers
    if (d->program->num_mutable_buffers() > 0) {
      ET_TRY_ASSIGN(state, device_state(*d->program, context.state));
    }
    auto method = d->program->load_method(method_name, d->memory.get(), std::move(state));
    if (!method.ok()) return ET_ERROR_CONTEXT(method.error(), "%s payload", kCudaBackendName);
    d->method = std::move(method.get());
    runtime::Method& m = *d->method;
    // Constants go to the device once; every tensor then lives there. Their host bytes stay with
    // the program, for the index checks below.
    std::unordered_map<const EValue*, const void*> host_constants;
    for (size_t i = 0; i < m.num_values(); ++i) {
      if (!m.value(i).is_tensor()) continue;
      Tensor& t = m.value(i).to_tensor();
      if (m.value_memory(i) == runtime::Method::Memory::Constant) {
        DeviceBuffer b;
        ET_TRY(ecuda::to_error(cudaMalloc(out(b), t.nbytes() ? t.nbytes() : 1), "CudaBackend: constant upload"));
        ET_TRY(ecuda::to_error(cudaMemcpy(b.get(), t.const_data_ptr(), t.nbytes(), cudaMemcpyHostToDevice),
                               "CudaBackend: constant upload"));
        host_constants[&m.value(i)] = t.const_data_ptr();
        t.set_data(b.get());
        d->constants.push_back(std::move(b));
      }
      t.set_device({runtime::DeviceType::CUDA, 0});
    }
    if (is_aoti_payload(*d->program)) ET_TRY(load_aoti_model(*d));
    for (size_t k = 0; k < m.num_instructions(); ++k) {
      Op op{};
      ET_TRY(plan_instruction(m, k, &op.plan));
      op.args = m.instruction_args(k);
      op.name = m.instruction_operator(k);
      if (op.plan.kind == OpKind::BatchNorm) ET_TRY(prepare_batch_norm(op));
      if (op.plan.kind == OpKind::Int8Linear) ET_TRY(prepare_int8_linear(op));
      d->checks_indices |= op.plan.kind == OpKind::Embedding || op.plan.kind == OpKind::IndexSelect ||
                           op.plan.kind == OpKind::IndexPut || op.plan.kind == OpKind::Gather ||
                           (op.plan.kind == OpKind::Index && !constant_indices_in_range(op, host_constants));
      if (op.plan.kind == OpKind::Addmm || op.plan.kind == OpKind::Mm || op.plan.kind == OpKind::Bmm) {
        for (size_t t :
             op.plan.kind == OpKind::Addmm ? std::vector<size_t>{0, 1, 2, 5} : std::vector<size_t>{0, 1, 2}) {
          op.shim.emplace_back();
          ET_TRY(shim_view(op.args[t], &op.shim.back()));
        }
      }
      op.skipped = lies_in_place(op);
      d->ops.push_back(std::move(op));
    }
    fuse_epilogues(d->ops, m);
    ET_TRY(fuse_linear_residuals(d->ops, m));
    ET_TRY(read_permutes_in_place(d->ops, m));
    write_permutes_in_place(d->ops, m);
    fuse_rope_puts(d->ops, m);
    fuse_attention_steps(d->ops, m);
    ET_TRY(
        ecuda::to_error(cudaStreamCreateWithFlags(out(d->own_stream), cudaStreamNonBlocking), "CudaBackend: stream"));
    for (ecuda::Event* e : {&d->joined_in, &d->joined_out}) {
      ET_TRY(ecuda::to_error(cudaEventCreateWithFlags(out(*e), cudaEventDisableTiming), "CudaBackend: event"));
    }
    // Layouts first; an NHWC convolution cuDNN refuses keeps its output NCHW, and all is planned again.
    std::unordered_set<const EValue*> nchw;
    for (bool planned = false; !planned;) {
      if (cudnn_available() && layouts_enabled()) choose_layouts(d->ops, m, nchw);
      planned = true;
      for (Op& op : d->ops) {
        if (op.plan.kind != OpKind::Conv) continue;
        op.cudnn.reset(), op.shim.clear(), op.scratch.clear(), op.layout_x = DeviceBuffer(),
                                                               op.layout_w = DeviceBuffer();
        ET_TRY(prepare_layouts(op));
        const bool cudnn = plan_cudnn(op, tf32, d->conv_workspace, d->conv_workspace_bytes);
        // Depthwise convolutions have a built-in kernel in both layouts; the others, in NCHW only.
        const bool builtin = !op.nhwc || is_depthwise(op.plan);
        if (!cudnn && !builtin) {
          nchw.insert(op.args[9]);
          planned = false;
          break;
        }
        const bool tune = cudnn && builtin && !cudnn_forced();
        if (!cudnn || tune) ET_TRY(prepare_conv(op));
        if (tune) {
          op.workspace = d->conv_workspace.get();
          keep_faster_conv(op, d->own_stream.get());
        }
      }
    }
    for (Op& op : d->ops) {
      if (op.plan.kind == OpKind::Conv3d) ET_TRY(prepare_conv3d(op, tf32, d->conv_workspace, d->conv_workspace_bytes));
    }
    ET_TRY(choose_gemvs(d->ops, m, host_constants, d->own_stream.get()));
    ET_TRY(tile_int4_weights(d->ops, m, d->own_stream.get()));
    fuse_gemv_neighbours(d->ops, m);
    fuse_elementwise(d->ops, m);
    size_t dequantized = 0;
    for (const Op& op : d->ops) dequantized = std::max(dequantized, dequantizes(op) ? dequantized_bytes(op) : 0);
    ET_CHECK_OR_RETURN(grow_workspace(dequantized, d->conv_workspace, d->conv_workspace_bytes),
                       Error::MemoryAllocationFailed, "%s: out of device memory for %zu bytes of dequantized weights",
                       kCudaBackendName, dequantized);
    for (Op& op : d->ops) {
      op.workspace = d->conv_workspace.get();
      if (dequantizes(op)) ET_TRY(prepare_dequantized_product(op, op.workspace));
      if (op.plan.kind == OpKind::Attention) {
        if (const int64_t floats = attention_partial_floats(attention_shape(op)); floats > 0) {
          const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
          ET_TRY(ecuda::to_error(cudaMalloc(out(op.attention_partials), bytes), "CudaBackend: attention scratch"));
          ET_TRY(ecuda::to_error(cudaMemset(op.attention_partials.get(), 0, bytes), "CudaBackend: attention scratch"));
        }
      }
      if (op.plan.kind == OpKind::RowReduce && op.nhwc) {  // the pixel sums' partials
        const Tensor& x = op.args[0]->to_tensor();
        op.scratch.emplace_back();
        const size_t floats = static_cast<size_t>(pixel_reduce_partials(x.size(0), x.size(2) * x.size(3), x.size(1)));
        ET_TRY(ecuda::to_error(cudaMalloc(out(op.scratch.back()), floats * sizeof(float) + 4),
                               "CudaBackend: mean scratch"));
      }
    }
    if (d->checks_indices) {
      ET_TRY(ecuda::to_error(cudaMalloc(out(d->index_error), sizeof(int)), "CudaBackend: index check"));
      ET_TRY(ecuda::to_error(cudaMemset(d->index_error.get(), 0, sizeof(int)), "CudaBackend: index check"));
      ET_TRY(ecuda::to_error(cudaMallocHost(out(d->index_error_host), sizeof(int)), "CudaBackend: index check"));
      ET_TRY(ecuda::to_error(cudaEventCreateWithFlags(out(d->index_checked), cudaEventDisableTiming),
                             "CudaBackend: index check"));
    }
    return static_cast<runtime::DelegateHandle*>(d.release());
  }

  // What the device's index check found (index_error_host, read back): an error naming `when`, the
  // flag cleared for the next call.
  static Error index_check(Delegate& d, const char* when) {
    if (*static_cast<int*>(d.index_error_host.get()) == 0) return Error::Ok;
    *static_cast<int*>(d.index_error_host.get()) = 0;
    ET_TRY(ecuda::to_error(cudaMemset(d.index_error.get(), 0, sizeof(int)), "CudaBackend: index check"));
    return ET_ERROR(Error::InvalidArgument, "%s: an index is out of range (embedding, gather, index or index_put)%s",
                    kCudaBackendName, when);
  }

  Error execute(runtime::DelegateHandle* handle, Span<EValue*> args) const override {
    auto* d = static_cast<Delegate*>(handle);
    runtime::Method& m = *d->method;
    const size_t n_in = m.num_inputs(), n_out = m.num_outputs();
    ET_CHECK_OR_RETURN(args.size() == n_in + n_out, Error::InvalidArgument, "%s: %zu arguments, expected %zu",
                       kCudaBackendName, args.size(), n_in + n_out);
    // A deferred check that has come back is reported now. One still in flight is left: the device
    // flag only clears when reported, so this call's check (queued after it) carries it too.
    if (d->check_pending) {
      const cudaError_t done = cudaEventQuery(d->index_checked.get());
      if (done == cudaErrorNotReady) {
        cudaGetLastError();  // not an error: not for the next launch's check to find
      } else {
        ET_TRY(ecuda::to_error(done, "CudaBackend: index check"));
        d->check_pending = false;
        ET_TRY(index_check(*d, " in an earlier call"));
      }
    }
    // The caller's stream when it set one (StreamGuard), else the delegate's own; the legacy
    // default stream is joined through events (Delegate::joined_in), so that the graph replays.
    const auto caller = ecuda::current_stream();
    const bool joins = caller && *caller == nullptr;
    const cudaStream_t stream = caller && !joins ? *caller : d->own_stream.get();
    if (joins) {
      ET_TRY(ecuda::to_error(cudaEventRecord(d->joined_in.get(), nullptr), "CudaBackend: stream order"));
      ET_TRY(ecuda::to_error(cudaStreamWaitEvent(stream, d->joined_in.get(), 0), "CudaBackend: stream order"));
    }
    for (size_t i = 0; i < n_in; ++i) {
      ET_CHECK_OR_RETURN(args[i]->is_tensor() && m.input(i).is_tensor(), Error::InvalidArgument,
                         "%s: input %zu must be a tensor", kCudaBackendName, i);
      const Tensor& src = args[i]->to_tensor();
      const Tensor& dst = m.input(i).to_tensor();
      ET_CHECK_OR_RETURN(src.scalar_type() == dst.scalar_type() && src.nbytes() == dst.nbytes(), Error::InvalidArgument,
                         "%s: input %zu has another dtype or size than the delegate was exported with",
                         kCudaBackendName, i);
      // Host or device memory alike: a tensor whose data is already on the GPU is copied on-device.
      ET_TRY(ecuda::to_error(
          cudaMemcpyAsync(dst.mutable_data_ptr(), src.const_data_ptr(), src.nbytes(), cudaMemcpyDefault, stream),
          "CudaBackend: input copy"));
    }
    {
      ecuda::StreamGuard on_stream(stream);  // the shims run on the current stream
      ET_TRY(d->aoti ? d->aoti->run(stream) : run_ops(*d, stream));
    }
    bool to_host = false;
    for (size_t i = 0; i < n_out; ++i) {
      const Tensor& src = m.get_output(i).to_tensor();
      ET_CHECK_OR_RETURN(args[n_in + i]->is_tensor(), Error::InvalidArgument, "%s: output %zu must be a tensor",
                         kCudaBackendName, i);
      const Tensor& dst = args[n_in + i]->to_tensor();
      ET_CHECK_OR_RETURN(dst.nbytes() == src.nbytes(), Error::InvalidArgument, "%s: output %zu size differs",
                         kCudaBackendName, i);
      to_host |= !dst.is_cuda();
      ET_TRY(ecuda::to_error(
          cudaMemcpyAsync(dst.mutable_data_ptr(), src.const_data_ptr(), src.nbytes(), cudaMemcpyDefault, stream),
          "CudaBackend: output copy"));
    }
    if (joins) {
      ET_TRY(ecuda::to_error(cudaEventRecord(d->joined_out.get(), stream), "CudaBackend: stream order"));
      ET_TRY(ecuda::to_error(cudaStreamWaitEvent(nullptr, d->joined_out.get(), 0), "CudaBackend: stream order"));
    }
    // Host outputs are read as soon as execute returns; device outputs follow the stream's order.
    // An index out of range is only known on the device: such delegates wait, and report it, unless
    // the caller defers the check to its next call (device outputs on its own stream).
    const bool defer = d->checks_indices && caller && !to_host && ecuda::deferred_index_checks();
    if (d->checks_indices) {
      ET_TRY(ecuda::to_error(
          cudaMemcpyAsync(d->index_error_host.get(), d->index_error.get(), sizeof(int), cudaMemcpyDeviceToHost, stream),
          "CudaBackend: index check"));
    }
    if (defer) {
      ET_TRY(ecuda::to_error(cudaEventRecord(d->index_checked.get(), stream), "CudaBackend: index check"));
      d->check_pending = true;
      return Error::Ok;
    }
    if (to_host || !caller || d->checks_indices) {
      ET_TRY(ecuda::to_error(cudaStreamSynchronize(stream), "CudaBackend: synchronize"));
    }
    const bool earlier = d->check_pending;  // its flag came back with this call's
    d->check_pending = false;
    return d->checks_indices ? index_check(*d, earlier ? " in this or an earlier call" : "") : Error::Ok;
  }

  void destroy(runtime::DelegateHandle* handle) const override { delete static_cast<Delegate*>(handle); }
};

// Registers at load time: linking (or dlopen-ing) this library is all a program has to do.
// Consumers keep the library in DT_NEEDED (--no-as-needed) so that this runs.
const bool registered = [] {
  const Error error = runtime::register_backend({kCudaBackendName, &cuda_backend()});
  if (error != Error::Ok) {
    std::fprintf(stderr, "executorch: registering %s failed: %s\n", kCudaBackendName, runtime::to_string(error));
  }
  return error == Error::Ok;
}();

}  // namespace

runtime::BackendInterface& cuda_backend() {
  static CudaBackend instance;
  return instance;
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
