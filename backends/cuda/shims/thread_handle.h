#pragma once

namespace executorch {
namespace backends {
namespace cuda {

// The calling thread's handle of a library loaded at run time (a cuBLAS or cuDNN handle must not
// be used by two threads at once): made by lib.create on the thread's first use, destroyed with
// lib.destroy when the thread ends. `status` is what create returned.
template <typename Library, typename Handle, typename Status>
struct ThreadHandle {
  Handle handle = nullptr;
  Status status = 0;
  explicit ThreadHandle(Library& lib) : lib_(lib) { status = lib.create(&handle); }
  ThreadHandle(const ThreadHandle&) = delete;
  ThreadHandle& operator=(const ThreadHandle&) = delete;
  ~ThreadHandle() {
    if (handle != nullptr) lib_.destroy(handle);
  }

 private:
  Library& lib_;
};

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
