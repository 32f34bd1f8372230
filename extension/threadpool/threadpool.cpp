#include <executorch/extension/threadpool/threadpool.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

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

// One parallel_for call: a range split into chunks that workers and the caller claim through an
// atomic counter. Each call has its own Job, so a worker that wakes late only sees an exhausted one.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t end, chunk;
  std::atomic<int64_t> next;
  std::atomic<int64_t> pending;  // chunks not yet finished
};

class Pool {
 public:
  Pool() { resize(default_threads()); }

  size_t threads() {
    std::lock_guard<std::mutex> lock(submit_);
    return workers_.size() + 1;
  }

  void resize(size_t threads) {
    std::lock_guard<std::mutex> lock(submit_);
    stop();
    for (size_t i = 1; i < std::max<size_t>(threads, 1); ++i) workers_.emplace_back([this] { work(); });
  }

  void run(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    std::lock_guard<std::mutex> lock(submit_);
    const int64_t n = end - begin;
    const int64_t max_chunks = static_cast<int64_t>(workers_.size() + 1) * 4;
    const int64_t chunk = std::max(grain, (n + max_chunks - 1) / max_chunks);
    auto job = std::make_shared<Job>();
    job->fn = &fn;
    job->end = end;
    job->chunk = chunk;
    job->next.store(begin);
    job->pending.store((n + chunk - 1) / chunk);
    {
      std::lock_guard<std::mutex> guard(mutex_);
      job_ = job;
      ++generation_;
      posted_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    claim_chunks(*job);
    std::unique_lock<std::mutex> guard(mutex_);
    done_.wait(guard, [&] { return job->pending.load() == 0; });
    job_.reset();
  }

 private:
  void claim_chunks(Job& job) {
    inside_pool_task = true;
    int64_t finished = 0;
    for (;;) {
      const int64_t b = job.next.fetch_add(job.chunk);
      if (b >= job.end) break;
      (*job.fn)(b, std::min(job.end, b + job.chunk));
      ++finished;
    }
    inside_pool_task = false;
    if (finished && job.pending.fetch_sub(finished) == finished) {
      std::lock_guard<std::mutex> guard(mutex_);
      done_.notify_all();
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      // Kernels post jobs back to back: spin briefly before sleeping, since a futex wake-up costs
      // more than most of those jobs.
      for (int spin = 0; spin < 20000 && posted_.load(std::memory_order_acquire) == seen; ++spin) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> guard(mutex_);
        wake_.wait(guard, [&] { return stopping_ || (generation_ != seen && job_ != nullptr); });
        if (stopping_) return;
        seen = generation_;
        job = job_;
      }
      claim_chunks(*job);
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    stopping_ = false;
  }

  std::mutex submit_;  // one job (or resize) at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> posted_{0};  // generation_, readable without the lock
  std::shared_ptr<Job> job_;
};

Pool& pool() {
  static Pool* instance = new Pool();  // never destroyed: workers may outlive static destructors
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

}  // namespace threadpool
}  // namespace extension
}  // namespace executorch
