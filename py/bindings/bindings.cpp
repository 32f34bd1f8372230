// executorch._C: the Python extension. It links the shared runtime libraries (and keeps the kernel
// and delegate libraries in DT_NEEDED so that their registrations run) and defines none of their
// symbols. C++ exceptions stay inside this file: runtime Errors become ExecutorchError here.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <executorch/backends/cuda/runtime/payload.h>
#include <executorch/backends/xnnpack/runtime/xnnpack_backend.h>
#if EXECUTORCH_BINDINGS_CUDA
#include <executorch/extension/cuda/cuda_stream.h>
#endif
#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/memory_limit.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/kernel/kernel_registry.h>

namespace py = pybind11;
namespace rt = executorch::runtime;

namespace {

struct RuntimeFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "what: Error: detail", where the detail does not say `what` again.
[[noreturn]] void raise(rt::Error error, const std::string& what) {
  std::string message = what + ": " + rt::to_string(error);
  std::string detail = rt::last_error_message();
  if (detail.compare(0, what.size() + 2, what + ": ") == 0) detail.erase(0, what.size() + 2);
  if (!detail.empty() && detail != what) message += ": " + detail;
  throw RuntimeFailure(message);
}

template <typename T>
T unwrap(rt::Result<T>&& result, const std::string& what) {
  if (!result.ok()) raise(result.error(), what);
  return std::move(result.get());
}

std::vector<std::string> registered_backends() {
  std::vector<std::string> names;
  for (size_t i = 0; i < rt::get_num_registered_backends(); ++i) {
    if (const char* name = rt::get_backend_name(i)) names.emplace_back(name);
  }
  return names;
}

std::vector<std::string> registered_kernels() {
  std::vector<std::string> names;
  for (size_t i = 0; i < rt::get_num_registered_kernels(); ++i) {
    if (const char* name = rt::get_kernel_name(i)) names.emplace_back(name);
  }
  return names;
}

bool is_available(const std::string& name) {
  rt::BackendInterface* backend = rt::get_backend_class(name.c_str());
  if (backend == nullptr) {
    throw py::key_error("no backend named '" + name +
                        "' is registered; registered: " + py::str(py::cast(registered_backends())).cast<std::string>());
  }
  return backend->is_available();
}

// numpy dtype <-> ScalarType
bool scalar_type_of(const py::dtype& dt, rt::ScalarType* out) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return *out = rt::ScalarType::Float, true;
  if (kind == 'f' && size == 8) return *out = rt::ScalarType::Double, true;
  if (kind == 'f' && size == 2) return *out = rt::ScalarType::Half, true;
  if (kind == 'i' && size == 8) return *out = rt::ScalarType::Long, true;
  if (kind == 'i' && size == 4) return *out = rt::ScalarType::Int, true;
  if (kind == 'i' && size == 1) return *out = rt::ScalarType::Char, true;
  if (kind == 'u' && size == 1) return *out = rt::ScalarType::Byte, true;
  if (kind == 'b') return *out = rt::ScalarType::Bool, true;
  return false;
}

const char* numpy_name(rt::ScalarType t) {
  switch (t) {
    case rt::ScalarType::Float: return "float32";
    case rt::ScalarType::Double: return "float64";
    case rt::ScalarType::Long: return "int64";
    case rt::ScalarType::Int: return "int32";
    case rt::ScalarType::Char: return "int8";
    case rt::ScalarType::Byte: return "uint8";
    case rt::ScalarType::Bool: return "bool";
    case rt::ScalarType::Half: return "float16";
    default: return nullptr;
  }
}

py::object to_python(const rt::EValue& v) {
  switch (v.tag()) {
    case rt::EValue::Tag::None: return py::none();
    case rt::EValue::Tag::Int: return py::int_(v.to_int());
    case rt::EValue::Tag::Double: return py::float_(v.to_double());
    case rt::EValue::Tag::Bool: return py::bool_(v.to_bool());
    case rt::EValue::Tag::Tensor: {
      const rt::Tensor& t = v.to_tensor();
      // numpy has no bfloat16: its bits come back as int16, tagged (executorch.runtime converts).
      const bool bf16 = t.scalar_type() == rt::ScalarType::BFloat16;
      const char* name = bf16 ? "int16" : numpy_name(t.scalar_type());
      if (name == nullptr)
        throw RuntimeFailure(std::string("output dtype ") + rt::to_string(t.scalar_type()) +
                             " has no numpy equivalent");
      if (t.is_cuda()) throw RuntimeFailure("output tensor is in CUDA memory; copy it to the CPU in the program");
      std::vector<py::ssize_t> shape(t.sizes(), t.sizes() + t.dim());
      py::array out(py::dtype(name), shape);
      if (t.nbytes()) std::memcpy(out.mutable_data(), t.const_data_ptr(), t.nbytes());
      if (bf16) return py::make_tuple("bfloat16", std::move(out));
      return std::move(out);
    }
    default: throw RuntimeFailure("output of an unsupported kind");
  }
}

