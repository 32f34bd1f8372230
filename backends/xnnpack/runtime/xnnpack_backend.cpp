#include <executorch/backends/xnnpack/runtime/xnnpack_backend.h>

#include <xnnpack.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/data_loader.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

namespace executorch {
namespace backends {
namespace xnnpack {
namespace {

using runtime::Error;
using runtime::EValue;
using runtime::Span;
using runtime::Tensor;

// Owners of XNNPACK's objects.
struct DeleteSubgraph {
  void operator()(xnn_subgraph_t s) const { xnn_delete_subgraph(s); }
};
struct DeleteRuntime {
  void operator()(xnn_runtime_t r) const { xnn_delete_runtime(r); }
};
struct ReleaseWorkspace {
  void operator()(xnn_workspace_t w) const { xnn_release_workspace(w); }
};
struct DeleteWeightsCache {
  void operator()(xnn_weights_cache_t c) const { xnn_delete_weights_cache(c); }
};
using Subgraph = std::unique_ptr<xnn_subgraph, DeleteSubgraph>;
using Runtime = std::unique_ptr<xnn_runtime, DeleteRuntime>;
using Workspace = std::unique_ptr<xnn_workspace, ReleaseWorkspace>;
using WeightsCache = std::unique_ptr<xnn_weights_cache_provider, DeleteWeightsCache>;

Error xnn_error(xnn_status s, const char* what) {
  if (s == xnn_status_success) return Error::Ok;
  const Error e = s == xnn_status_out_of_memory ? Error::MemoryAllocationFailed
                  : s == xnn_status_unsupported_parameter || s == xnn_status_unsupported_hardware
                      ? Error::NotSupported
                      : Error::InvalidArgument;
  return ET_ERROR(e, "%s: %s failed (XNNPACK status %d)", kXnnpackBackendName, what, static_cast<int>(s));
}

// One delegate call site: its payload program (the constants XNNPACK reads until the weights are
// packed, and the declared shapes), the subgraph, and the runtime made from it on the pool it was
// made for (made again where the pool was replaced, after set_num_threads).
struct Delegate {
  std::unique_ptr<runtime::Program> program;
  std::vector<std::vector<uint8_t>> planned;
  std::vector<Span<uint8_t>> spans;
  std::unique_ptr<runtime::MemoryManager> memory;
  std::unique_ptr<runtime::Method> method;
  Subgraph subgraph;
  WeightsCache cache;
  Workspace workspace;
  Runtime runtime;
  void* pool = nullptr;
  bool packed = false;             // the cache holds the weights (finalized after the first runtime)
  std::vector<Tensor*> externals;  // the payload's inputs, then its outputs, by external id
  std::mutex run;                  // one execution at a time per call site
};

// Builds the subgraph of `d`'s method: each tensor value an XNNPACK value (inputs and outputs
// external, constants static), each instruction a node.
class SubgraphBuilder {
 public:
  explicit SubgraphBuilder(Delegate& d) : d_(d), m_(*d.method) {}

  Error build() {
    const size_t inputs = m_.num_inputs(), outputs = m_.num_outputs();
    xnn_subgraph_t s = nullptr;
    ET_TRY(xnn_error(xnn_create_subgraph(static_cast<uint32_t>(inputs + outputs), 0, &s), "xnn_create_subgraph"));
    d_.subgraph.reset(s);
    for (size_t i = 0; i < m_.num_values(); ++i) {
      if (m_.value_memory(i) == runtime::Method::Memory::Constant) constants_.insert(&m_.value(i));
    }
    for (size_t k = 0; k < inputs; ++k) external_[&m_.input(k)] = static_cast<uint32_t>(k);
    for (size_t k = 0; k < outputs; ++k) external_[&m_.get_output(k)] = static_cast<uint32_t>(inputs + k);
    for (size_t k = 0; k < inputs + outputs; ++k) {
      const EValue& v = k < inputs ? m_.input(k) : m_.get_output(k - inputs);
      ET_CHECK_OR_RETURN(v.is_tensor() && v.to_tensor().scalar_type() == runtime::ScalarType::Float,
                         Error::NotSupported, "%s: the payload's %s %zu is not a float32 tensor", kXnnpackBackendName,
                         k < inputs ? "input" : "output", k < inputs ? k : k - inputs);
      d_.externals.push_back(&const_cast<EValue&>(v).to_tensor());
    }
    for (size_t i = 0; i < m_.num_instructions(); ++i) ET_TRY(node(i));
    return Error::Ok;
  }

