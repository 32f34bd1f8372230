#include <executorch/backends/cuda/runtime/aoti_library.h>

#include <executorch/extension/cuda/owned.h>
#include <executorch/runtime/core/log.h>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace executorch {
namespace backends {
namespace cuda {

using runtime::Error;
using runtime::Result;
using runtime::Span;

namespace {

constexpr const char* kWho = "CudaBackend AOTI payload";

// An open file descriptor, closed when it goes.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Error write_all(int fd, Span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ET_CHECK_OR_RETURN(n > 0, Error::MemoryAllocationFailed, "%s: writing its library to memory: %s", kWho,
                       std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return Error::Ok;
}

template <typename F>
Error resolve(void* handle, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(handle, name));
  ET_CHECK_OR_RETURN(*fn != nullptr, Error::InvalidProgram, "%s: its library does not export %s", kWho, name);
  return Error::Ok;
}

Error container_call(AOTIRuntimeError e, const char* what) {
  ET_CHECK_OR_RETURN(e == 0, Error::InvalidProgram, "%s: %s failed (error %d)", kWho, what, static_cast<int>(e));
  return Error::Ok;
}

// Whether `bytes` hold a whole 64-bit little-endian ELF shared object of this machine: its header,
// program headers and every loadable segment's file range inside `bytes`. The dynamic loader maps
// segments past the end of a truncated file, and touching them raises SIGBUS: checked here first.
Error check_elf(Span<const uint8_t> bytes) {
  Elf64_Ehdr eh;
  ET_CHECK_OR_RETURN(bytes.size() >= sizeof(eh) && std::memcmp(bytes.data(), ELFMAG, SELFMAG) == 0,
                     Error::InvalidProgram, "%s: its library is no ELF shared object (%zu bytes)", kWho, bytes.size());
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  ET_CHECK_OR_RETURN(eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_ident[EI_DATA] == ELFDATA2LSB && eh.e_type == ET_DYN &&
                         eh.e_machine == EM_X86_64 && eh.e_phentsize == sizeof(Elf64_Phdr),
                     Error::InvalidProgram, "%s: its library is not a 64-bit x86-64 shared object", kWho);
  const uint64_t size = bytes.size();
  ET_CHECK_OR_RETURN(eh.e_phoff <= size && eh.e_phnum <= (size - eh.e_phoff) / sizeof(Elf64_Phdr),
                     Error::InvalidProgram, "%s: its library is truncated (program headers past its %zu bytes)", kWho,
                     bytes.size());
  for (size_t k = 0; k < eh.e_phnum; ++k) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + k * sizeof(Elf64_Phdr), sizeof(ph));
    if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC) continue;
    ET_CHECK_OR_RETURN(ph.p_offset <= size && ph.p_filesz <= size - ph.p_offset, Error::InvalidProgram,
                       "%s: its library is truncated (segment %zu ends past its %zu bytes)", kWho, k, bytes.size());
  }
  return Error::Ok;
}

// Generated code finds the shims and the CUDA runtime by name, in the process's global scope. A
// host that loaded this library RTLD_LOCAL (Python loads extensions so) has them in a local scope
// only: each is promoted, through the file that defines `symbol`.
Error make_global(const void* symbol, const char* what) {
  Dl_info info;
  ET_CHECK_OR_RETURN(dladdr(symbol, &info) != 0 && info.dli_fname != nullptr, Error::Internal,
                     "%s: cannot find the library defining %s", kWho, what);
  void* handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  ET_CHECK_OR_RETURN(handle != nullptr, Error::Internal, "%s: cannot make %s global: %s", kWho, info.dli_fname,
                     dlerror());
  dlclose(handle);  // only the reference this call took; the library stays, now global
  return Error::Ok;
}

}  // namespace

