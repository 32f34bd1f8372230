#include <executorch/runtime/executor/method.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <variant>

#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/dynamic_shapes.h>
#include <executorch/runtime/executor/memory_limit.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/schema/program_generated.h>

namespace executorch {
namespace runtime {

namespace fb = executorch_flatbuffer;

namespace {

// Planned buffers larger than this are refused rather than attempted.
constexpr uint64_t kMaxPlannedBufferBytes = uint64_t{1} << 40;
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 40;

template <typename T>
size_t size_of(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

}  // namespace

Result<std::unique_ptr<Method>> Method::load(const Program& program, const fb::ExecutionPlan* plan,
                                             const MemoryManager* memory_manager, std::shared_ptr<ProgramState> state) {
  std::unique_ptr<Method> m(new Method());
  m->name_ = plan->name() ? plan->name()->str() : "";

  // Program state: shared with the caller's other methods, or this method's own.
  if (state == nullptr) {
    ET_TRY_ASSIGN(state, ProgramState::create(program));
  }
  ET_CHECK_OR_RETURN(state->belongs_to(program), Error::InvalidArgument,
                     "method '%s': the program state was made for another program", m->name());
  m->state_buffers_ = std::move(state);

  // Planned memory.
  const auto* sizes = plan->non_const_buffer_sizes();
  if (memory_manager != nullptr) {
    const auto provided = memory_manager->planned_buffers();
    ET_CHECK_OR_RETURN(provided.size() == size_of(sizes), Error::InvalidArgument,
                       "method '%s' plans %zu buffers, the memory manager has %zu", m->name(), size_of(sizes),
                       provided.size());
    for (size_t i = 0; i < provided.size(); ++i) {
      ET_CHECK_OR_RETURN(provided[i].size() >= sizes->Get(static_cast<flatbuffers::uoffset_t>(i)),
                         Error::InvalidArgument, "planned buffer %zu holds %zu bytes, the method needs %llu", i,
                         provided[i].size(), static_cast<unsigned long long>(sizes->Get(i)));
      m->buffers_.push_back(provided[i]);
    }
  } else {
    const uint64_t total = sizes ? sum_saturating(*sizes) : 0;
    if (const Error e = check_planned_bytes(total, "its planned memory"); e != Error::Ok) {
      return ET_ERROR_CONTEXT(e, "method '%s'", m->name());
    }
    for (size_t i = 0; i < size_of(sizes); ++i) {
      const uint64_t bytes = sizes->Get(static_cast<flatbuffers::uoffset_t>(i));
      ET_CHECK_OR_RETURN(bytes <= kMaxPlannedBufferBytes, Error::InvalidProgram,
                         "planned buffer %zu asks for %llu bytes", i, static_cast<unsigned long long>(bytes));
      const size_t rounded = static_cast<size_t>((bytes + 63) / 64 * 64);
      auto* data = static_cast<uint8_t*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
      ET_CHECK_OR_RETURN(data != nullptr, Error::MemoryAllocationFailed,
                         "cannot allocate planned buffer %zu of %llu bytes", i, static_cast<unsigned long long>(bytes));
      m->owned_buffers_.emplace_back(data, std::free);
      m->buffers_.emplace_back(data, static_cast<size_t>(bytes));
    }
  }

  ET_TRY(m->parse_values(program, plan));

  // Inputs and outputs.
  const size_t n = m->values_.size();
  if (const auto* ins = plan->inputs()) {
    for (int32_t id : *ins) {
      ET_CHECK_OR_RETURN(id >= 0 && static_cast<size_t>(id) < n, Error::InvalidProgram,
                         "input index %d out of range (%zu values)", id, n);
      // Two inputs sharing one value would each overwrite the other's data.
      for (size_t seen : m->input_ids_) {
        ET_CHECK_OR_RETURN(seen != static_cast<size_t>(id), Error::InvalidProgram,
                           "value %d is listed as an input twice", id);
      }
      // An input's data is replaced by the caller's; the program's state is not the caller's to replace.
      ET_CHECK_OR_RETURN(!m->state_[static_cast<size_t>(id)], Error::InvalidProgram,
                         "value %d is program state; it cannot be an input", id);
      m->inputs_.push_back(&m->values_[static_cast<size_t>(id)]);
      m->input_ids_.push_back(static_cast<size_t>(id));
      m->input_set_.push_back(false);
    }
  }
  if (const auto* outs = plan->outputs()) {
    for (int32_t id : *outs) {
      ET_CHECK_OR_RETURN(id >= 0 && static_cast<size_t>(id) < n, Error::InvalidProgram,
                         "output index %d out of range (%zu values)", id, n);
      m->outputs_.push_back(&m->values_[static_cast<size_t>(id)]);
    }
  }

  ET_TRY(m->dynamic_->check_symbols(m->input_ids_, m->values_));
  ET_TRY(m->parse_instructions(program, plan));
  return m;
}

Error Method::parse_values(const Program& program, const fb::ExecutionPlan* plan) {
  const auto* values = plan->values();
  const size_t n = size_of(values);
  dynamic_.reset(new DynamicShapes());
  ET_TRY(dynamic_->load(plan));
  values_.resize(n);  // never resized again: EValue* pointers into it stay valid
  planned_.assign(n, false);
  constant_.assign(n, false);
  state_.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const fb::EValue* v = values->Get(static_cast<flatbuffers::uoffset_t>(i));
    EValue& out = values_[i];
    // A union's type may be set with its table absent (the verifier allows a missing field).
    ET_CHECK_OR_RETURN(
        v->val_type() == fb::KernelTypes::NONE || v->val_type() == fb::KernelTypes::Null || v->val() != nullptr,
        Error::InvalidProgram, "value %zu: type %d without its data", i, static_cast<int>(v->val_type()));
    switch (v->val_type()) {
      case fb::KernelTypes::NONE:
      case fb::KernelTypes::Null: out = EValue(); break;
      case fb::KernelTypes::Int: {
        out = EValue(static_cast<int64_t>(v->val_as_Int()->int_val()));
        if (v->val_as_Int()->expression() >= 0) ET_TRY(dynamic_->add_int(i, v->val_as_Int()->expression()));
        break;
      }
      case fb::KernelTypes::Double: out = EValue(v->val_as_Double()->double_val()); break;
      case fb::KernelTypes::Bool: out = EValue(v->val_as_Bool()->bool_val()); break;
      case fb::KernelTypes::String: {
        const auto* s = v->val_as_String()->string_val();
        out = s ? EValue::string(s->c_str(), s->size()) : EValue::string("", 0);
        break;
      }
      case fb::KernelTypes::IntList: {
        const auto* items = v->val_as_IntList()->items();
        out =
            EValue::int_list(items ? Span<const int64_t>(reinterpret_cast<const int64_t*>(items->data()), items->size())
                                   : Span<const int64_t>());
        const auto* exprs = v->val_as_IntList()->expressions();
        if (size_of(exprs) > 0) ET_TRY(dynamic_->add_int_list(i, out.to_int_list(), *exprs, &out));
        break;
      }
      case fb::KernelTypes::DoubleList: {
        const auto* items = v->val_as_DoubleList()->items();
        out = EValue::double_list(items ? Span<const double>(items->data(), items->size()) : Span<const double>());
        break;
      }
      case fb::KernelTypes::BoolList: {
        const auto* items = v->val_as_BoolList()->items();
        out = EValue::bool_list(items ? Span<const bool>(reinterpret_cast<const bool*>(items->data()), items->size())
                                      : Span<const bool>());
        break;
      }
      case fb::KernelTypes::TensorList: break;  // second pass, once every tensor exists
      case fb::KernelTypes::Tensor: {
        const fb::Tensor* t = v->val_as_Tensor();
        const auto dtype = static_cast<ScalarType>(t->scalar_type());
        ET_CHECK_OR_RETURN(element_size(dtype) != 0, Error::InvalidProgram, "value %zu: unknown dtype %d", i,
                           static_cast<int>(t->scalar_type()));
        const size_t dim = size_of(t->sizes());
        ET_CHECK_OR_RETURN(dim <= static_cast<size_t>(kTensorDimensionLimit), Error::InvalidProgram,
                           "value %zu: %zu dimensions (at most %d)", i, dim, kTensorDimensionLimit);
        if (const auto* order = t->dim_order()) {
          ET_CHECK_OR_RETURN(order->size() == 0 || order->size() == dim, Error::InvalidProgram,
                             "value %zu: dim_order has %u entries for %zu dims", i, order->size(), dim);
          for (size_t d = 0; d < order->size(); ++d) {
            ET_CHECK_OR_RETURN(order->Get(static_cast<flatbuffers::uoffset_t>(d)) == d, Error::NotSupported,
                               "value %zu: only contiguous dim order is supported", i);
          }
        }
        std::unique_ptr<int64_t[]> shape(new int64_t[2 * dim + 1]);
        // extent (the product of the sizes, zeros counted as ones) bounds the strides as well.
        uint64_t numel = 1, extent = 1;
        for (size_t d = 0; d < dim; ++d) {
          const int64_t s = t->sizes()->Get(static_cast<flatbuffers::uoffset_t>(d));
          const uint64_t at_least_one = s > 0 ? static_cast<uint64_t>(s) : 1;
          ET_CHECK_OR_RETURN(s >= 0 && extent <= kMaxTensorBytes / at_least_one, Error::InvalidProgram,
                             "value %zu: size %lld of dim %zu is negative or too large", i, static_cast<long long>(s),
                             d);
          shape[d] = s;
          numel *= static_cast<uint64_t>(s);
          extent *= at_least_one;
        }
        const uint64_t nbytes = numel * element_size(dtype);
        ET_CHECK_OR_RETURN(nbytes <= kMaxTensorBytes, Error::InvalidProgram, "value %zu: %llu bytes", i,
                           static_cast<unsigned long long>(nbytes));
        contiguous_strides(shape.get(), static_cast<int>(dim));
        void* data = nullptr;
        const int places = (t->data_segment() >= 0) + (t->mem_id() >= 0) + (t->mutable_buffer() >= 0);
        ET_CHECK_OR_RETURN(places <= 1, Error::InvalidProgram,
                           "value %zu: more than one of constant data, planned memory and program state", i);
        if (t->mutable_buffer() >= 0) {
          const auto id = static_cast<size_t>(t->mutable_buffer());
          ET_CHECK_OR_RETURN(id < state_buffers_->num_buffers(), Error::InvalidProgram,
                             "value %zu: mutable buffer %zu does not exist (%zu buffers)", i, id,
                             state_buffers_->num_buffers());
          const Span<uint8_t> buffer = state_buffers_->buffer(id);
          ET_CHECK_OR_RETURN(buffer.size() == nbytes, Error::InvalidProgram,
                             "value %zu: %llu bytes, but mutable buffer %zu ('%s') holds %zu", i,
                             static_cast<unsigned long long>(nbytes), id, state_buffers_->buffer_name(id),
                             buffer.size());
          data = buffer.data();
          state_[i] = true;
        } else if (t->data_segment() >= 0) {
          auto bytes = program.segment_data(static_cast<size_t>(t->data_segment()), t->data_offset(), nbytes);
          if (!bytes.ok()) return ET_ERROR_CONTEXT(bytes.error(), "value %zu (constant)", i);
          ET_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(bytes->data()) % element_size(dtype) == 0,
                             Error::InvalidProgram, "value %zu: constant data is misaligned", i);
          data = const_cast<uint8_t*>(bytes->data());
          constant_[i] = true;
        } else if (t->mem_id() >= 0) {
          const auto id = static_cast<size_t>(t->mem_id());
          ET_CHECK_OR_RETURN(id < buffers_.size(), Error::InvalidProgram,
                             "value %zu: planned buffer %zu does not exist (%zu buffers)", i, id, buffers_.size());
          ET_CHECK_OR_RETURN(t->mem_offset() <= buffers_[id].size() && nbytes <= buffers_[id].size() - t->mem_offset(),
                             Error::InvalidProgram, "value %zu: bytes [%llu, +%llu) lie outside planned buffer %zu", i,
                             static_cast<unsigned long long>(t->mem_offset()), static_cast<unsigned long long>(nbytes),
                             id);
          ET_CHECK_OR_RETURN(t->mem_offset() % element_size(dtype) == 0, Error::InvalidProgram,
                             "value %zu: planned offset is misaligned", i);
          data = buffers_[id].data() + t->mem_offset();
          planned_[i] = true;
        }
        ET_CHECK_OR_RETURN(t->device() == fb::DeviceType::CPU || t->device() == fb::DeviceType::CUDA,
                           Error::InvalidProgram, "value %zu: unknown device", i);
        const Device device{t->device() == fb::DeviceType::CUDA ? DeviceType::CUDA : DeviceType::CPU,
                            t->device_index()};
        out = EValue(Tensor(dtype, static_cast<int>(dim), shape.get(), shape.get() + dim, data, device));
        if (size_of(t->dynamic_sizes()) > 0) {
          ET_CHECK_OR_RETURN(t->data_segment() < 0 && t->mutable_buffer() < 0, Error::InvalidProgram,
                             "value %zu: a constant or program state cannot have dynamic sizes", i);
          ET_TRY(dynamic_->add_tensor(i, *t->dynamic_sizes(), shape.get(), static_cast<int>(dim)));
        }
        shapes_.push_back(std::move(shape));
        break;
      }
      default:
        return ET_ERROR(Error::InvalidProgram, "value %zu has unknown type %d", i, static_cast<int>(v->val_type()));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const fb::EValue* v = values->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (v->val_type() != fb::KernelTypes::TensorList) continue;
    const auto* items = v->val_as_TensorList()->items();
    const size_t count = size_of(items);
    std::unique_ptr<EValue*[]> list(new EValue*[count == 0 ? 1 : count]);
    for (size_t k = 0; k < count; ++k) {
      const int32_t id = items->Get(static_cast<flatbuffers::uoffset_t>(k));
      // None items are the unindexed dimensions of index.Tensor / index_put (Tensor?[]).
      ET_CHECK_OR_RETURN(
          id >= 0 && static_cast<size_t>(id) < n &&
              (values_[static_cast<size_t>(id)].is_tensor() || values_[static_cast<size_t>(id)].is_none()),
          Error::InvalidProgram, "value %zu: list item %zu (%d) is neither a tensor nor None", i, k, id);
      list[k] = &values_[static_cast<size_t>(id)];
    }
    values_[i] = EValue::tensor_list(Span<EValue* const>(list.get(), count));
    lists_.push_back(std::move(list));
  }
  return Error::Ok;
}

Error Method::parse_instructions(const Program& program, const fb::ExecutionPlan* plan) {
  const size_t n = values_.size();
  const auto* chains = plan->chains();
  ET_CHECK_OR_RETURN(size_of(chains) <= 1, Error::NotSupported, "method '%s' has %zu chains; one is supported", name(),
                     size_of(chains));
  if (size_of(chains) == 0) return Error::Ok;
  const auto* instructions = chains->Get(0)->instructions();
  const auto* operators = plan->operators();
  const auto* delegates = plan->delegates();

  // Delegates: each is initialized once, here.
  for (size_t d = 0; d < size_of(delegates); ++d) {
    const fb::BackendDelegate* del = delegates->Get(static_cast<flatbuffers::uoffset_t>(d));
    const char* id = del->id() ? del->id()->c_str() : "";
    BackendInterface* backend = get_backend_class(id);
    ET_CHECK_OR_RETURN(backend != nullptr, Error::NotFound, "delegate %zu needs backend '%s', which is not registered",
                       d, id);
    ET_CHECK_OR_RETURN(backend->is_available(), Error::NotSupported,
                       "delegate %zu needs backend '%s', which is not available on this machine", d, id);
    const fb::BackendDelegateDataReference* ref = del->processed();
    ET_CHECK_OR_RETURN(ref != nullptr, Error::InvalidProgram, "delegate %zu has no payload", d);
    Span<const uint8_t> payload;
    if (ref->location() == fb::DataLocation::INLINE) {
      const auto* inline_data = program.flatbuffer()->backend_delegate_data();
      ET_CHECK_OR_RETURN(ref->index() < size_of(inline_data), Error::InvalidProgram,
                         "delegate %zu: inline payload %u does not exist", d, ref->index());
      const auto* bytes = inline_data->Get(ref->index())->data();
      payload = bytes ? Span<const uint8_t>(bytes->data(), bytes->size()) : Span<const uint8_t>();
    } else if (ref->location() == fb::DataLocation::SEGMENT) {
      const auto* segs = program.flatbuffer()->segments();
      ET_CHECK_OR_RETURN(ref->index() < size_of(segs), Error::InvalidProgram,
                         "delegate %zu: payload segment %u does not exist", d, ref->index());
      ET_TRY_ASSIGN(payload, program.segment_data(ref->index(), 0, segs->Get(ref->index())->size()));
    } else {
      return ET_ERROR(Error::InvalidProgram, "delegate %zu: unknown payload location", d);
    }
    std::vector<CompileSpec> specs;
    if (const auto* list = del->compile_specs()) {
      for (const fb::CompileSpec* s : *list) {
        specs.push_back(
            {s->key() ? s->key()->c_str() : "",
             s->value() ? Span<const uint8_t>(s->value()->data(), s->value()->size()) : Span<const uint8_t>()});
      }
    }
    BackendInitContext context{state_buffers_.get()};
    auto handle = backend->init(context, payload, Span<const CompileSpec>(specs.data(), specs.size()));
    if (!handle.ok()) {
      return ET_ERROR_CONTEXT(handle.error(), "backend '%s' could not load delegate %zu", id, d);
    }
    delegates_.push_back({backend, *handle, id});
  }

  auto collect_args = [&](const flatbuffers::Vector<int32_t>* args, std::vector<EValue*>& out, size_t k) -> Error {
    for (size_t a = 0; a < size_of(args); ++a) {
      const int32_t id = args->Get(static_cast<flatbuffers::uoffset_t>(a));
      ET_CHECK_OR_RETURN(id >= 0 && static_cast<size_t>(id) < n, Error::InvalidProgram,
                         "instruction %zu: argument %zu is value %d, out of range (%zu values)", k, a, id, n);
      out.push_back(&values_[static_cast<size_t>(id)]);
    }
    return Error::Ok;
  };

  for (size_t k = 0; k < size_of(instructions); ++k) {
    const fb::Instruction* ins = instructions->Get(static_cast<flatbuffers::uoffset_t>(k));
    ET_CHECK_OR_RETURN(ins->instr_args() != nullptr, Error::InvalidProgram, "instruction %zu has no arguments", k);
    switch (ins->instr_args_type()) {
      case fb::InstructionArguments::KernelCall: {
        const fb::KernelCall* call = ins->instr_args_as_KernelCall();
        ET_CHECK_OR_RETURN(call->op_index() >= 0 && static_cast<size_t>(call->op_index()) < size_of(operators),
                           Error::InvalidProgram, "instruction %zu: operator %d does not exist", k, call->op_index());
        const fb::Operator* op = operators->Get(static_cast<flatbuffers::uoffset_t>(call->op_index()));
        std::string op_name = op->name() ? op->name()->str() : "";
        if (op->overload() && op->overload()->size() > 0) op_name += "." + op->overload()->str();
        // A NUL inside the name would make it look up as the name before it.
        ET_CHECK_OR_RETURN(op_name.find('\0') == std::string::npos, Error::InvalidProgram,
                           "instruction %zu: operator name '%s' has a NUL byte inside", k, op_name.c_str());
        ET_CHECK_OR_RETURN(!op_name.empty(), Error::InvalidProgram, "instruction %zu: operator %d has no name", k,
                           call->op_index());
        auto fn = get_op_function(op_name.c_str());
        if (!fn.ok()) return ET_ERROR(fn.error(), "instruction %zu: operator '%s' has no kernel", k, op_name.c_str());
        KernelStep step{*fn, {}, std::move(op_name)};
        ET_TRY(collect_args(call->args(), step.args, k));
        if (const char* kinds = get_kernel_signature(step.name.c_str())) {
          const Error e = check_kernel_arguments(kinds, {step.args.data(), step.args.size()});
          if (e != Error::Ok) return ET_ERROR_CONTEXT(e, "instruction %zu: operator '%s'", k, step.name.c_str());
        }
        steps_.emplace_back(std::move(step));
        break;
      }
      case fb::InstructionArguments::DelegateCall: {
        const fb::DelegateCall* call = ins->instr_args_as_DelegateCall();
        ET_CHECK_OR_RETURN(
            call->delegate_index() >= 0 && static_cast<size_t>(call->delegate_index()) < delegates_.size(),
            Error::InvalidProgram, "instruction %zu: delegate %d does not exist", k, call->delegate_index());
        DelegateStep step{static_cast<size_t>(call->delegate_index()), {}};
        ET_TRY(collect_args(call->args(), step.args, k));
        // Delegates plan their work for fixed shapes when they load.
        for (EValue* arg : step.args) {
          const size_t id = static_cast<size_t>(arg - values_.data());
          ET_CHECK_OR_RETURN(!dynamic_->is_dynamic(id), Error::NotSupported,
                             "instruction %zu: delegate %zu reads or writes value %zu, whose sizes are dynamic", k,
                             step.delegate, id);
        }
        steps_.emplace_back(std::move(step));
        break;
      }
      case fb::InstructionArguments::MoveCall: {
        const fb::MoveCall* call = ins->instr_args_as_MoveCall();
        ET_CHECK_OR_RETURN(call->move_from() >= 0 && static_cast<size_t>(call->move_from()) < n &&
                               call->move_to() >= 0 && static_cast<size_t>(call->move_to()) < n,
                           Error::InvalidProgram, "instruction %zu: move between values out of range", k);
        steps_.emplace_back(
            MoveStep{&values_[static_cast<size_t>(call->move_from())], &values_[static_cast<size_t>(call->move_to())]});
        break;
      }
      default: return ET_ERROR(Error::InvalidProgram, "instruction %zu has unknown type", k);
    }
  }
  return Error::Ok;
}

std::string Method::label(const Step& step) const {
  if (const auto* kernel = std::get_if<KernelStep>(&step)) return kernel->name;
  if (const auto* call = std::get_if<DelegateStep>(&step)) return "delegate " + delegates_[call->delegate].id;
  return "move";
}

Method::~Method() {
  for (Delegate& d : delegates_) d.backend->destroy(d.handle);
  if (!profile_ms_.empty()) {
    // EXECUTORCH_PROFILE=1: time per operator over this method's lifetime, largest first.
    std::map<std::string, std::pair<double, long>> by_op;
    for (size_t k = 0; k < steps_.size(); ++k) {
      auto& e = by_op[label(steps_[k])];
      e.first += profile_ms_[k];
      e.second += profile_runs_;
    }
    std::vector<std::pair<double, std::string>> rows;
    for (auto& [op, e] : by_op) rows.emplace_back(e.first, op + " x" + std::to_string(e.second));
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "executorch profile of '%s' (%ld runs):\n", name(), profile_runs_);
    for (auto& [ms, op] : rows) std::fprintf(stderr, "  %10.3f ms  %s\n", ms, op.c_str());
  }
}

Method::Memory Method::value_memory(size_t index) const {
  if (index >= values_.size() || !values_[index].is_tensor()) return Memory::None;
  return planned_[index]    ? Memory::Planned
         : constant_[index] ? Memory::Constant
         : state_[index]    ? Memory::State
                            : Memory::None;
}

const char* Method::instruction_operator(size_t index) const {
  const auto* kernel = index < steps_.size() ? std::get_if<KernelStep>(&steps_[index]) : nullptr;
  return kernel ? kernel->name.c_str() : nullptr;
}

Span<EValue*> Method::instruction_args(size_t index) {
  if (index >= steps_.size()) return {};
  if (auto* kernel = std::get_if<KernelStep>(&steps_[index])) return {kernel->args.data(), kernel->args.size()};
  if (auto* call = std::get_if<DelegateStep>(&steps_[index])) return {call->args.data(), call->args.size()};
  return {};
}

Error Method::set_input(size_t index, const EValue& value) {
  ET_CHECK_OR_RETURN(index < inputs_.size(), Error::InvalidArgument, "input %zu does not exist; '%s' takes %zu", index,
                     name(), inputs_.size());
  EValue& slot = *inputs_[index];
  if (!slot.is_tensor()) {
    ET_CHECK_OR_RETURN(value.tag() == slot.tag(), Error::InvalidArgument, "input %zu: wrong kind of value", index);
    slot = value;
    input_set_[index] = true;
    return Error::Ok;
  }
  ET_CHECK_OR_RETURN(value.is_tensor(), Error::InvalidArgument, "input %zu must be a tensor", index);
  const Tensor& src = value.to_tensor();
  Tensor& dst = slot.to_tensor();
  ET_CHECK_OR_RETURN(src.scalar_type() == dst.scalar_type(), Error::InvalidArgument, "input %zu: dtype %s, expected %s",
                     index, to_string(src.scalar_type()), to_string(dst.scalar_type()));
  ET_CHECK_OR_RETURN(src.dim() == dst.dim(), Error::InvalidArgument, "input %zu: %d dimensions, expected %d", index,
                     src.dim(), dst.dim());
  ET_TRY(dynamic_->resize_input(index, src, dst));
  ET_CHECK_OR_RETURN(src.const_data_ptr() != nullptr || src.nbytes() == 0, Error::InvalidArgument,
                     "input %zu has no data", index);
  if (planned_[input_ids_[index]]) {
    ET_CHECK_OR_RETURN(!src.is_cuda(), Error::NotSupported,
                       "input %zu is in CUDA memory but the program plans it in CPU memory", index);
    if (src.nbytes()) std::memcpy(dst.mutable_data_ptr(), src.const_data_ptr(), src.nbytes());
  } else {
    dst.set_data(src.mutable_data_ptr());
    dst.set_device(src.device());
  }
  input_set_[index] = true;
  return Error::Ok;
}

bool Method::input_may_be_on_device(size_t index) const {
  return index < inputs_.size() && inputs_[index]->is_tensor() && !planned_[input_ids_[index]];
}

bool Method::output_may_be_on_device(size_t index) const {
  if (index >= outputs_.size() || !outputs_[index]->is_tensor()) return false;
  const EValue* out = outputs_[index];
  const size_t id = static_cast<size_t>(out - values_.data());
  if (constant_[id]) return false;
  for (const EValue* in : inputs_) {
    if (in == out) return false;
  }
  for (const Step& s : steps_) {
    if (const auto* move = std::get_if<MoveStep>(&s); move && (move->from == out || move->to == out)) return false;
    const auto* kernel = std::get_if<KernelStep>(&s);
    if (kernel == nullptr) continue;
    for (const EValue* a : kernel->args) {
      if (a == out) return false;
      if (a->is_tensor_list()) {
        for (const EValue* t : a->to_tensor_list()) {
          if (t == out) return false;
        }
      }
    }
  }
  return true;
}

Error Method::set_output_data(size_t index, void* data, size_t nbytes, Device device) {
  ET_CHECK_OR_RETURN(index < outputs_.size(), Error::InvalidArgument, "output %zu does not exist; '%s' has %zu", index,
                     name(), outputs_.size());
  ET_CHECK_OR_RETURN(outputs_[index]->is_tensor(), Error::InvalidArgument, "output %zu is not a tensor", index);
  Tensor& t = outputs_[index]->to_tensor();
  ET_CHECK_OR_RETURN(nbytes == t.nbytes() && (data != nullptr || nbytes == 0), Error::InvalidArgument,
                     "output %zu: a buffer of %zu bytes, expected %zu", index, nbytes, t.nbytes());
  const size_t id = static_cast<size_t>(outputs_[index] - values_.data());
  ET_CHECK_OR_RETURN(!constant_[id], Error::NotSupported, "output %zu is a constant of the program", index);
  ET_CHECK_OR_RETURN(!state_[id], Error::NotSupported, "output %zu is program state", index);
  if (device.type != DeviceType::CPU) {
    ET_CHECK_OR_RETURN(output_may_be_on_device(index), Error::NotSupported,
                       "output %zu is computed or read by a CPU kernel; it cannot be in device memory", index);
  }
  for (const EValue* in : inputs_) {
    ET_CHECK_OR_RETURN(in != outputs_[index], Error::NotSupported, "output %zu is also an input", index);
  }
  t.set_data(data);
  t.set_device(device);
  return Error::Ok;
}

Error Method::execute() {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const bool needs = inputs_[i]->is_tensor() && !planned_[input_ids_[i]] && !input_set_[i];
    ET_CHECK_OR_RETURN(!needs, Error::InvalidState, "input %zu of '%s' was never set", i, name());
  }
  if (!dynamic_->empty()) ET_TRY(dynamic_->update(values_, inputs_));
  KernelRuntimeContext context;
  static const bool profile = std::getenv("EXECUTORCH_PROFILE") != nullptr;
  if (profile) {
    profile_ms_.resize(steps_.size());
    ++profile_runs_;
  }
  for (size_t k = 0; k < steps_.size(); ++k) {
    Step& s = steps_[k];
    Error e = Error::Ok;
    clear_error();  // a kernel that fails without a message leaves no stale one behind
    const auto start = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    if (auto* kernel = std::get_if<KernelStep>(&s)) {
      e = kernel->op(context, Span<EValue*>(kernel->args.data(), kernel->args.size()));
    } else if (auto* call = std::get_if<DelegateStep>(&s)) {
      const Delegate& d = delegates_[call->delegate];
      e = d.backend->execute(d.handle, Span<EValue*>(call->args.data(), call->args.size()));
    } else {
      const MoveStep& move = std::get<MoveStep>(s);
      *move.to = *move.from;
    }
    if (profile) {
      profile_ms_[k] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    if (e != Error::Ok) return ET_ERROR_CONTEXT(e, "method '%s': instruction %zu (%s)", name(), k, label(s).c_str());
  }
  return Error::Ok;
}

}  // namespace runtime
}  // namespace executorch