// The ScalarType named by to_string ("float32", "bfloat16"), for tensors described by name.
bool scalar_type_named(const std::string& name, rt::ScalarType* out) {
  for (rt::ScalarType t : {rt::ScalarType::Byte, rt::ScalarType::Char, rt::ScalarType::Short, rt::ScalarType::Int,
                           rt::ScalarType::Long, rt::ScalarType::Half, rt::ScalarType::Float, rt::ScalarType::Double,
                           rt::ScalarType::Bool, rt::ScalarType::BFloat16}) {
    if (name == rt::to_string(t)) return *out = t, true;
  }
  return false;
}

// A tensor in device memory, as Python hands it over: ("device", data pointer, dtype name, shape,
// device index). Its owner (a torch tensor) outlives the call.
bool is_device_tensor(py::handle item) {
  return py::isinstance<py::tuple>(item) && py::len(item) == 5 &&
         py::str(item[py::int_(0)]).cast<std::string>() == "device";
}

class PyProgram;

class PyMethod {
 public:
  PyMethod(std::shared_ptr<rt::Program> program, std::unique_ptr<rt::Method> method)
      : program_(std::move(program)), method_(std::move(method)) {
    // Where each output lives unless a call hands over a buffer for it.
    for (size_t i = 0; i < method_->num_outputs(); ++i) {
      const rt::EValue& v = method_->get_output(i);
      planned_outputs_.push_back(v.is_tensor() ? v.to_tensor().mutable_data_ptr() : nullptr);
    }
    redirected_.assign(method_->num_outputs(), false);
  }

  std::string name() const { return method_->name(); }
  size_t num_inputs() const { return method_->num_inputs(); }
  size_t num_outputs() const { return method_->num_outputs(); }

  // [(dtype name, shape)] for tensor inputs, (kind, value) for scalars.
  py::list input_meta() const {
    py::list out;
    for (size_t i = 0; i < method_->num_inputs(); ++i) {
      const rt::EValue& v = method_->input(i);
      if (v.is_tensor()) {
        const rt::Tensor& t = v.to_tensor();
        out.append(
            py::make_tuple(rt::to_string(t.scalar_type()), std::vector<int64_t>(t.sizes(), t.sizes() + t.dim())));
      } else {
        out.append(py::make_tuple("scalar", to_python(v)));
      }
    }
    return out;
  }

  // Per input: whether it may be a device tensor.
  std::vector<bool> inputs_on_device() const {
    std::vector<bool> out;
    for (size_t i = 0; i < method_->num_inputs(); ++i) out.push_back(method_->input_may_be_on_device(i));
    return out;
  }

  // [(dtype name, shape, whether it may be written to device memory)] for tensor outputs.
  py::list output_meta() const {
    py::list out;
    for (size_t i = 0; i < method_->num_outputs(); ++i) {
      const rt::EValue& v = method_->get_output(i);
      if (!v.is_tensor()) {
        out.append(py::none());
        continue;
      }
      const rt::Tensor& t = v.to_tensor();
      out.append(py::make_tuple(rt::to_string(t.scalar_type()), std::vector<int64_t>(t.sizes(), t.sizes() + t.dim()),
                                method_->output_may_be_on_device(i)));
    }
    return out;
  }

