#pragma once

// What CudaBackend checks in a delegate payload before touching the device: each instruction's
// operator and arguments (kinds, dtypes, shapes), so that no kernel ever indexes outside a tensor.
// Pure C++: it builds and is fuzzed without CUDA.
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/backends/cuda/kernels/op_codes.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace runtime {
class Method;
}  // namespace runtime
}  // namespace executorch

namespace executorch {
namespace backends {
namespace cuda {

using runtime::Error;
using runtime::EValue;
using runtime::Span;
using runtime::Tensor;

enum class OpKind {
  Addmm,
  Mm,
  Bmm,
  Unary,
  Binary,
  Softmax,
  LogSoftmax,
  LayerNorm,
  Copy,
  Permute,
  Expand,
  Split,
  Conv,
  BatchNorm,
  MaxPool,
  AvgPool,
  RowReduce,
  Compare,
  LogicalNot,
  Any,
  Where,
  Embedding,
  Cast,
  Int8Linear,
  Attention,
  Slice,
  Select,
  Cat,
  AdaptiveAvgPool,
  AsStrided,
  ConstantPad,
  IndexSelect,
  Upsample,
  Logic,
  Index,
  LstmCell,
  GruCell,
  LstmLayer,
  GruLayer,
  Int8WeightLinear,
  Int4Linear,
  IntegerBinary,
  Cumsum,
  ArgMax,
  Gather,
  Conv3d,
  IndexPut,
  RmsNorm,
  Rope
};

// One checked instruction. Conv (1-D as height 1): ints = n, c, h, w, oc, kh, kw, stride h/w,
// pad h/w, dilation h/w, groups, oh, ow. Pools, and AdaptiveAvgPool as the average pool of an even
// split: ints = kh, kw, sh, sw, ph, pw, dh, dw, count_include_pad. Int8Linear: ints = rows, out
// features, in features. Attention: ints = batch, query heads, key/value heads, query length, key
// length, head size, value size, is_causal, mask kind (AttentionMask), the mask's four strides.
// RowReduce (means and sums): ints = 1 for a mean. Slice: ints = dim, start, step. Select:
// ints = dim, index. Cat: ints = dim. AsStrided: ints = storage offset. ConstantPad: ints = the
// elements ahead of the input per dimension, scalars[0] = the value. IndexSelect: ints = dim.
// Int8WeightLinear, Int4Linear: ints = rows, out features, in features, group size (int4).
// Upsample: ints = bilinear, align_corners; scalars = source steps per output step (h, w).
// LstmCell, GruCell: ints = rows, units. LstmLayer, GruLayer: ints = steps, rows, units, reverse. IntegerBinary (a
// Binary on int32 or int64 tensors). Cumsum: ints = dim. ArgMax: ints = rows, columns. RmsNorm: ints = rows, columns;
// scalars[0] = eps. Rope (x, cos, sin, out): x's dtype and shape for out, cos and sin broadcast to it. Gather: ints =
// dim. Compare: ints = 1 where the other operand is a tensor (broadcast), not a number. Cast (_to_copy, copy): ints =
// the source argument.
struct OpPlan {
  OpKind kind = OpKind::Copy;
  Unary unary = Unary::Relu;
  Binary binary = Binary::Add;
  Compare compare = Compare::Eq;
  Logic logic = Logic::And;
  // The element type of the op's floating tensors (all alike): Float, Half or BFloat16.
  runtime::ScalarType dtype = runtime::ScalarType::Float;
  int64_t ints[16] = {};
  // Conv3d: ints as Conv's over height and width; depth = input depth, kernel, stride, padding,
  // dilation, output depth.
  int64_t depth[6] = {};
  // Unary parameters p0, p1 (Clamp's bounds, LeakyRelu's slope, Pow's exponent).
  float scalars[2] = {};
};

// How index.Tensor's and index_put's index list indexes a `dims`-D tensor: `lead` leading Nones
// (whole dimensions, x[:, :, i]), then `count` int64 or int32 tensors broadcast together to `rank`
// sizes in `shape`, then only Nones. indexing() fills it, or refuses another list.
struct Indexing {
  int lead = 0, count = 0, rank = 0;
  int64_t shape[kMaxOpDims];
};
runtime::Error indexing(Span<EValue* const> items, int dims, const char* op, Indexing* ix);

// The kernels' code for a tensor element type _to_copy converts; false for the others.
bool element_type_of(runtime::ScalarType t, ElementType* out);

// Checks kernel call `name` with `args` (ATen schema order, outputs last) and fills `plan`.
runtime::Error plan_op(const char* name, runtime::Span<runtime::EValue*> args, OpPlan* plan);

// Plans instruction `k` of a loaded method: a kernel call CudaBackend implements, on arguments it
// takes. CudaBackend::init, check_payload and explain_instructions all plan through this.
runtime::Error plan_instruction(runtime::Method& method, size_t k, OpPlan* plan);

// The payload on the CPU, as init sees it: loads it as a program, its method with host memory
// (refused above `max_planned_bytes`), and plans every instruction. Returns the number of ops.
runtime::Result<size_t> check_payload(runtime::Span<const uint8_t> payload, uint64_t max_planned_bytes);

// For each instruction of the first method of `program` (a whole program, before delegation): an
// empty string where CudaBackend can run it, otherwise why not. The exporter's partitioner asks
// this, so what it delegates is exactly what init accepts.
EXECUTORCH_API runtime::Result<std::vector<std::string>> explain_instructions(runtime::Span<const uint8_t> program);

// An AOTInductor payload (docs/program_format.md, "AOTInductor payloads"): a program whose method
// declares the model's inputs, outputs and constants, with the model library (the .so PyTorch's
// AOT compile makes) in one of its segments and what built it in its metadata.
struct AotiPayload {
  Span<const uint8_t> library;              // the library's bytes, inside the program's data
  std::string torch_version;                // of the torch that compiled it: "2.11.0+cu130"
  std::vector<std::string> archs;           // the GPU architectures its kernels are built for: "sm_90"
  std::vector<std::string> constant_names;  // the container's name of each constant tensor, in value order
};

// The torch release (major.minor) whose generated code the shim library serves.
constexpr const char* kAotiTorchRelease = "2.11";

// Whether `program` is an AOTInductor payload (it names its library in its metadata).
EXECUTORCH_API bool is_aoti_payload(const runtime::Program& program);

// Reads and checks an AOTInductor payload: InvalidProgram where metadata is missing or malformed,
// or the library segment lies outside the program; NotSupported, naming both, where another torch
// release built it or (device_arch > 0, e.g. 90 for sm_90) it has no kernels for this device.
EXECUTORCH_API runtime::Result<AotiPayload> read_aoti_payload(const runtime::Program& program, int device_arch);

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