 private:
  // The XNNPACK value of tensor `v` (defined on first use).
  runtime::Result<uint32_t> value(EValue* v, const char* op) {
    ET_CHECK_OR_RETURN(v != nullptr && v->is_tensor(), Error::NotSupported, "%s %s: an operand is not a tensor",
                       kXnnpackBackendName, op);
    if (auto it = ids_.find(v); it != ids_.end()) return it->second;
    const Tensor& t = v->to_tensor();
    ET_CHECK_OR_RETURN(t.scalar_type() == runtime::ScalarType::Float, Error::NotSupported,
                       "%s %s: %s tensors are not run (float32 only)", kXnnpackBackendName, op,
                       runtime::to_string(t.scalar_type()));
    std::vector<size_t> dims(t.sizes(), t.sizes() + t.dim());
    const auto ext = external_.find(v);
    const bool constant = is_constant(v);
    uint32_t flags = 0, external = XNN_INVALID_VALUE_ID;
    if (ext != external_.end()) {
      external = ext->second;
      flags = external < m_.num_inputs() ? XNN_VALUE_FLAG_EXTERNAL_INPUT : XNN_VALUE_FLAG_EXTERNAL_OUTPUT;
    }
    uint32_t id = 0;
    ET_TRY(xnn_error(xnn_define_tensor_value(d_.subgraph.get(), xnn_datatype_fp32, dims.size(), dims.data(),
                                             constant ? t.const_data_ptr() : nullptr, external, flags, &id),
                     "xnn_define_tensor_value"));
    ids_[v] = id;
    return id;
  }

  bool is_constant(const EValue* v) const { return constants_.count(v) != 0; }

  Error number(const EValue* v, double want, const char* op, const char* what) {
    const bool ok = v != nullptr && (v->is_int() || v->is_double()) && v->scalar_as_double() == want;
    ET_CHECK_OR_RETURN(ok, Error::NotSupported, "%s %s: only %s = %g is run", kXnnpackBackendName, op, what, want);
    return Error::Ok;
  }

  Error clamp(EValue* in, EValue* out, float low, float high) {
    ET_TRY_ASSIGN(const uint32_t x, value(in, "clamp"));
    ET_TRY_ASSIGN(const uint32_t y, value(out, "clamp"));
    xnn_unary_params p{};
    p.clamp.min = low, p.clamp.max = high;
    return xnn_error(xnn_define_unary(d_.subgraph.get(), xnn_unary_clamp, &p, x, y, 0), "xnn_define_unary");
  }