Result<std::unique_ptr<AotiLibrary>> AotiLibrary::load(Span<const uint8_t> bytes) {
  ET_TRY(check_elf(bytes));
  ET_TRY(make_global(reinterpret_cast<const void*>(&aoti_torch_empty_strided), "the aoti_torch_* shims"));
  ET_TRY(make_global(reinterpret_cast<const void*>(&cudaMalloc), "the CUDA runtime"));

  const Fd fd(memfd_create("executorch-aoti-model", MFD_CLOEXEC));
  ET_CHECK_OR_RETURN(fd.get() >= 0, Error::MemoryAllocationFailed, "%s: memfd_create: %s", kWho, std::strerror(errno));
  ET_TRY(write_all(fd.get(), bytes));
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd.get());
  // RTLD_LOCAL: two models' generated symbols never meet. The shims they call resolve against the
  // libaoti_cuda_shims.so the process has loaded.
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return ET_ERROR(Error::InvalidProgram, "%s: the loader refused its library: %s", kWho, why ? why : "?");
  }
  std::unique_ptr<AotiLibrary> lib(new (std::nothrow) AotiLibrary(handle));
  if (lib == nullptr) {
    dlclose(handle);
    return Error::MemoryAllocationFailed;
  }
  AotiContainerAbi& a = lib->abi_;
  ET_TRY(resolve(handle, "AOTInductorModelContainerCreateWithDevice", &a.create_with_device));
  ET_TRY(resolve(handle, "AOTInductorModelContainerDelete", &a.destroy));
  ET_TRY(resolve(handle, "AOTInductorModelContainerRun", &a.run));
  ET_TRY(resolve(handle, "AOTInductorModelContainerGetNumInputs", &a.get_num_inputs));
  ET_TRY(resolve(handle, "AOTInductorModelContainerGetNumOutputs", &a.get_num_outputs));
  ET_TRY(resolve(handle, "AOTInductorModelContainerGetNumConstants", &a.get_num_constants));
  ET_TRY(resolve(handle, "AOTInductorModelContainerGetConstantName", &a.get_constant_name));
  ET_TRY(resolve(handle, "AOTInductorModelContainerUpdateConstantBuffer", &a.update_constant_buffer));
  return lib;
}

AotiLibrary::~AotiLibrary() { dlclose(handle_); }

Result<std::unique_ptr<AotiContainer>> AotiContainer::create(std::shared_ptr<const AotiLibrary> library,
                                                             const char* device) {
  const AotiContainerAbi& a = library->abi();
  AOTInductorModelContainerHandle handle = nullptr;
  ET_TRY(container_call(a.create_with_device(&handle, 1, device, nullptr), "creating its container"));
  ET_CHECK_OR_RETURN(handle != nullptr, Error::InvalidProgram, "%s: its container is null", kWho);
  std::unique_ptr<AotiContainer> c(new (std::nothrow) AotiContainer(std::move(library), handle));
  if (c == nullptr) {
    a.destroy(handle);
    return Error::MemoryAllocationFailed;
  }
  ET_TRY(container_call(a.get_num_inputs(handle, &c->num_inputs_), "counting its inputs"));
  ET_TRY(container_call(a.get_num_outputs(handle, &c->num_outputs_), "counting its outputs"));
  size_t constants = 0;
  ET_TRY(container_call(a.get_num_constants(handle, &constants), "counting its constants"));
  for (size_t k = 0; k < constants; ++k) {
    const char* name = nullptr;
    ET_TRY(container_call(a.get_constant_name(handle, k, &name), "naming a constant"));
    ET_CHECK_OR_RETURN(name != nullptr, Error::InvalidProgram, "%s: constant %zu has no name", kWho, k);
    c->constant_names_.emplace_back(name);
  }
  return c;
}

AotiContainer::~AotiContainer() { library_->abi().destroy(handle_); }

Error AotiContainer::set_constants(const AotiConstantMap& constants) {
  for (const std::string& name : constant_names_) {
    ET_CHECK_OR_RETURN(constants.count(name) != 0, Error::InvalidArgument, "%s: no data for its constant '%s'", kWho,
                       name.c_str());
  }
  // interface.h's constant map is this very type behind an opaque pointer; the container only reads it.
  auto* map = reinterpret_cast<AOTInductorConstantMapHandle>(const_cast<AotiConstantMap*>(&constants));
  return container_call(library_->abi().update_constant_buffer(handle_, map, false, true), "taking its constants");
}

Error AotiContainer::run(Span<AtenTensorHandle> inputs, Span<AtenTensorHandle> outputs, void* stream) {
  ET_CHECK_OR_RETURN(inputs.size() == num_inputs_ && outputs.size() == num_outputs_, Error::InvalidArgument,
                     "%s: %zu inputs and %zu outputs given, the model has %zu and %zu", kWho, inputs.size(),
                     outputs.size(), num_inputs_, num_outputs_);
  return container_call(library_->abi().run(handle_, inputs.data(), inputs.size(), outputs.data(), outputs.size(),
                                            static_cast<AOTInductorStreamHandle>(stream), nullptr),
                        "running");
}

namespace {

// A shim tensor over an executorch tensor's memory (contiguous, as a method's tensors are).
Error wrap(const runtime::EValue& v, int32_t device_type, const char* what, size_t index, ShimTensor* out) {
  ET_CHECK_OR_RETURN(v.is_tensor(), Error::InvalidProgram, "%s: %s %zu is not a tensor", kWho, what, index);
  const runtime::Tensor& t = v.to_tensor();
  if (aoti_torch_create_tensor_from_blob_v2(
          t.mutable_data_ptr(), t.dim(), t.sizes(), nullptr, 0, static_cast<int32_t>(t.scalar_type()), device_type, 0,
          extension::cuda::out(*out), aoti_torch_layout_strided(), nullptr, 0) != AOTI_TORCH_SUCCESS) {
    return ET_ERROR_CONTEXT(Error::InvalidProgram, "%s: %s %zu", kWho, what, index);
  }
  return Error::Ok;
}

}  // namespace