  // `bfloat16_inputs`: indices of int16 arrays holding bfloat16 bits. `device_outputs`: output
  // index -> (data pointer, device index) of a device buffer to fill (returned as None). A given
  // `cuda_stream` is the caller's stream (a cudaStream_t; 0, the legacy default stream) the
  // delegates run in order with, without waiting for its work; None: no caller's stream.
  py::list execute(const py::sequence& inputs, const std::vector<size_t>& bfloat16_inputs,
                   const std::map<size_t, std::pair<uintptr_t, int>>& device_outputs,
                   std::optional<uintptr_t> cuda_stream, bool defer_index_checks) {
    if (static_cast<size_t>(py::len(inputs)) != method_->num_inputs()) {
      throw py::value_error("method '" + name() + "' takes " + std::to_string(method_->num_inputs()) + " inputs, got " +
                            std::to_string(py::len(inputs)));
    }
    std::vector<py::array> keep;  // arrays stay alive until execute returns
    for (size_t i = 0; i < method_->num_inputs(); ++i) {
      py::handle item = inputs[i];
      rt::Error err;
      if (py::isinstance<py::bool_>(item)) {
        err = method_->set_input(i, rt::EValue(item.cast<bool>()));
      } else if (py::isinstance<py::int_>(item)) {
        err = method_->set_input(i, rt::EValue(item.cast<int64_t>()));
      } else if (py::isinstance<py::float_>(item)) {
        err = method_->set_input(i, rt::EValue(item.cast<double>()));
      } else if (is_device_tensor(item)) {
        rt::ScalarType dtype;
        const std::string dtype_name = py::str(item[py::int_(2)]).cast<std::string>();
        if (!scalar_type_named(dtype_name, &dtype))
          throw py::type_error("input " + std::to_string(i) + " has unsupported dtype " + dtype_name);
        const std::vector<int64_t> sizes = item[py::int_(3)].cast<std::vector<int64_t>>();
        const std::vector<int64_t> strides(sizes.size(), 1);
        rt::Tensor t(dtype, static_cast<int>(sizes.size()), sizes.data(), strides.data(),
                     reinterpret_cast<void*>(item[py::int_(1)].cast<uintptr_t>()));
        t.set_device({rt::DeviceType::CUDA, static_cast<int8_t>(item[py::int_(4)].cast<int>())});
        err = method_->set_input(i, rt::EValue(t));
      } else {
        py::array arr = py::array::ensure(item, py::array::c_style);
        if (!arr) throw py::type_error("input " + std::to_string(i) + " is not an array or number");
        // The runtime reads native byte order from memory it may hand to kernels: a big-endian or a
        // read-only array (np.frombuffer, a memory map) is read through a native, writeable copy.
        if (arr.dtype().attr("byteorder").cast<std::string>() == ">") {
          arr = py::array::ensure(arr.attr("astype")(arr.dtype().attr("newbyteorder")("<")), py::array::c_style);
        }
        if (!arr.writeable()) arr = py::array::ensure(arr.attr("copy")(), py::array::c_style);
        if (!arr) throw py::type_error("input " + std::to_string(i) + " could not be converted to a native array");
        rt::ScalarType dtype;
        const bool bf16 = std::find(bfloat16_inputs.begin(), bfloat16_inputs.end(), i) != bfloat16_inputs.end();
        if (bf16 && arr.dtype().kind() == 'i' && arr.dtype().itemsize() == 2) {
          dtype = rt::ScalarType::BFloat16;
        } else if (!scalar_type_of(arr.dtype(), &dtype)) {
          throw py::type_error("input " + std::to_string(i) + " has unsupported dtype " +
                               py::str(arr.dtype()).cast<std::string>());
        }
        std::vector<int64_t> sizes(arr.shape(), arr.shape() + arr.ndim());
        std::vector<int64_t> strides(sizes.size(), 1);
        const rt::Tensor t(dtype, static_cast<int>(sizes.size()), sizes.data(), strides.data(), arr.mutable_data());
        err = method_->set_input(i, rt::EValue(t));
        keep.push_back(std::move(arr));
      }
      if (err != rt::Error::Ok) raise(err, "input " + std::to_string(i));
    }
    for (size_t i = 0; i < method_->num_outputs(); ++i) {
      const auto buffer = device_outputs.find(i);
      if (buffer == device_outputs.end() && !redirected_[i]) continue;
      if (!method_->get_output(i).is_tensor())
        throw py::value_error("output " + std::to_string(i) + " is not a tensor");
      const size_t nbytes = method_->get_output(i).to_tensor().nbytes();
      const rt::Error e =
          buffer == device_outputs.end()
              ? method_->set_output_data(i, planned_outputs_[i], nbytes, {})  // back to its planned memory
              : method_->set_output_data(i, reinterpret_cast<void*>(buffer->second.first), nbytes,
                                         {rt::DeviceType::CUDA, static_cast<int8_t>(buffer->second.second)});
      if (e != rt::Error::Ok) raise(e, "output " + std::to_string(i));
      redirected_[i] = buffer != device_outputs.end();
    }
#if !EXECUTORCH_BINDINGS_CUDA
    if (cuda_stream) throw RuntimeFailure("a CUDA stream was given, but this build of executorch has no CUDA support");
    (void)defer_index_checks;  // no delegate here checks indices on a device
#endif
    rt::Error err;
    {
      py::gil_scoped_release release;
#if EXECUTORCH_BINDINGS_CUDA
      std::optional<executorch::extension::cuda::StreamGuard> on_stream;
      // 0 is the legacy default stream (torch's default): the delegates join it through events.
      if (cuda_stream) on_stream.emplace(reinterpret_cast<cudaStream_t>(*cuda_stream));
      std::optional<executorch::extension::cuda::DeferIndexChecks> deferred;
      if (defer_index_checks) deferred.emplace();
#endif
      err = method_->execute();
    }
    if (err != rt::Error::Ok) raise(err, "executing '" + name() + "'");
    py::list outputs;
    for (size_t i = 0; i < method_->num_outputs(); ++i) {
      outputs.append(device_outputs.count(i) ? py::none() : to_python(method_->get_output(i)));
    }
    return outputs;
  }

