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

// Whether `v` is of kind `kind` (the letters of docs/program_format.md, "Argument kinds").
bool fits(char kind, const EValue& v) {
  switch (kind) {
    case 'T': return v.is_tensor();
    case 'N': return v.is_tensor() || v.is_scalar();
    case 't': return v.is_tensor() || v.is_none();
    case 'i':  // an int; Python's bools are ints
    case 'b': return v.is_int() || v.is_bool();
    case 'j':
    case 'c': return v.is_int() || v.is_bool() || v.is_none();
    case 'd': return v.is_scalar();
    case 'e': return v.is_scalar() || v.is_none();
    case 'I': return v.is_int_list();
    case 'J': return v.is_int_list() || v.is_none();
    case 'F': return v.is_int_list() || v.tag() == EValue::Tag::DoubleList || v.is_none();
    case 'L':
    case 'M': return v.is_tensor_list();
    case 's': return v.tag() == EValue::Tag::String;
    case 'z': return v.tag() == EValue::Tag::String || v.is_none();
    case 'x': return true;
    default: return false;
  }
}

const char* kind_name(char kind) {
  switch (kind) {
    case 'T': return "a tensor";
    case 'N': return "a tensor or a number";
    case 't': return "a tensor or None";
    case 'i':
    case 'b': return "an int or bool";
    case 'j':
    case 'c': return "an int, bool or None";
    case 'd': return "a number";
    case 'e': return "a number or None";
    case 'I': return "an int list";
    case 'J': return "an int list or None";
    case 'F': return "a number list or None";
    case 'L':
    case 'M': return "a tensor list";
    case 's': return "a string";
    case 'z': return "a string or None";
    default: return "of an unknown kind";
  }
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
    const char kind = i < inputs ? kinds[i] : variadic ? 'T' : outs[i - inputs];
    ET_CHECK_OR_RETURN(fits(kind, *args[i]), Error::InvalidProgram, "%s %zu must be %s",
                       i < inputs ? "argument" : "output", i < inputs ? i : i - inputs, kind_name(kind));
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
