#include <executorch/extension/threadpool/threadpool.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <pthreadpool.h>

namespace executorch {
namespace extension {
namespace threadpool {
namespace {

thread_local bool inside_pool_task = false;

size_t default_threads() {
  // Parsed by hand: glibc >= 2.38 headers redirect strtol to a symbol older systems lack.
  if (const char* env = std::getenv("EXECUTORCH_NUM_THREADS")) {
    size_t n = 0;
    for (const char* p = env; *p >= '0' && *p <= '9' && n < 4096; ++p) n = n * 10 + static_cast<size_t>(*p - '0');
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// The process's pthreadpool (the library XNNPACK runs on too), which this library owns: one set of
// worker threads for our kernels and every delegate that takes a pthreadpool_t.
class Pool {
 public:
  Pool() { resize(default_threads()); }

  // Read without the lock: a kernel running inside a job (which holds it) asks too.
  size_t threads() const { return threads_.load(std::memory_order_relaxed); }

  void resize(size_t threads) {
    std::lock_guard<std::mutex> lock(submit_);
    if (pool_ != nullptr) pthreadpool_destroy(pool_);
    pool_ = pthreadpool_create(std::max<size_t>(threads, 1));
    threads_.store(pthreadpool_get_threads_count(pool_), std::memory_order_relaxed);
  }

  pthreadpool_t get() {
    std::lock_guard<std::mutex> lock(submit_);
    return pool_;
  }

  void run(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    std::lock_guard<std::mutex> lock(submit_);
    const int64_t n = end - begin;
    const int64_t max_chunks = static_cast<int64_t>(pthreadpool_get_threads_count(pool_)) * 4;
    Job job{&fn, begin, end, std::max(grain, (n + max_chunks - 1) / max_chunks)};
    pthreadpool_parallelize_1d(pool_, &Pool::chunk, &job, static_cast<size_t>((n + job.chunk - 1) / job.chunk), 0);
  }

 private:
  // One parallel_for call: [begin, end) in chunks of `chunk`, chunk i run as pthreadpool's task i.
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t begin, end, chunk;
  };

  static void chunk(void* context, size_t i) {
    const Job& job = *static_cast<const Job*>(context);
    const int64_t b = job.begin + static_cast<int64_t>(i) * job.chunk;
    inside_pool_task = true;  // a parallel_for inside fn runs serially on this thread
    (*job.fn)(b, std::min(job.end, b + job.chunk));
    inside_pool_task = false;
  }

  std::mutex submit_;  // one job (or resize) at a time
  pthreadpool_t pool_ = nullptr;
  std::atomic<size_t> threads_{1};
};

Pool& pool() {
  static Pool* instance = new Pool();  // never destroyed: delegates may run on it during static destruction
  return *instance;
}

}  // namespace

size_t get_num_threads() { return pool().threads(); }

void set_num_threads(size_t threads) { pool().resize(threads == 0 ? default_threads() : threads); }

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  grain = std::max<int64_t>(grain, 1);
  if (inside_pool_task || end - begin <= grain || get_num_threads() == 1) {
    fn(begin, end);
    return;
  }
  pool().run(begin, end, grain, fn);
}

const void* pool_identity() { return &pool(); }

void* pthreadpool_handle() { return pool().get(); }

}  // namespace threadpool
}  // namespace extension
}  // namespace executorch
