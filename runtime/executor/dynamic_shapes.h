#pragma once

// Bounded dynamic shapes (docs/program_format.md): sizes, and the integers that follow them (a
// view's shape), computed at each call from the sizes of the method's inputs. Memory is planned
// for the bounds, which the program's tensors declare; a size above its bound is an error.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/span.h>
#include <executorch/schema/program_generated.h>

namespace executorch {
namespace runtime {

// Row-major strides of the sizes shape[0, dim) into shape[dim, 2 * dim), the layout of a Method's
// shape arrays (an empty dimension counts as one, so strides stay distinct).
void contiguous_strides(int64_t* shape, int dim);

class DynamicShapes {
 public:
  // The plan's symbols and size expressions; every program is checked to leave one value and to
  // name only symbols that exist.
  Error load(const executorch_flatbuffer::ExecutionPlan* plan);
  bool empty() const { return programs_.empty(); }

  // Tensor value `value` whose dimension d follows expression exprs[d] (-1: fixed). `shape` holds
  // its sizes (the bounds, as declared) and then its strides; both are rewritten at each call.
  Error add_tensor(size_t value, const flatbuffers::Vector<int32_t>& exprs, int64_t* shape, int dim);
  // An integer (list) value whose items follow expressions: its items are copied where they can
  // be rewritten, and `out` becomes the value that points at them.
  Error add_int(size_t value, int32_t expr);
  Error add_int_list(size_t value, Span<const int64_t> items, const flatbuffers::Vector<int32_t>& exprs, EValue* out);

  // Once the inputs are known: each symbol names a dimension of a tensor input that follows it
  // alone, and every dynamic input dimension is a symbol (two inputs may share one).
  Error check_symbols(const std::vector<size_t>& input_ids, const std::vector<EValue>& values);

  // Whether value `value` has dynamic sizes.
  bool is_dynamic(size_t value) const;

  // Input `input` (tensor `dst`) takes src's sizes: a symbol's dimension anywhere in [min, max],
  // every other as declared. Inputs sharing a symbol are compared by update().
  Error resize_input(size_t input, const Tensor& src, Tensor& dst);

  // Evaluates every expression from the inputs' current sizes, then resizes the tensors and
  // rewrites the integers that follow them.
  Error update(std::vector<EValue>& values, const std::vector<EValue*>& inputs);

 private:
  struct Symbol {
    size_t input;
    int dim;
    int64_t min, max;
  };
  struct Resized {
    size_t value;
    std::vector<int32_t> exprs;   // per dimension, -1 fixed
    std::vector<int64_t> bounds;  // the declared sizes
    int64_t* shape;               // sizes, then strides
    bool input = false;           // a method input: its sizes are the caller's, checked against the symbols
  };
  struct Rewritten {
    size_t value;
    std::vector<int32_t> exprs;        // per item, -1 fixed
    std::unique_ptr<int64_t[]> items;  // null for an Int value
  };

  Error check_expression(int32_t expr, size_t value) const;
  Resized* resized(size_t value);
  const Resized* resized(size_t value) const { return const_cast<DynamicShapes*>(this)->resized(value); }
  // The symbol expression `expr` is alone ([SYMBOL k]: k), or -1.
  int64_t symbol_of(int32_t expr) const;

  std::vector<Symbol> symbols_;
  std::vector<std::vector<int64_t>> programs_;
  std::vector<int64_t> results_;  // per expression, at the last update
  std::vector<Resized> tensors_;
  std::vector<int> input_tensors_;  // per method input, its index in tensors_ (-1: a fixed shape)
  std::vector<Rewritten> integers_;
};

}  // namespace runtime
}  // namespace executorch
