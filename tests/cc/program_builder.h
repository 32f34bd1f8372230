#pragma once

// Builds small programs for C++ tests with the FlatBuffers API: out = relu(x + y) on float [2, 3],
// with options that make it hostile in one specific way.
#include <cstring>
#include <memory>
#include <vector>

#include <executorch/runtime/executor/data_loader.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/schema/program_generated.h>

namespace executorch {
namespace testing {

namespace rt = executorch::runtime;
namespace fb = executorch_flatbuffer;

struct Options {
  bool planned_inputs = true;
  int bad_arg = -1;                 // replace an instruction argument with this value index,
  int bad_arg_position = 1;         // at this position of the first instruction
  uint64_t buffer_size = 256;       // planned buffer bytes
  const char* op = "aten::add";     // first operator
  const char* overload = "Tensor";  // and its overload
  const char* delegate = nullptr;   // add a delegate call to this backend
  bool state = false;               // declare mutable buffers "cache" (24 bytes) and "count" (8)
  uint32_t version = rt::kProgramVersion;
};

// A program computing out = relu(x + y) for float tensors of shape [2, 3], wrapped in the container.
inline std::vector<uint8_t> build_program(const Options& o = {}) {
  flatbuffers::FlatBufferBuilder b;
  const std::vector<int64_t> shape = {2, 3};
  auto tensor = [&](int mem_id, uint64_t offset) {
    return fb::CreateEValue(
        b, fb::KernelTypes::Tensor,
        fb::CreateTensorDirect(b, fb::ScalarType::FLOAT, &shape, nullptr, -1, 0, mem_id, offset).Union());
  };
  std::vector<flatbuffers::Offset<fb::EValue>> values = {
      tensor(o.planned_inputs ? 0 : -1, 0),                                    // 0: x
      tensor(o.planned_inputs ? 0 : -1, 32),                                   // 1: y
      fb::CreateEValue(b, fb::KernelTypes::Int, fb::CreateInt(b, 1).Union()),  // 2: alpha
      tensor(0, 64),                                                           // 3: sum
      tensor(0, 96),                                                           // 4: out
  };
  std::vector<int32_t> add_args = {0, 1, 2, 3}, relu_args = {3, 4};
  if (o.bad_arg != -1) add_args[static_cast<size_t>(o.bad_arg_position)] = o.bad_arg;
  std::vector<flatbuffers::Offset<fb::Instruction>> instructions = {
      fb::CreateInstruction(b, fb::InstructionArguments::KernelCall,
                            fb::CreateKernelCallDirect(b, 0, &add_args).Union()),
      fb::CreateInstruction(b, fb::InstructionArguments::KernelCall,
                            fb::CreateKernelCallDirect(b, 1, &relu_args).Union()),
  };
  std::vector<flatbuffers::Offset<fb::BackendDelegate>> delegates;
  if (o.delegate) {
    std::vector<int32_t> args = {0, 4};
    instructions.push_back(fb::CreateInstruction(b, fb::InstructionArguments::DelegateCall,
                                                 fb::CreateDelegateCallDirect(b, 0, &args).Union()));
    delegates.push_back(fb::CreateBackendDelegateDirect(
        b, o.delegate, fb::CreateBackendDelegateDataReference(b, fb::DataLocation::INLINE, 0)));
  }
  std::vector<flatbuffers::Offset<fb::Chain>> chains = {fb::CreateChainDirect(b, nullptr, nullptr, &instructions)};
  std::vector<flatbuffers::Offset<fb::Operator>> ops = {fb::CreateOperatorDirect(b, o.op, o.overload),
                                                        fb::CreateOperatorDirect(b, "aten::relu", "")};
  std::vector<int32_t> inputs = {0, 1}, outputs = {4};
  std::vector<uint64_t> sizes = {o.buffer_size};
  auto plan =
      fb::CreateExecutionPlanDirect(b, "forward", &values, &inputs, &outputs, &chains, &ops, &delegates, &sizes);
  std::vector<flatbuffers::Offset<fb::ExecutionPlan>> plans = {plan};
  std::vector<uint8_t> payload = {1, 2, 3};
  std::vector<flatbuffers::Offset<fb::BackendDelegateInlineData>> inline_data = {
      fb::CreateBackendDelegateInlineDataDirect(b, &payload)};
  std::vector<flatbuffers::Offset<fb::MutableBuffer>> buffers;
  if (o.state) {
    buffers = {fb::CreateMutableBufferDirect(b, "cache", 24), fb::CreateMutableBufferDirect(b, "count", 8)};
  }
  b.Finish(fb::CreateProgramDirect(b, o.version, &plans, &inline_data, nullptr, nullptr, o.state ? &buffers : nullptr),
           fb::ProgramIdentifier());

  std::vector<uint8_t> file(rt::kProgramHeaderSize);
  const uint64_t program_size = b.GetSize();
  const uint64_t segment_base = (rt::kProgramHeaderSize + program_size + 15) / 16 * 16;
  const uint32_t container = rt::kProgramContainerVersion;
  const uint64_t zero = 0;
  std::memcpy(file.data(), rt::kProgramMagic, 4);
  std::memcpy(file.data() + 4, &container, 4);
  std::memcpy(file.data() + 8, &program_size, 8);
  std::memcpy(file.data() + 16, &segment_base, 8);
  std::memcpy(file.data() + 24, &zero, 8);
  file.insert(file.end(), b.GetBufferPointer(), b.GetBufferPointer() + program_size);
  file.resize(segment_base, 0);
  return file;
}

inline rt::Result<std::unique_ptr<rt::Program>> load(const std::vector<uint8_t>& bytes) {
  ET_TRY_ASSIGN(auto loader, rt::OwnedBufferDataLoader::copy_of(bytes.data(), bytes.size()));
  return rt::Program::load(std::move(loader));
}

}  // namespace testing
}  // namespace executorch
