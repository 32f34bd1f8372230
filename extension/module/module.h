#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <executorch/extension/tensor/tensor_ptr.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/executor/program_state.h>
#include <executorch/runtime/platform/export.h>

namespace executorch {
namespace extension {

// A program file and its methods, loaded on first use:
//   Module module("model.pte");
//   auto outputs = module.forward(make_tensor_ptr({1, 3, 224, 224}, data));
// Output tensors point into the method's planned memory and stay valid until its next run. The
// methods share the program's state (its mutable buffers, such as a key/value cache), which
// persists between runs until reset_state().
class EXECUTORCH_API Module {
 public:
  explicit Module(std::string file_path);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  runtime::Error load();
  bool is_loaded() const { return program_ != nullptr; }
  runtime::Result<std::vector<std::string>> method_names();
  runtime::Error load_method(const std::string& name);
  // Every mutable buffer of the program back to its initial contents.
  runtime::Error reset_state();
  // program metadata["key"], or empty.
  std::string metadata(const std::string& key);

  runtime::Result<std::vector<runtime::EValue>> execute(const std::string& method,
                                                        const std::vector<runtime::EValue>& inputs);
  runtime::Result<std::vector<runtime::EValue>> forward(const std::vector<runtime::EValue>& inputs) {
    return execute("forward", inputs);
  }
  runtime::Result<std::vector<runtime::EValue>> forward(const TensorPtr& input) {
    if (!input) return runtime::Error::InvalidArgument;
    return execute("forward", {runtime::EValue(*input)});
  }

  // The loaded method, for callers that set inputs themselves (loads it if needed).
  runtime::Result<runtime::Method*> method(const std::string& name);

 private:
  std::string file_path_;
  std::unique_ptr<runtime::Program> program_;
  std::shared_ptr<runtime::ProgramState> state_;  // made with program_, before any method
  std::unordered_map<std::string, std::unique_ptr<runtime::Method>> methods_;
};

}  // namespace extension
}  // namespace executorch
