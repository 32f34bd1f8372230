#pragma once

// One owner for every kind of CUDA resource: a unique_ptr whose deleter is the API's own destroy
// function. Header-only: each library that includes it holds no state of it.
#include <memory>
#include <type_traits>

#include <cuda_runtime_api.h>

namespace executorch {
namespace extension {
namespace cuda {

template <auto Destroy>
struct Destroyer {
  template <typename T>
  void operator()(T* handle) const {
    Destroy(handle);
  }
};

// `Handle` is the API's pointer type (cudaStream_t, void* for memory); `Destroy` frees one.
template <typename Handle, auto Destroy>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, Destroyer<Destroy>>;

using DeviceMemory = Owned<void*, cudaFree>;
using PinnedMemory = Owned<void*, cudaFreeHost>;
using Stream = Owned<cudaStream_t, cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, cudaEventDestroy>;
using Graph = Owned<cudaGraph_t, cudaGraphDestroy>;
using GraphExec = Owned<cudaGraphExec_t, cudaGraphExecDestroy>;

// What C++23's std::out_ptr does, for the C APIs that create through an out-parameter:
// `cudaMalloc(out(memory), bytes)` leaves the new allocation (or nothing) owned by `memory`, which
// frees what it held before.
template <typename Owner>
class OutParam {
 public:
  explicit OutParam(Owner& owner) : owner_(owner) {}
  OutParam(const OutParam&) = delete;
  OutParam& operator=(const OutParam&) = delete;
  ~OutParam() { owner_.reset(raw_); }
  operator typename Owner::pointer *() { return &raw_; }

 private:
  Owner& owner_;
  typename Owner::pointer raw_ = nullptr;
};

template <typename Owner>
OutParam<Owner> out(Owner& owner) {
  return OutParam<Owner>(owner);
}

}  // namespace cuda
}  // namespace extension
}  // namespace executorch
