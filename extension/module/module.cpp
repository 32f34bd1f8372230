#include <executorch/extension/module/module.h>

#include <executorch/runtime/core/log.h>

namespace executorch {
namespace extension {

using runtime::Error;

Module::Module(std::string file_path) : file_path_(std::move(file_path)) {}
Module::~Module() = default;

Error Module::load() {
  if (program_) return Error::Ok;
  ET_TRY_ASSIGN(auto loader, runtime::FileDataLoader::from(file_path_.c_str()));
  ET_TRY_ASSIGN(auto program, runtime::Program::load(std::move(loader)));
  ET_TRY_ASSIGN(state_, runtime::ProgramState::create(*program));
  program_ = std::move(program);
  return Error::Ok;
}

Error Module::reset_state() {
  ET_TRY(load());
  return state_->reset();
}

runtime::Result<std::vector<std::string>> Module::method_names() {
  ET_TRY(load());
  std::vector<std::string> names;
  for (size_t i = 0; i < program_->num_methods(); ++i) names.emplace_back(program_->method_name(i));
  return names;
}

std::string Module::metadata(const std::string& key) {
  if (load() != Error::Ok) return "";
  const char* value = program_->metadata(key.c_str());
  return value ? value : "";
}

runtime::Result<runtime::Method*> Module::method(const std::string& name) {
  ET_TRY(load());
  auto it = methods_.find(name);
  if (it == methods_.end()) {
    ET_TRY_ASSIGN(auto m, program_->load_method(name.c_str(), nullptr, state_));
    it = methods_.emplace(name, std::move(m)).first;
  }
  return it->second.get();
}

Error Module::load_method(const std::string& name) { return method(name).error(); }

runtime::Result<std::vector<runtime::EValue>> Module::execute(const std::string& name,
                                                              const std::vector<runtime::EValue>& inputs) {
  ET_TRY_ASSIGN(runtime::Method * method, this->method(name));
  ET_CHECK_OR_RETURN(inputs.size() == method->num_inputs(), Error::InvalidArgument,
                     "method '%s' takes %zu inputs, got %zu", name.c_str(), method->num_inputs(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) ET_TRY(method->set_input(i, inputs[i]));
  ET_TRY(method->execute());
  std::vector<runtime::EValue> outputs;
  for (size_t i = 0; i < method->num_outputs(); ++i) outputs.push_back(method->get_output(i));
  return outputs;
}

}  // namespace extension
}  // namespace executorch
