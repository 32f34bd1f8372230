#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/program_state.h>
#include <executorch/runtime/kernel/kernel_registry.h>
#include <executorch/runtime/platform/export.h>

namespace executorch_flatbuffer {
struct ExecutionPlan;
}

namespace executorch {
namespace runtime {

class DynamicShapes;
class Program;

// One method of a Program, ready to run: its values, planned memory, kernels and delegates.
// Not thread-safe; load one Method per thread to run a program concurrently.
class EXECUTORCH_API Method final {
 public:
  // `state`: the program state this method updates (shared with other methods loaded with it);
  // null gives the method a state of its own.
  static Result<std::unique_ptr<Method>> load(const Program& program, const executorch_flatbuffer::ExecutionPlan* plan,
                                              const MemoryManager* memory_manager,
                                              std::shared_ptr<ProgramState> state = nullptr);
  ~Method();
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;

  const char* name() const { return name_.c_str(); }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }

  // The input as the program declares it (dtype and shape of a tensor, value of a scalar).
  const EValue& input(size_t index) const { return *inputs_[index]; }

  // Sets input `index`. A tensor must match the declared dtype and shape (a dynamic dimension:
  // within its symbolic size's range); its data is copied into planned memory, or used in place
  // where the program planned none (e.g. device memory).
  Error set_input(size_t index, const EValue& value);

  // Runs every instruction; on failure, last_error_message() names the instruction and why.
  Error execute();

  // Output `index` of the last execute(); a tensor's data stays valid until the next execute().
  const EValue& get_output(size_t index) const { return *outputs_[index]; }

  // Whether tensor input `index` may be handed over in device memory: the program planned no
  // memory for it (only delegates read it), so set_input uses the caller's data in place.
  bool input_may_be_on_device(size_t index) const;

  // Whether output `index` may live in device memory: a tensor that only delegates write and
  // read (no CPU kernel touches it), neither a method input nor a constant.
  bool output_may_be_on_device(size_t index) const;

  // From the next execute() on, output tensor `index` is written to `data` (`nbytes`, the tensor's
  // size) on `device` instead of its planned memory, so a caller's buffer (a GPU tensor, say) is
  // filled in place. Device memory only where output_may_be_on_device(index).
  Error set_output_data(size_t index, void* data, size_t nbytes, Device device);

  // For backends that run a method's instructions themselves (the CUDA delegate executes a
  // sub-program this way, on device memory it provides through a MemoryManager).
  // State: a whole mutable buffer of the program (ProgramState), kept between executions.
  enum class Memory { None, Constant, Planned, State };
  size_t num_values() const { return values_.size(); }
  EValue& value(size_t index) { return values_[index]; }
  Memory value_memory(size_t index) const;
  size_t num_instructions() const { return steps_.size(); }
  // The operator of kernel call `index` ("aten::addmm"), or nullptr for other instructions.
  const char* instruction_operator(size_t index) const;
  Span<EValue*> instruction_args(size_t index);

 private:
  // One instruction, of one of three kinds.
  struct KernelStep {
    OpFunction op;
    std::vector<EValue*> args;
    std::string name;  // "aten::addmm.out"
  };
  struct DelegateStep {
    size_t delegate;  // into delegates_
    std::vector<EValue*> args;
  };
  struct MoveStep {
    EValue* from;
    EValue* to;
  };
  using Step = std::variant<KernelStep, DelegateStep, MoveStep>;
  struct Delegate {
    BackendInterface* backend;
    DelegateHandle* handle;
    std::string id;
  };

  Method() = default;
  Error parse_values(const Program& program, const executorch_flatbuffer::ExecutionPlan* plan);
  Error parse_instructions(const Program& program, const executorch_flatbuffer::ExecutionPlan* plan);
  // What a step is called in error messages and the profile.
  std::string label(const Step& step) const;

  std::string name_;
  std::vector<EValue> values_;
  std::vector<std::unique_ptr<int64_t[]>> shapes_;
  std::vector<std::unique_ptr<EValue*[]>> lists_;
  std::vector<Span<uint8_t>> buffers_;
  std::vector<std::unique_ptr<uint8_t, void (*)(void*)>> owned_buffers_;
  std::vector<bool> planned_;   // per value: tensor data in planned memory
  std::vector<bool> constant_;  // per value: tensor data in a constant segment
  std::vector<bool> state_;     // per value: tensor data is a mutable buffer of state_buffers_
  std::shared_ptr<ProgramState> state_buffers_;
  std::vector<EValue*> inputs_, outputs_;
  std::vector<size_t> input_ids_;
  std::vector<bool> input_set_;
  std::vector<Step> steps_;
  std::vector<Delegate> delegates_;
  std::unique_ptr<DynamicShapes> dynamic_;  // sizes that follow the inputs' (bounded dynamic shapes)
  std::vector<double> profile_ms_;          // per step, with EXECUTORCH_PROFILE set
  long profile_runs_ = 0;
};

}  // namespace runtime
}  // namespace executorch
