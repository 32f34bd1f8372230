#include <executorch/runtime/executor/dynamic_shapes.h>

#include <limits>

#include <executorch/runtime/core/log.h>
#include <executorch/runtime/core/result.h>
#include <executorch/schema/program_generated.h>

namespace executorch {
namespace runtime {

namespace fb = executorch_flatbuffer;

namespace {

// The size expressions' opcodes (docs/program_format.md). kConst and kSymbol take the next entry
// as their operand; the others pop two values (a, then b on top) and push one.
enum Opcode : int64_t { kConst = 0, kSymbol = 1, kAdd = 2, kMul = 3, kFloorDiv = 4, kMod = 5, kMax = 6, kMin = 7 };
constexpr size_t kMaxProgram = 1024;
constexpr int kMaxStack = 64;

// Python's a // b and a % b (rounding toward negative infinity), as torch.export's sizes use them.
bool floor_div(int64_t a, int64_t b, int64_t* out) {
  if (b == 0 || (b == -1 && a == std::numeric_limits<int64_t>::min())) return false;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return *out = q, true;
}
bool python_mod(int64_t a, int64_t b, int64_t* out) {
  if (b == 0 || b == -1) return *out = 0, b != 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return *out = r, true;
}

// The tensor again over the same sizes, which have changed: it recounts its elements.
void refresh(Tensor& t) {
  t = Tensor(t.scalar_type(), t.dim(), t.sizes(), t.strides(), t.mutable_data_ptr(), t.device());
}

}  // namespace

void contiguous_strides(int64_t* shape, int dim) {
  int64_t stride = 1;
  for (int d = dim; d-- > 0;) {
    shape[dim + d] = stride;
    stride *= shape[d] == 0 ? 1 : shape[d];
  }
}

Error DynamicShapes::load(const fb::ExecutionPlan* plan) {
  if (const auto* symbols = plan->symbols()) {
    for (const fb::SymbolicSize* s : *symbols) {
      ET_CHECK_OR_RETURN(s->input() >= 0 && s->dim() >= 0 && s->min() >= 0 && s->min() <= s->max(),
                         Error::InvalidProgram, "symbolic size %zu: input %d, dim %d, range [%lld, %lld]",
                         symbols_.size(), s->input(), s->dim(), static_cast<long long>(s->min()),
                         static_cast<long long>(s->max()));
      symbols_.push_back({static_cast<size_t>(s->input()), s->dim(), s->min(), s->max()});
    }
  }
  if (const auto* expressions = plan->size_expressions()) {
    for (const fb::SizeExpression* e : *expressions) {
      const size_t index = programs_.size();
      const auto* program = e->program();
      const size_t n = program ? program->size() : 0;
      ET_CHECK_OR_RETURN(n <= kMaxProgram, Error::InvalidProgram, "size expression %zu: %zu entries (at most %zu)",
                         index, n, kMaxProgram);
      int depth = 0;
      for (size_t i = 0; i < n; ++i) {
        const int64_t op = program->Get(static_cast<flatbuffers::uoffset_t>(i));
        if (op == kConst || op == kSymbol) {
          ET_CHECK_OR_RETURN(i + 1 < n, Error::InvalidProgram, "size expression %zu: opcode %lld without its operand",
                             index, static_cast<long long>(op));
          const int64_t operand = program->Get(static_cast<flatbuffers::uoffset_t>(++i));
          ET_CHECK_OR_RETURN(op == kConst || (operand >= 0 && static_cast<uint64_t>(operand) < symbols_.size()),
                             Error::InvalidProgram, "size expression %zu: symbol %lld does not exist (%zu symbols)",
                             index, static_cast<long long>(operand), symbols_.size());
          ET_CHECK_OR_RETURN(++depth <= kMaxStack, Error::InvalidProgram, "size expression %zu: deeper than %d values",
                             index, kMaxStack);
        } else {
          ET_CHECK_OR_RETURN(op >= kAdd && op <= kMin, Error::InvalidProgram,
                             "size expression %zu: unknown opcode %lld", index, static_cast<long long>(op));
          ET_CHECK_OR_RETURN(depth >= 2, Error::InvalidProgram, "size expression %zu: opcode %lld lacks operands",
                             index, static_cast<long long>(op));
          --depth;
        }
      }
      ET_CHECK_OR_RETURN(depth == 1, Error::InvalidProgram, "size expression %zu leaves %d values, not one", index,
                         depth);
      programs_.emplace_back(program->begin(), program->end());
    }
  }
  results_.assign(programs_.size(), 0);
  return Error::Ok;
}

Error DynamicShapes::check_expression(int32_t expr, size_t value) const {
  ET_CHECK_OR_RETURN(expr >= -1 && (expr < 0 || static_cast<size_t>(expr) < programs_.size()), Error::InvalidProgram,
                     "value %zu: size expression %d does not exist (%zu expressions)", value, expr, programs_.size());
  return Error::Ok;
}

Error DynamicShapes::add_tensor(size_t value, const flatbuffers::Vector<int32_t>& exprs, int64_t* shape, int dim) {
  ET_CHECK_OR_RETURN(exprs.size() == static_cast<size_t>(dim), Error::InvalidProgram,
                     "value %zu: %u dynamic sizes for %d dimensions", value, exprs.size(), dim);
  Resized r{value, {exprs.begin(), exprs.end()}, {shape, shape + dim}, shape};
  for (int32_t e : r.exprs) ET_TRY(check_expression(e, value));
  tensors_.push_back(std::move(r));
  return Error::Ok;
}

Error DynamicShapes::add_int(size_t value, int32_t expr) {
  ET_TRY(check_expression(expr, value));
  integers_.push_back({value, {expr}, nullptr});
  return Error::Ok;
}

Error DynamicShapes::add_int_list(size_t value, Span<const int64_t> items, const flatbuffers::Vector<int32_t>& exprs,
                                  EValue* out) {
  ET_CHECK_OR_RETURN(exprs.size() == items.size(), Error::InvalidProgram,
                     "value %zu: %u size expressions for %zu items", value, exprs.size(), items.size());
  Rewritten r{value, {exprs.begin(), exprs.end()}, std::unique_ptr<int64_t[]>(new int64_t[items.size() + 1])};
  for (int32_t e : r.exprs) ET_TRY(check_expression(e, value));
  for (size_t i = 0; i < items.size(); ++i) r.items[i] = items[i];
  *out = EValue::int_list(Span<const int64_t>(r.items.get(), items.size()));
  integers_.push_back(std::move(r));
  return Error::Ok;
}

DynamicShapes::Resized* DynamicShapes::resized(size_t value) {
  for (Resized& r : tensors_) {
    if (r.value == value) return &r;
  }
  return nullptr;
}

bool DynamicShapes::is_dynamic(size_t value) const { return resized(value) != nullptr; }

int64_t DynamicShapes::symbol_of(int32_t expr) const {
  if (expr < 0) return -1;
  const std::vector<int64_t>& p = programs_[static_cast<size_t>(expr)];
  return p.size() == 2 && p[0] == kSymbol ? p[1] : -1;
}

Error DynamicShapes::check_symbols(const std::vector<size_t>& input_ids, const std::vector<EValue>& values) {
  for (size_t k = 0; k < symbols_.size(); ++k) {
    const Symbol& s = symbols_[k];
    ET_CHECK_OR_RETURN(s.input < input_ids.size() && values[input_ids[s.input]].is_tensor(), Error::InvalidProgram,
                       "symbolic size %zu: input %zu is not a tensor input", k, s.input);
    const Resized* r = resized(input_ids[s.input]);
    ET_CHECK_OR_RETURN(r != nullptr && static_cast<size_t>(s.dim) < r->exprs.size() &&
                           symbol_of(r->exprs[static_cast<size_t>(s.dim)]) == static_cast<int64_t>(k),
                       Error::InvalidProgram, "symbolic size %zu: dim %d of input %zu does not follow it", k, s.dim,
                       s.input);
    ET_CHECK_OR_RETURN(s.max == r->bounds[static_cast<size_t>(s.dim)], Error::InvalidProgram,
                       "symbolic size %zu: maximum %lld, but input %zu declares %lld", k, static_cast<long long>(s.max),
                       s.input, static_cast<long long>(r->bounds[static_cast<size_t>(s.dim)]));
  }
  // A dynamic input dimension is a symbol (the caller gives it; nothing computes it).
  input_tensors_.assign(input_ids.size(), -1);
  for (size_t i = 0; i < input_ids.size(); ++i) {
    Resized* r = resized(input_ids[i]);
    if (r == nullptr) continue;
    r->input = true;
    input_tensors_[i] = static_cast<int>(r - tensors_.data());
    for (size_t d = 0; d < r->exprs.size(); ++d) {
      const int64_t k = symbol_of(r->exprs[d]);
      // Within the input's own bound too: its data is copied into memory planned for that bound.
      ET_CHECK_OR_RETURN(r->exprs[d] < 0 || (k >= 0 && symbols_[static_cast<size_t>(k)].max <= r->bounds[d]),
                         Error::InvalidProgram,
                         "input %zu: dim %zu is dynamic but no symbolic size within its bound names it", i, d);
    }
  }
  return Error::Ok;
}

Error DynamicShapes::resize_input(size_t input, const Tensor& src, Tensor& dst) {
  Resized* r = input < input_tensors_.size() && input_tensors_[input] >= 0 ? &tensors_[input_tensors_[input]] : nullptr;
  for (int d = 0; d < dst.dim(); ++d) {
    const int64_t size = src.size(d);
    const int64_t k = r != nullptr ? symbol_of(r->exprs[static_cast<size_t>(d)]) : -1;
    if (k >= 0) {
      const Symbol& symbol = symbols_[static_cast<size_t>(k)];
      ET_CHECK_OR_RETURN(size >= symbol.min && size <= symbol.max && size <= r->bounds[static_cast<size_t>(d)],
                         Error::InvalidArgument, "input %zu: size %lld at dim %d, expected %lld to %lld", input,
                         static_cast<long long>(size), d, static_cast<long long>(symbol.min),
                         static_cast<long long>(symbol.max));
    } else {
      const int64_t declared = r != nullptr ? r->bounds[static_cast<size_t>(d)] : dst.size(d);
      ET_CHECK_OR_RETURN(size == declared, Error::InvalidArgument, "input %zu: size %lld at dim %d, expected %lld",
                         input, static_cast<long long>(size), d, static_cast<long long>(declared));
    }
  }
  if (r == nullptr) return Error::Ok;
  for (int d = 0; d < dst.dim(); ++d) r->shape[d] = src.size(d);
  contiguous_strides(r->shape, dst.dim());
  refresh(dst);
  return Error::Ok;
}

Error DynamicShapes::update(std::vector<EValue>& values, const std::vector<EValue*>& inputs) {
  int64_t stack[kMaxStack];
  for (size_t e = 0; e < programs_.size(); ++e) {
    const std::vector<int64_t>& p = programs_[e];
    int depth = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      const int64_t op = p[i];
      if (op == kConst) {
        stack[depth++] = p[++i];
        continue;
      }
      if (op == kSymbol) {
        const Symbol& s = symbols_[static_cast<size_t>(p[++i])];
        stack[depth++] = inputs[s.input]->to_tensor().size(s.dim);
        continue;
      }
      const int64_t a = stack[depth - 2], b = stack[depth - 1];
      int64_t v = 0;
      bool ok = true;
      switch (op) {
        case kAdd: ok = !__builtin_add_overflow(a, b, &v); break;
        case kMul: ok = !__builtin_mul_overflow(a, b, &v); break;
        case kFloorDiv: ok = floor_div(a, b, &v); break;
        case kMod: ok = python_mod(a, b, &v); break;
        case kMax: v = a > b ? a : b; break;
        default: v = a < b ? a : b; break;
      }
      ET_CHECK_OR_RETURN(ok, Error::InvalidArgument, "size expression %zu: %lld and %lld give no int64 (opcode %lld)",
                         e, static_cast<long long>(a), static_cast<long long>(b), static_cast<long long>(op));
      stack[--depth - 1] = v;
    }
    results_[e] = stack[0];
  }
  for (Resized& r : tensors_) {
    const int dim = static_cast<int>(r.exprs.size());
    for (int d = 0; d < dim; ++d) {
      const int64_t size = r.exprs[d] >= 0 ? results_[r.exprs[d]] : r.bounds[d];
      // Inputs sharing a symbol: each must have the size of the input that defines it.
      ET_CHECK_OR_RETURN(!r.input || size == r.shape[d], Error::InvalidArgument,
                         "value %zu (an input): size %lld at dim %d, but another input's gives it %lld", r.value,
                         static_cast<long long>(r.shape[d]), d, static_cast<long long>(size));
      ET_CHECK_OR_RETURN(size >= 0 && size <= r.bounds[d], Error::InvalidArgument,
                         "value %zu: size %lld at dim %d lies outside [0, %lld], the bound memory was planned for",
                         r.value, static_cast<long long>(size), d, static_cast<long long>(r.bounds[d]));
      r.shape[d] = size;
    }
    contiguous_strides(r.shape, dim);
    refresh(values[r.value].to_tensor());
  }
  for (Rewritten& r : integers_) {
    if (r.items == nullptr) {
      values[r.value] = EValue(results_[r.exprs[0]]);
      continue;
    }
    for (size_t i = 0; i < r.exprs.size(); ++i) {
      if (r.exprs[i] >= 0) r.items[i] = results_[r.exprs[i]];
    }
  }
  return Error::Ok;
}

}  // namespace runtime
}  // namespace executorch