  Error node(size_t i) {
    const char* name = m_.instruction_operator(i);
    ET_CHECK_OR_RETURN(name != nullptr, Error::NotSupported, "%s: instruction %zu is not a kernel call",
                       kXnnpackBackendName, i);
    const std::string op(name);
    Span<EValue*> a = m_.instruction_args(i);
    if (op == "aten::relu" && a.size() == 2) return clamp(a[0], a[1], 0.f, INFINITY);
    if (op == "aten::hardtanh" && a.size() == 4) {
      return clamp(a[0], a[3], static_cast<float>(a[1]->scalar_as_double()),
                   static_cast<float>(a[2]->scalar_as_double()));
    }
    const bool add = op == "aten::add" || op == "aten::add.Tensor", sub = op == "aten::sub.Tensor";
    if ((add || sub || op == "aten::mul.Tensor") && a.size() == (op == "aten::mul.Tensor" ? 3u : 4u) &&
        a[1]->is_tensor()) {
      if (a.size() == 4) ET_TRY(number(a[2], 1, name, "alpha"));
      ET_TRY_ASSIGN(const uint32_t x, value(a[0], name));
      ET_TRY_ASSIGN(const uint32_t y, value(a[1], name));
      ET_TRY_ASSIGN(const uint32_t z, value(a[a.size() - 1], name));
      const xnn_binary_operator kind = add ? xnn_binary_add : sub ? xnn_binary_subtract : xnn_binary_multiply;
      return xnn_error(xnn_define_binary(d_.subgraph.get(), kind, nullptr, x, y, z, 0), "xnn_define_binary");
    }
    if ((op == "aten::addmm" && a.size() == 6) || (op == "aten::mm" && a.size() == 3)) {
      const bool bias = op == "aten::addmm";
      if (bias) {
        ET_TRY(number(a[3], 1, name, "beta"));
        ET_TRY(number(a[4], 1, name, "alpha"));
      }
      EValue* w = a[bias ? 2 : 1];
      ET_CHECK_OR_RETURN(w->is_tensor() && is_constant(w) && w->to_tensor().dim() == 2, Error::NotSupported,
                         "%s %s: the weight must be a 2-D constant", kXnnpackBackendName, name);
      ET_TRY_ASSIGN(const uint32_t x, value(a[bias ? 1 : 0], name));
      ET_TRY_ASSIGN(const uint32_t filter, value(w, name));
      uint32_t b = XNN_INVALID_VALUE_ID;
      if (bias) {
        const Tensor& bt = a[0]->to_tensor();
        ET_CHECK_OR_RETURN(a[0]->is_tensor() && is_constant(a[0]) && bt.numel() == w->to_tensor().size(1),
                           Error::NotSupported, "%s %s: the bias must be a constant per output feature",
                           kXnnpackBackendName, name);
        const size_t n = static_cast<size_t>(bt.numel());
        ET_TRY(xnn_error(xnn_define_tensor_value(d_.subgraph.get(), xnn_datatype_fp32, 1, &n, bt.const_data_ptr(),
                                                 XNN_INVALID_VALUE_ID, 0, &b),
                         "xnn_define_tensor_value"));
      }
      ET_TRY_ASSIGN(const uint32_t y, value(a[a.size() - 1], name));
      // Our weight is [in, out] (the transposed linear weight the exporter folds).
      return xnn_error(xnn_define_fully_connected(d_.subgraph.get(), -INFINITY, INFINITY, x, filter, b, y,
                                                  XNN_FLAG_TRANSPOSE_WEIGHTS),
                       "xnn_define_fully_connected");
    }
    return ET_ERROR(Error::NotSupported, "%s does not run %s", kXnnpackBackendName, name);
  }

  Delegate& d_;
  runtime::Method& m_;
  std::unordered_map<const EValue*, uint32_t> external_;
  std::unordered_map<const EValue*, uint32_t> ids_;
  std::unordered_set<const EValue*> constants_;  // the payload's constant tensors
};

// The runtime of `d` on the pool as it is now (made again where the pool was replaced).
Error ensure_runtime(Delegate& d) {
  void* pool = extension::threadpool::pthreadpool_handle();
  if (d.runtime && d.pool == pool) return Error::Ok;
  d.runtime.reset();
  d.pool = nullptr;
  xnn_runtime_t r = nullptr;
  ET_TRY(xnn_error(xnn_create_runtime_v4(d.subgraph.get(), d.cache.get(), d.workspace.get(),
                                         static_cast<pthreadpool_t>(pool), 0, &r),
                   "xnn_create_runtime_v4"));
  d.runtime.reset(r);
  d.pool = pool;
  if (!d.packed) {  // the weights are packed; later runtimes of this call site find them in the cache
    ET_TRY(xnn_error(xnn_finalize_weights_cache(d.cache.get(), xnn_weights_cache_finalization_kind_soft),
                     "xnn_finalize_weights_cache"));
    d.packed = true;
  }
  const Error e = xnn_error(xnn_reshape_runtime(d.runtime.get()), "xnn_reshape_runtime");
  if (e != Error::Ok) d.runtime.reset();  // never left half made
  return e;
}

class XnnpackBackend final : public runtime::BackendInterface {
 public:
  bool is_available() const override { return initialized() == xnn_status_success; }

