#include <executorch/backends/xnnpack/runtime/xnnpack_backend.h>

#include "backends/xnnpack/runtime/subgraph.h"

#include <xnnpack.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/data_loader.h>
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
  std::unique_ptr<runtime::Method> method;
  std::vector<std::unique_ptr<float[]>> statics;  // repacked weights and scalars the subgraph reads
  Subgraph subgraph;
  WeightsCache cache;
  Workspace workspace;
  Runtime runtime;
  void* pool = nullptr;
  bool packed = false;                       // the cache holds the weights (finalized after the first runtime)
  std::vector<Tensor*> externals;            // the payload's inputs, then its outputs, by external id
  std::vector<std::vector<uint8_t>> copies;  // inputs whose memory an output shares, copied per run
  std::mutex run;                            // one execution at a time per call site
};

Error build_subgraph(Delegate& d) {
  runtime::Method& m = *d.method;
  xnn_subgraph_t s = nullptr;
  ET_TRY(xnn_error(xnn_create_subgraph(static_cast<uint32_t>(m.num_inputs() + m.num_outputs()), 0, &s),
                   "xnn_create_subgraph"));
  d.subgraph.reset(s);
  SubgraphBuilder builder(m, s, SubgraphBuilder::Mode::External, &d.statics);
  ET_TRY(builder.define_externals());
  for (size_t k = 0; k < m.num_inputs(); ++k) d.externals.push_back(&const_cast<EValue&>(m.input(k)).to_tensor());
  for (size_t k = 0; k < m.num_outputs(); ++k) {
    d.externals.push_back(&const_cast<EValue&>(m.get_output(k)).to_tensor());
  }
  for (size_t i = 0; i < m.num_instructions(); ++i) ET_TRY(builder.node(i));
  return builder.finish();
}

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
    auto method = d->program->load_method(method_name);
    if (!method.ok()) return ET_ERROR_CONTEXT(method.error(), "%s payload", kXnnpackBackendName);
    d->method = std::move(method.get());
    ET_TRY(build_subgraph(*d));
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
    // The caller's memory plan may put an output where an input lies (the input dies at this
    // call); XNNPACK writes outputs while it still reads inputs, so such an input is read from a copy.
    const size_t inputs = d.method->num_inputs();
    d.copies.resize(inputs);
    for (size_t k = 0; k < inputs; ++k) {
      const auto* in = static_cast<const uint8_t*>(values[k].data);
      const size_t bytes = args[k]->to_tensor().nbytes();
      bool overlaps = false;
      for (size_t j = inputs; j < args.size(); ++j) {
        const auto* out = static_cast<const uint8_t*>(values[j].data);
        overlaps = overlaps || (in < out + args[j]->to_tensor().nbytes() && out < in + bytes);
      }
      if (!overlaps) continue;
      d.copies[k].assign(in, in + bytes);
      values[k].data = d.copies[k].data();
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