Result<std::unique_ptr<AotiModel>> AotiModel::load(Span<const uint8_t> library,
                                                   const std::vector<std::string>& constant_names,
                                                   runtime::Method& method, const char* device) {
  std::unique_ptr<AotiModel> model(new (std::nothrow) AotiModel());
  if (model == nullptr) return Error::MemoryAllocationFailed;
  model->method_ = &method;
  model->device_type_ =
      std::strncmp(device, "cuda", 4) == 0 ? aoti_torch_device_type_cuda() : aoti_torch_device_type_cpu();
  ET_TRY_ASSIGN(std::unique_ptr<AotiLibrary> lib, AotiLibrary::load(library));
  model->library_ = std::move(lib);
  ET_TRY_ASSIGN(model->container_, AotiContainer::create(model->library_, device));
  const AotiContainer& c = *model->container_;
  ET_CHECK_OR_RETURN(c.num_inputs() == method.num_inputs() && c.num_outputs() == method.num_outputs(),
                     Error::InvalidProgram,
                     "%s: its library takes %zu inputs and gives %zu outputs, its method %zu and %zu", kWho,
                     c.num_inputs(), c.num_outputs(), method.num_inputs(), method.num_outputs());
  AotiConstantMap constants;
  for (size_t i = 0; i < method.num_values(); ++i) {
    if (method.value_memory(i) != runtime::Method::Memory::Constant || !method.value(i).is_tensor()) continue;
    const size_t k = model->constants_.size();
    ET_CHECK_OR_RETURN(k < constant_names.size(), Error::InvalidProgram,
                       "%s: its method has more constants than the %zu it names", kWho, constant_names.size());
    model->constants_.emplace_back();
    ET_TRY(wrap(method.value(i), model->device_type_, "constant", k, &model->constants_.back()));
    constants[constant_names[k]] = model->constants_.back().get();
  }
  ET_CHECK_OR_RETURN(model->constants_.size() == constant_names.size(), Error::InvalidProgram,
                     "%s: it names %zu constants, its method has %zu", kWho, constant_names.size(),
                     model->constants_.size());
  ET_TRY(model->container_->set_constants(constants));
  return model;
}

Error AotiModel::run(void* stream) {
  runtime::Method& m = *method_;
  std::vector<ShimTensor> wrapped(m.num_inputs());
  for (size_t i = 0; i < wrapped.size(); ++i) ET_TRY(wrap(m.input(i), device_type_, "input", i, &wrapped[i]));
  // The container takes the input handles over (deletes them), even where it fails.
  std::vector<AtenTensorHandle> inputs(wrapped.size());
  for (size_t i = 0; i < wrapped.size(); ++i) inputs[i] = wrapped[i].release();
  std::vector<AtenTensorHandle> raw(m.num_outputs(), nullptr);
  const Error ran = container_->run({inputs.data(), inputs.size()}, {raw.data(), raw.size()}, stream);
  std::vector<ShimTensor> outputs(raw.begin(), raw.end());
  ET_TRY(ran);
  for (size_t j = 0; j < outputs.size(); ++j) {
    ET_CHECK_OR_RETURN(outputs[j] != nullptr, Error::InvalidProgram, "%s: output %zu is missing", kWho, j);
    ShimTensor dst;
    ET_TRY(wrap(m.get_output(j), device_type_, "output", j, &dst));
    int64_t got = 0, want = 0;
    int32_t got_type = 0, want_type = 0;
    aoti_torch_get_numel(outputs[j].get(), &got), aoti_torch_get_numel(dst.get(), &want);
    aoti_torch_get_dtype(outputs[j].get(), &got_type), aoti_torch_get_dtype(dst.get(), &want_type);
    ET_CHECK_OR_RETURN(got == want && got_type == want_type, Error::InvalidProgram,
                       "%s: output %zu has %lld elements of dtype %d, its method declares %lld of dtype %d", kWho, j,
                       static_cast<long long>(got), static_cast<int>(got_type), static_cast<long long>(want),
                       static_cast<int>(want_type));
    if (aoti_torch_copy_(dst.get(), outputs[j].get(), /*non_blocking=*/1) != AOTI_TORCH_SUCCESS) {
      return ET_ERROR_CONTEXT(Error::InvalidProgram, "%s: output %zu", kWho, j);
    }
  }
  return Error::Ok;
}

}  // namespace cuda
}  // namespace backends
}  // namespace executorch
