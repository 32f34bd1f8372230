#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace extension {
namespace threadpool {

// The process's one CPU thread pool (in libexecutorch_threadpool.so.1, which also defines and
// exports pthreadpool and cpuinfo, built from Debian's sources). Sized from the CPU count, or from
// EXECUTORCH_NUM_THREADS when set; set_num_threads() changes it.
EXECUTORCH_API size_t get_num_threads();
EXECUTORCH_API void set_num_threads(size_t threads);  // 0: back to the default

// Runs fn(chunk_begin, chunk_end) over [begin, end) in chunks of at least `grain` items, on the
// pool and the calling thread, and returns when all are done. fn must not throw. Calls made from
// inside fn run serially on that thread.
EXECUTORCH_API void parallel_for(int64_t begin, int64_t end, int64_t grain,
                                 const std::function<void(int64_t, int64_t)>& fn);

// The pool object itself: the same address from every library of a process (one pool).
EXECUTORCH_API const void* pool_identity();

// The pthreadpool under the pool, for libraries that take one (XNNPACK): the same workers. Valid
// until the next set_num_threads().
EXECUTORCH_API void* pthreadpool_handle();

}  // namespace threadpool
}  // namespace extension
}  // namespace executorch
