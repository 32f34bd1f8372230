#pragma once

// A payload method as an XNNPACK subgraph: what XnnpackBackend's init builds, and what the
// partitioner asks (explain_instructions) before it delegates an instruction. Both run the same
// code, so what is delegated is exactly what init accepts. Internal to the backend library.

#include <xnnpack.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/executor/method.h>

namespace executorch {
namespace backends {
namespace xnnpack {

// Builds the subgraph of a method: each float32 or float16 tensor an XNNPACK value, float32 inside
// (the method's inputs and outputs external in `External` mode, float16 ones converted at the
// boundary; its constants static), each instruction one or more nodes.
//
// Layout: torch's 4-D tensors are NCHW, XNNPACK's convolutions and pools NHWC. A value is held in
// either layout (or both); a node that needs the other gets a transpose, made once per value, and
// layout-free nodes (elementwise, clamp) keep whichever their inputs have, so a chain of
// convolutions transposes only at its ends.
class SubgraphBuilder {
 public:
  enum class Mode { External, Explain };

  // `statics` receives the data of the static values made here (repacked weights, scalars); it
  // must outlive the subgraph and every runtime made from it.
  SubgraphBuilder(runtime::Method& method, xnn_subgraph_t subgraph, Mode mode,
                  std::vector<std::unique_ptr<float[]>>* statics);

  // External mode: the method's inputs, then its outputs, as external values 0.. in that order.
  runtime::Error define_externals();
  // The nodes of instruction `i`.
  runtime::Error node(size_t i);
  // External mode: float16 outputs converted from the float32 values the nodes wrote.
  runtime::Error finish();

 private:
  struct Held {
    uint32_t torch = XNN_INVALID_VALUE_ID;  // dims as torch has them
    uint32_t nhwc = XNN_INVALID_VALUE_ID;   // a 4-D tensor's dims as N, H, W, C
  };

  runtime::Result<uint32_t> define(const std::vector<size_t>& dims, const void* data = nullptr,
                                   uint32_t external = XNN_INVALID_VALUE_ID, uint32_t flags = 0,
                                   xnn_datatype type = xnn_datatype_fp32);
  // Constant `v`'s elements as float32 (float16 ones converted once, kept with the statics).
  const float* floats(const runtime::EValue* v);
  // A node converting value `from` into `to` (float32 and float16; float32 to dynamically quantized int8).
  runtime::Error convert(uint32_t from, uint32_t to);
  runtime::Result<uint32_t> scalar(float value);
  runtime::Result<uint32_t> constant(std::vector<float> data, const std::vector<size_t>& dims);
  runtime::Error need_float(const runtime::EValue* v, const char* op);

  // The value of tensor `v` in torch's layout, or channels-last (4-D only).
  runtime::Result<uint32_t> torch(runtime::EValue* v, const char* op);
  runtime::Result<uint32_t> nhwc(runtime::EValue* v, const char* op);
  bool held_nhwc(const runtime::EValue* v) const;
  // `v` in torch's layout, or channels-last.
  runtime::Result<uint32_t> in_layout(runtime::EValue* v, bool channels_last, const char* op);
  // Defines output `v` of a node, in torch's layout or channels-last; written(v) after the node
  // transposes an external output written channels-last into its external value.
  runtime::Result<uint32_t> output(runtime::EValue* v, bool channels_last, const char* op);
  runtime::Error written(const runtime::EValue* v);
  // `v` is the value `id` (an alias of another; a copy where `v` is external).
  runtime::Error alias(runtime::EValue* v, uint32_t id, bool channels_last, const char* op);
  bool is_constant(const runtime::EValue* v) const { return constants_.count(v) != 0; }
  // Whether `v` is read by an instruction other than `except`, or is a method output.
  bool used_elsewhere(const runtime::EValue* v, size_t except) const;

  runtime::Error unary(const std::string& op, runtime::Span<runtime::EValue*> a);
  runtime::Error binary(xnn_binary_operator kind, runtime::EValue* x, runtime::EValue* y, runtime::EValue* out,
                        const char* op);
  runtime::Error binary_scalar(xnn_binary_operator kind, runtime::EValue* x, float y, runtime::EValue* out,
                               const char* op);
  runtime::Error linear(runtime::Span<runtime::EValue*> a, bool bias, const char* op);
  runtime::Error matmul(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error int8_linear(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error convolution(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error pool(runtime::Span<runtime::EValue*> a, bool is_max, size_t i, const char* op);
  runtime::Error mean(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error reduce(runtime::Span<runtime::EValue*> a, xnn_reduce_operator kind, const char* op);
  runtime::Error reshape(runtime::EValue* x, runtime::EValue* out, const char* op);
  runtime::Error permute(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error slice(runtime::Span<runtime::EValue*> a, bool select, const char* op);
  runtime::Error cat(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error join(const std::vector<uint32_t>& ids, const std::vector<size_t>& extents, size_t axis,
                      const std::vector<size_t>& dims, uint32_t out);
  runtime::Error expand(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error pad(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error upsample(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error softmax(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error layer_norm(runtime::Span<runtime::EValue*> a, size_t i, const char* op);
  runtime::Error attention(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error split(runtime::Span<runtime::EValue*> a, size_t i, const char* op);
  runtime::Error rms_norm(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error rope(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error lstm_cell(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Error gru_cell(runtime::Span<runtime::EValue*> a, const char* op);
  runtime::Result<std::pair<size_t, size_t>> cell_shape(runtime::Span<runtime::EValue*> a, int gates, const char* op);
  runtime::Result<uint32_t> columns(uint32_t x, size_t rows, size_t first, size_t count);
  runtime::Result<uint32_t> apply(int kind, bool is_binary, uint32_t x, uint32_t y, size_t rows, size_t cols,
                                  uint32_t out = XNN_INVALID_VALUE_ID);

  runtime::Method& m_;
  xnn_subgraph_t s_;
  Mode mode_;
  std::vector<std::unique_ptr<float[]>>& statics_;
  std::unordered_map<const runtime::EValue*, uint32_t> external_;
  std::unordered_map<const runtime::EValue*, Held> held_;
  std::unordered_set<const runtime::EValue*> constants_;
  std::unordered_set<const runtime::EValue*> outputs_;                // the method's
  std::unordered_set<const runtime::EValue*> transpose_pending_;      // see output()
  std::vector<std::pair<uint32_t, uint32_t>> half_outputs_;           // (float32 value, float16 external)
  std::unordered_map<const runtime::EValue*, const float*> widened_;  // see floats()
};

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
