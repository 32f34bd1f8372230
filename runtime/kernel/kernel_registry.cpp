#include <executorch/runtime/kernel/kernel_registry.h>

#include <cstring>

#include <executorch/runtime/core/log.h>
#include <executorch/runtime/core/named_registry.h>

namespace executorch {
namespace runtime {
namespace {

// The one kernel registry of the process; kernel libraries fill it from static initializers.
internal::NamedRegistry<Kernel, kMaxRegisteredKernels>& registry() {
  static internal::NamedRegistry<Kernel, kMaxRegisteredKernels> instance("kernel");
  return instance;
}

internal::NamedRegistry<KernelSignature, kMaxRegisteredKernels>& signatures() {
  static internal::NamedRegistry<KernelSignature, kMaxRegisteredKernels> instance("kernel signature");
  return instance;
}

// The argument kinds (docs/program_format.md, "Argument kinds"): a letter, what it accepts, and
// how an error names it. Python's bools are ints, and Python numbers stand for tensors in
// elementwise calls.
struct ArgumentKind {
  char letter;
  const char* description;
  bool (*fits)(const EValue& v);
};

constexpr ArgumentKind kArgumentKinds[] = {
    {'T', "a tensor", [](const EValue& v) { return v.is_tensor(); }},
    {'N', "a tensor or a number", [](const EValue& v) { return v.is_tensor() || v.is_scalar(); }},
    {'t', "a tensor or None", [](const EValue& v) { return v.is_tensor() || v.is_none(); }},
    {'i', "an int or bool", [](const EValue& v) { return v.is_int() || v.is_bool(); }},
    {'j', "an int, bool or None", [](const EValue& v) { return v.is_int() || v.is_bool() || v.is_none(); }},
    {'d', "a number", [](const EValue& v) { return v.is_scalar(); }},
    {'e', "a number or None", [](const EValue& v) { return v.is_scalar() || v.is_none(); }},
    {'I', "an int list", [](const EValue& v) { return v.is_int_list(); }},
    {'J', "an int list or None", [](const EValue& v) { return v.is_int_list() || v.is_none(); }},
    {'F', "a number list or None",
     [](const EValue& v) { return v.is_int_list() || v.tag() == EValue::Tag::DoubleList || v.is_none(); }},
    {'L', "a tensor list", [](const EValue& v) { return v.is_tensor_list(); }},
    {'s', "a string", [](const EValue& v) { return v.tag() == EValue::Tag::String; }},
    {'z', "a string or None", [](const EValue& v) { return v.tag() == EValue::Tag::String || v.is_none(); }},
    {'x', "anything", [](const EValue&) { return true; }},
};

const ArgumentKind* argument_kind(char letter) {
  for (const ArgumentKind& kind : kArgumentKinds) {
    if (kind.letter == letter) return &kind;
  }
  return nullptr;
}

}  // namespace

Error register_kernel_signatures(Span<const KernelSignature> list) {
  for (const KernelSignature& s : list) {
    if (s.name == nullptr || s.kinds == nullptr || std::strchr(s.kinds, '>') == nullptr) {
      return ET_ERROR(Error::InvalidArgument, "kernel signature with a null name or no '>' in its kinds");
    }
    ET_TRY(signatures().add(s));
  }
  return Error::Ok;
}

const char* get_kernel_signature(const char* name) {
  KernelSignature found{};
  return name != nullptr && signatures().find(name, &found) ? found.kinds : nullptr;
}

Error check_kernel_arguments(const char* kinds, Span<const EValue* const> args) {
  const char* split = std::strchr(kinds, '>');
  const size_t inputs = static_cast<size_t>(split - kinds);
  const char* outs = split + 1;
  const bool variadic = std::strcmp(outs, "*") == 0;  // one or more tensors (a Tensor[] result)
  const size_t outputs = variadic ? 1 : std::strlen(outs);
  ET_CHECK_OR_RETURN(variadic ? args.size() >= inputs + outputs : args.size() == inputs + outputs,
                     Error::InvalidProgram, "takes %zu arguments and %s%zu output(s), got %zu values", inputs,
                     variadic ? "at least " : "", outputs, args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgumentKind* kind = argument_kind(i < inputs ? kinds[i] : variadic ? 'T' : outs[i - inputs]);
    ET_CHECK_OR_RETURN(kind != nullptr && kind->fits(*args[i]), Error::InvalidProgram, "%s %zu must be %s",
                       i < inputs ? "argument" : "output", i < inputs ? i : i - inputs,
                       kind ? kind->description : "of a kind this runtime does not know");
  }
  return Error::Ok;
}

Error register_kernels(Span<const Kernel> kernels) {
  for (const Kernel& k : kernels) {
    if (k.name == nullptr || k.op == nullptr) {
      return ET_ERROR(Error::InvalidArgument, "kernel with a null name or function");
    }
    ET_TRY(registry().add(k));
  }
  return Error::Ok;
}

Result<OpFunction> get_op_function(const char* name) {
  Kernel found{};
  if (name != nullptr && registry().find(name, &found)) return found.op;
  return ET_ERROR(Error::NotFound, "no kernel registered for operator %s", name ? name : "(null)");
}

size_t get_num_registered_kernels() { return registry().size(); }

const char* get_kernel_name(size_t index) { return registry().name_at(index); }

}  // namespace runtime
}  // namespace executorch