  runtime::Result<runtime::DelegateHandle*> init(runtime::BackendInitContext&, Span<const uint8_t> processed,
                                                 Span<const runtime::CompileSpec>) const override {
    ET_TRY(xnn_error(initialized(), "xnn_initialize"));
    auto d = std::unique_ptr<Delegate>(new (std::nothrow) Delegate());
    if (!d) return ET_ERROR(Error::MemoryAllocationFailed, "%s: out of memory", kXnnpackBackendName);
    // The payload is a program of its own; loading it runs every check a .pte gets.
    ET_TRY_ASSIGN(auto loader, runtime::OwnedBufferDataLoader::copy_of(processed.data(), processed.size()));
    auto program = runtime::Program::load(std::move(loader));
    if (!program.ok()) return ET_ERROR_CONTEXT(program.error(), "%s payload", kXnnpackBackendName);
    d->program = std::move(program.get());
    const char* method_name = d->program->method_name(0);
    ET_TRY_ASSIGN(const auto sizes, d->program->planned_buffer_sizes(method_name));
    for (uint64_t bytes : sizes) d->planned.emplace_back(static_cast<size_t>(bytes));
    for (auto& b : d->planned) d->spans.emplace_back(b.data(), b.size());
    d->memory = std::make_unique<runtime::MemoryManager>(Span<Span<uint8_t>>(d->spans.data(), d->spans.size()));
    auto method = d->program->load_method(method_name, d->memory.get());
    if (!method.ok()) return ET_ERROR_CONTEXT(method.error(), "%s payload", kXnnpackBackendName);
    d->method = std::move(method.get());
    ET_TRY(SubgraphBuilder(*d).build());
    xnn_weights_cache_t cache = nullptr;
    ET_TRY(xnn_error(xnn_create_weights_cache(&cache), "xnn_create_weights_cache"));
    d->cache.reset(cache);
    xnn_workspace_t workspace = nullptr;
    ET_TRY(xnn_error(xnn_create_workspace(&workspace), "xnn_create_workspace"));
    d->workspace.reset(workspace);
    ET_TRY(ensure_runtime(*d));
    return d.release();
  }

  Error execute(runtime::DelegateHandle* handle, Span<EValue*> args) const override {
    auto& d = *static_cast<Delegate*>(handle);
    std::lock_guard<std::mutex> lock(d.run);
    ET_CHECK_OR_RETURN(args.size() == d.externals.size(), Error::InvalidArgument, "%s: %zu arguments, expected %zu",
                       kXnnpackBackendName, args.size(), d.externals.size());
    std::vector<xnn_external_value> values(args.size());
    for (size_t k = 0; k < args.size(); ++k) {
      const Tensor& want = *d.externals[k];
      ET_CHECK_OR_RETURN(args[k] != nullptr && args[k]->is_tensor(), Error::InvalidArgument,
                         "%s: argument %zu is not a tensor", kXnnpackBackendName, k);
      Tensor& t = args[k]->to_tensor();
      ET_CHECK_OR_RETURN(t.scalar_type() == want.scalar_type() && runtime::same_shape(t, want), Error::InvalidArgument,
                         "%s: argument %zu differs in dtype or shape from the payload's", kXnnpackBackendName, k);
      values[k] = {static_cast<uint32_t>(k), t.mutable_data_ptr()};
    }
    ET_TRY(ensure_runtime(d));
    ET_TRY(xnn_error(xnn_setup_runtime_v2(d.runtime.get(), values.size(), values.data()), "xnn_setup_runtime_v2"));
    return xnn_error(xnn_invoke_runtime(d.runtime.get()), "xnn_invoke_runtime");
  }

  void destroy(runtime::DelegateHandle* handle) const override { delete static_cast<Delegate*>(handle); }

 private:
  static xnn_status initialized() {
    static const xnn_status status = xnn_initialize(nullptr);
    return status;
  }
};

// Registers at load time: linking (or dlopen-ing) this library is all a program has to do.
const bool registered = [] {
  const Error error = runtime::register_backend({kXnnpackBackendName, &xnnpack_backend()});
  if (error != Error::Ok) {
    std::fprintf(stderr, "executorch: registering %s failed: %s\n", kXnnpackBackendName, runtime::to_string(error));
  }
  return error == Error::Ok;
}();

}  // namespace

runtime::BackendInterface& xnnpack_backend() {
  static XnnpackBackend backend;
  return backend;
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
