#pragma once

// An AOTInductor model library (the .so that PyTorch's AOT compile makes, which links no libtorch
// and calls the aoti_torch_* shims) loaded from a program's bytes. The bytes go to an anonymous
// memory file (memfd_create), opened through /proc/self/fd: nothing is left on a file system path.
// The container functions of PyTorch's torch/csrc/inductor/aoti_runtime/interface.h are resolved at
// load, and a library lacking one is refused by name. Needs no GPU (the CPU tests load a container
// library built in this repository).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <executorch/backends/cuda/shims/shims.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/executor/method.h>

namespace executorch {
namespace backends {
namespace cuda {

// The container ABI's types, as interface.h spells them.
using AOTIRuntimeError = int32_t;
struct AOTInductorModelContainerOpaque;
using AOTInductorModelContainerHandle = AOTInductorModelContainerOpaque*;
struct AOTInductorStreamOpaque;
using AOTInductorStreamHandle = AOTInductorStreamOpaque*;
struct AOTIProxyExecutorOpaque;
using AOTIProxyExecutorHandle = AOTIProxyExecutorOpaque*;
// interface.h passes constants as a std::unordered_map<std::string, AtenTensorHandle>* behind this.
struct AOTInductorConstantMap;
using AOTInductorConstantMapHandle = AOTInductorConstantMap*;
using AotiConstantMap = std::unordered_map<std::string, AtenTensorHandle>;

// A tensor handle of the shim library, deleted when it goes (CudaBackend's matrix-product operands,
// AotiModel's views of a method's tensors). A named deleter rather than ecuda::Owned: a shim
// function's name inside this library's symbol names would read as a second definition of it to
// the symbol-table checks.
struct DeleteShimTensor {
  void operator()(AtenTensorHandle handle) const { aoti_torch_delete_tensor_object(handle); }
};
using ShimTensor = std::unique_ptr<AtenTensorOpaque, DeleteShimTensor>;

// The container functions a model library must export.
struct AotiContainerAbi {
  AOTIRuntimeError (*create_with_device)(AOTInductorModelContainerHandle* container, size_t num_models,
                                         const char* device, const char* cubin_dir) = nullptr;
  AOTIRuntimeError (*destroy)(AOTInductorModelContainerHandle container) = nullptr;
  AOTIRuntimeError (*run)(AOTInductorModelContainerHandle container, AtenTensorHandle* inputs, size_t num_inputs,
                          AtenTensorHandle* outputs, size_t num_outputs, AOTInductorStreamHandle stream,
                          AOTIProxyExecutorHandle proxy_executor) = nullptr;
  AOTIRuntimeError (*get_num_inputs)(AOTInductorModelContainerHandle container, size_t* count) = nullptr;
  AOTIRuntimeError (*get_num_outputs)(AOTInductorModelContainerHandle container, size_t* count) = nullptr;
  AOTIRuntimeError (*get_num_constants)(AOTInductorModelContainerHandle container, size_t* count) = nullptr;
  AOTIRuntimeError (*get_constant_name)(AOTInductorModelContainerHandle container, size_t index,
                                        const char** name) = nullptr;
  AOTIRuntimeError (*update_constant_buffer)(AOTInductorModelContainerHandle container,
                                             AOTInductorConstantMapHandle constants, bool use_inactive,
                                             bool validate_full_update) = nullptr;
};

// A loaded model library; dlclose'd when destroyed (after every container made from it).
class AotiLibrary {
 public:
  // InvalidProgram where `bytes` are no shared library of this machine, the loader refuses them, or
  // a container function is missing; the message names which.
  static runtime::Result<std::unique_ptr<AotiLibrary>> load(runtime::Span<const uint8_t> bytes);
  AotiLibrary(const AotiLibrary&) = delete;
  AotiLibrary& operator=(const AotiLibrary&) = delete;
  ~AotiLibrary();

  const AotiContainerAbi& abi() const { return abi_; }

 private:
  explicit AotiLibrary(void* handle) : handle_(handle) {}
  void* handle_;
  AotiContainerAbi abi_;
};

// One model container of a library: created for `device` ("cpu", "cuda", "cuda:0"), given every
// constant it names, run on tensors of the shims. Deleted when destroyed.
class AotiContainer {
 public:
  static runtime::Result<std::unique_ptr<AotiContainer>> create(std::shared_ptr<const AotiLibrary> library,
                                                                const char* device);
  AotiContainer(const AotiContainer&) = delete;
  AotiContainer& operator=(const AotiContainer&) = delete;
  ~AotiContainer();

  size_t num_inputs() const { return num_inputs_; }
  size_t num_outputs() const { return num_outputs_; }
  // The names of the constants the container reads, in its order.
  const std::vector<std::string>& constant_names() const { return constant_names_; }

  // Hands the container its constants (tensors the caller keeps alive). InvalidArgument where one it
  // names is missing.
  runtime::Error set_constants(const AotiConstantMap& constants);
  // Runs on `inputs`, which the container takes over and deletes (AOTInductor steals its input
  // handles) once the call reaches it: not where the counts are refused here. `outputs` receives new
  // tensors the caller deletes (aoti_torch_delete_tensor_object).
  runtime::Error run(runtime::Span<AtenTensorHandle> inputs, runtime::Span<AtenTensorHandle> outputs,
                     void* stream = nullptr);

 private:
  AotiContainer(std::shared_ptr<const AotiLibrary> library, AOTInductorModelContainerHandle handle)
      : library_(std::move(library)), handle_(handle) {}
  std::shared_ptr<const AotiLibrary> library_;
  AOTInductorModelContainerHandle handle_;
  size_t num_inputs_ = 0, num_outputs_ = 0;
  std::vector<std::string> constant_names_;
};

// A container driven by the method of an AOTI payload (docs/program_format.md): the method declares
// the model's inputs, outputs and constants; `constant_names` names the constants in value order
// (the payload's aoti_constants). Every tensor's memory is the caller's and stays where it is (host
// memory for "cpu"; device memory for "cuda", where the caller moved the method's tensors): the
// container reads the constants in place, no second copy.
class AotiModel {
 public:
  // InvalidProgram where the library is refused, its container counts other inputs or outputs than
  // the method, or the names and the method's constants differ in number; InvalidArgument where the
  // container names a constant the method lacks.
  static runtime::Result<std::unique_ptr<AotiModel>> load(runtime::Span<const uint8_t> library,
                                                          const std::vector<std::string>& constant_names,
                                                          runtime::Method& method, const char* device);
  AotiModel(const AotiModel&) = delete;
  AotiModel& operator=(const AotiModel&) = delete;
  ~AotiModel() = default;

  // Runs the container on the method's input tensors and copies what it returns into the method's
  // output tensors (same dtype and element count, contiguous), on `stream`, which must be the
  // current stream (ecuda::StreamGuard) for the copies to follow it; null on the CPU.
  runtime::Error run(void* stream);

 private:
  AotiModel() = default;
  runtime::Method* method_ = nullptr;
  std::shared_ptr<const AotiLibrary> library_;
  std::vector<ShimTensor> constants_;         // views of the method's constants, which the container reads
  std::unique_ptr<AotiContainer> container_;  // declared after them: destroyed first
  int32_t device_type_ = 0;
};

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
