#pragma once

#include <string>
#include <vector>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace backends {
namespace xnnpack {

// The name programs use to delegate to this backend.
inline constexpr const char kXnnpackBackendName[] = "XnnpackBackend";

// The process's XnnpackBackend instance, the one registered under kXnnpackBackendName. Its payload
// is a program of its own (the .pte format), whose one method becomes an XNNPACK subgraph at init:
// weights packed once into a weights cache, run by an XNNPACK runtime with a workspace on the
// process's thread pool (threadpool::pthreadpool_handle()).
EXECUTORCH_API runtime::BackendInterface& xnnpack_backend();

// For each instruction of the first method of `program` (a .pte), why XnnpackBackend would not
// run it ('' where it would): the partitioner's question, answered by the code init runs.
EXECUTORCH_API runtime::Result<std::vector<std::string>> explain_instructions(runtime::Span<const uint8_t> program);

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