 private:
  std::shared_ptr<rt::Program> program_;
  std::unique_ptr<rt::Method> method_;
  std::vector<void*> planned_outputs_;
  std::vector<bool> redirected_;  // per output: set to a caller's buffer by the last call
};

// The program state (mutable buffers) that methods loaded with it share and keep between calls.
class PyState {
 public:
  PyState(std::shared_ptr<rt::Program> program, std::shared_ptr<rt::ProgramState> state)
      : program_(std::move(program)), state_(std::move(state)) {}

  std::vector<std::string> buffer_names() const {
    std::vector<std::string> names;
    for (size_t i = 0; i < state_->num_buffers(); ++i) names.emplace_back(state_->buffer_name(i));
    return names;
  }

  py::bytes read(const std::string& name) const {
    auto index = state_->find(name.c_str());
    if (!index.ok()) throw py::key_error("the program has no mutable buffer '" + name + "'");
    const auto b = unwrap(state_->read(*index), "reading buffer '" + name + "'");
    return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  }

  void reset() {
    if (const rt::Error e = state_->reset(); e != rt::Error::Ok) raise(e, "resetting the state");
  }

  const std::shared_ptr<rt::Program>& program() const { return program_; }
  const std::shared_ptr<rt::ProgramState>& state() const { return state_; }

 private:
  std::shared_ptr<rt::Program> program_;  // outlives the state, which points into it
  std::shared_ptr<rt::ProgramState> state_;
};

class PyProgram {
 public:
  explicit PyProgram(std::shared_ptr<rt::Program> program) : program_(std::move(program)) {}

  std::vector<std::string> method_names() const {
    std::vector<std::string> names;
    for (size_t i = 0; i < program_->num_methods(); ++i) names.emplace_back(program_->method_name(i));
    return names;
  }

  std::unique_ptr<PyState> new_state() const {
    return std::make_unique<PyState>(program_, unwrap(rt::ProgramState::create(*program_), "creating the state"));
  }

  std::unique_ptr<PyMethod> load_method(const std::string& name, const PyState* state) const {
    if (!program_->has_method(name.c_str())) {
      throw py::key_error("the program has no method '" + name + "'; it has " +
                          py::str(py::cast(method_names())).cast<std::string>());
    }
    if (state != nullptr && state->program() != program_) {
      throw py::value_error("the state was made by another program's new_state()");
    }
    auto method = unwrap(program_->load_method(name.c_str(), nullptr, state ? state->state() : nullptr),
                         "loading method '" + name + "'");
    return std::make_unique<PyMethod>(program_, std::move(method));
  }

  py::object metadata(const std::string& key) const {
    const char* value = program_->metadata(key.c_str());
    return value ? py::object(py::str(value)) : py::object(py::none());
  }

 private:
  std::shared_ptr<rt::Program> program_;
};

std::unique_ptr<PyProgram> load_program_bytes(const py::bytes& data) {
  std::string_view view = data;
  std::unique_ptr<rt::DataLoader> loader =
      unwrap(rt::OwnedBufferDataLoader::copy_of(view.data(), view.size()), "copying the program");
  return std::make_unique<PyProgram>(
      std::shared_ptr<rt::Program>(unwrap(rt::Program::load(std::move(loader)), "loading the program")));
}

