// executorch._C: the Python extension. It links the shared runtime (and, in a CUDA build, keeps the
// delegate library in DT_NEEDED so that its registration runs) and defines none of their symbols.
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <executorch/runtime/backend/interface.h>

namespace py = pybind11;
namespace rt = executorch::runtime;

namespace {

std::vector<std::string> registered_backends() {
  std::vector<std::string> names;
  const size_t n = rt::get_num_registered_backends();
  for (size_t i = 0; i < n; ++i) {
    if (const char* name = rt::get_backend_name(i)) names.emplace_back(name);
  }
  return names;
}

bool is_available(const std::string& name) {
  rt::BackendInterface* backend = rt::get_backend_class(name.c_str());
  if (backend == nullptr) {
    throw py::key_error("no backend named '" + name + "' is registered; registered: " +
                        py::str(py::cast(registered_backends())).cast<std::string>());
  }
  return backend->is_available();
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "executorch runtime bindings";
  m.def("registered_backends", &registered_backends,
        "Names of the backends registered in the runtime's backend registry, in order.");
  m.def("is_available", &is_available, py::arg("name"),
        "Whether the registered backend `name` can run on this machine (KeyError if unknown).");
}