std::unique_ptr<PyProgram> load_program_file(const std::string& path) {
  std::unique_ptr<rt::DataLoader> loader = unwrap(rt::FileDataLoader::from(path.c_str()), "opening " + path);
  return std::make_unique<PyProgram>(
      std::shared_ptr<rt::Program>(unwrap(rt::Program::load(std::move(loader)), "loading " + path)));
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "executorch runtime bindings";
  py::register_exception<RuntimeFailure>(m, "ExecutorchError", PyExc_RuntimeError);

  m.def("registered_backends", &registered_backends,
        "Names of the backends registered in the runtime's backend registry, in order.");
  m.def("registered_kernels", &registered_kernels, "Operator names with a registered kernel, in order.");
  m.def("is_available", &is_available, py::arg("name"),
        "Whether the registered backend `name` can run on this machine (KeyError if unknown).");
  m.def("num_threads", &executorch::extension::threadpool::get_num_threads);
  m.def("set_num_threads", &executorch::extension::threadpool::set_num_threads, py::arg("threads"));
  m.def("max_planned_bytes", &rt::max_planned_bytes);
  m.def("set_max_planned_bytes", &rt::set_max_planned_bytes, py::arg("bytes"));
  m.def("threadpool_identity",
        [] { return reinterpret_cast<uintptr_t>(executorch::extension::threadpool::pool_identity()); });
  m.def(
      "backend_identity",
      [](const std::string& name) { return reinterpret_cast<uintptr_t>(rt::get_backend_class(name.c_str())); },
      py::arg("name"), "Address of the backend object registered as `name` (0 if none).");
  // The partitioner's question to a backend, answered by the backend's own checks (no device needed).
  using Explain = rt::Result<std::vector<std::string>> (*)(rt::Span<const uint8_t>);
  const auto explain = [](Explain fn, const char* backend) {
    return [fn, backend](const py::bytes& program) {
      const std::string_view view = program;
      return unwrap(fn({reinterpret_cast<const uint8_t*>(view.data()), view.size()}),
                    std::string("checking the program for ") + backend);
    };
  };
  m.def("cuda_explain_instructions", explain(&executorch::backends::cuda::explain_instructions, "CudaBackend"),
        py::arg("program"),
        "For each instruction of the program: '' where CudaBackend can run it, else why not. Needs no GPU.");
  m.def("xnnpack_explain_instructions", explain(&executorch::backends::xnnpack::explain_instructions, "XnnpackBackend"),
        py::arg("program"), "For each instruction of the program: '' where XnnpackBackend can run it, else why not.");
  m.def(
      "cuda_read_aoti_payload",
      [](const py::bytes& data, int device_arch) {
        const std::string_view view = data;
        auto loader = unwrap(rt::OwnedBufferDataLoader::copy_of(view.data(), view.size()), "copying the payload");
        auto program = unwrap(rt::Program::load(std::move(loader)), "loading the payload");
        auto payload = unwrap(executorch::backends::cuda::read_aoti_payload(*program, device_arch),
                              "reading the AOTInductor payload");
        py::dict info;
        info["torch_version"] = payload.torch_version;
        info["archs"] = payload.archs;
        info["constants"] = payload.constant_names;
        info["library"] = py::bytes(reinterpret_cast<const char*>(payload.library.data()), payload.library.size());
        return info;
      },
      py::arg("payload"), py::arg("device_arch") = 0,
      "What an AOTInductor payload holds, as CudaBackend reads and checks it (device_arch 90: an sm_90 "
      "device; 0: any). Needs no GPU.");
  m.def("load_program_bytes", &load_program_bytes, py::arg("data"));
  m.def("load_program_file", &load_program_file, py::arg("path"));

  py::class_<PyProgram>(m, "Program")
      .def_property_readonly("method_names", &PyProgram::method_names)
      .def("new_state", &PyProgram::new_state)
      .def("load_method", &PyProgram::load_method, py::arg("name"), py::arg("state") = nullptr)
      .def("metadata", &PyProgram::metadata, py::arg("key"));

  py::class_<PyState>(m, "State")
      .def_property_readonly("buffer_names", &PyState::buffer_names)
      .def("read", &PyState::read, py::arg("name"))
      .def("reset", &PyState::reset);

  py::class_<PyMethod>(m, "Method")
      .def_property_readonly("name", &PyMethod::name)
      .def_property_readonly("num_inputs", &PyMethod::num_inputs)
      .def_property_readonly("num_outputs", &PyMethod::num_outputs)
      .def("input_meta", &PyMethod::input_meta)
      .def("output_meta", &PyMethod::output_meta)
      .def("inputs_on_device", &PyMethod::inputs_on_device)
      .def("execute", &PyMethod::execute, py::arg("inputs"), py::arg("bfloat16_inputs") = std::vector<size_t>{},
           py::arg("device_outputs") = std::map<size_t, std::pair<uintptr_t, int>>{},
           py::arg("cuda_stream") = py::none(), py::arg("defer_index_checks") = false);
}
