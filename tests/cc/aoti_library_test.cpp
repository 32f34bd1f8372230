// The AOTInductor model loader on the CPU: a container library built here (tests/cc/aoti), loaded
// from its bytes through an anonymous memory file, its constants handed in, run on shim tensors;
// and what is refused: bytes that are no library, a truncated library, a library that lacks a
// container function, a constant not given, a wrong number of inputs.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <executorch/backends/cuda/runtime/aoti_library.h>
#include <executorch/backends/cuda/runtime/payload.h>
#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/data_loader.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/tests/cc/check.h>

namespace {

using executorch::backends::cuda::AotiConstantMap;
using executorch::backends::cuda::AotiContainer;
using executorch::backends::cuda::AotiLibrary;
using executorch::backends::cuda::AotiModel;
using executorch::runtime::Error;
using executorch::runtime::Span;

std::vector<uint8_t> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

AtenTensorHandle scalar(float* value) {
  const int64_t one[] = {1};
  AtenTensorHandle t = nullptr;
  aoti_torch_create_tensor_from_blob_v2(value, 1, one, nullptr, 0, aoti_torch_dtype_float32(),
                                        aoti_torch_device_type_cpu(), 0, &t, 0, nullptr, 0);
  return t;
}

// Whether a file of the process's memory maps or descriptors names an AOTI model file on disk.
bool left_on_disk() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("executorch-aoti-model") != std::string::npos && line.find("memfd:") == std::string::npos) {
      return true;
    }
  }
  return false;
}

bool mapped(const char* name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find(name) != std::string::npos) return true;
  }
  return false;
}

void test_runs_a_container(const std::vector<uint8_t>& bytes) {
  auto loaded = AotiLibrary::load({bytes.data(), bytes.size()});
  CHECK(loaded.ok());
  if (!loaded.ok()) return;
  std::shared_ptr<const AotiLibrary> lib(std::move(*loaded));
  CHECK(mapped("memfd:executorch-aoti-model") && !left_on_disk());

  CHECK(AotiContainer::create(lib, "cuda:0").error() == Error::InvalidProgram);  // this one is for the CPU
  auto made = AotiContainer::create(lib, "cpu");
  CHECK(made.ok());
  if (!made.ok()) return;
  AotiContainer& c = **made;
  CHECK(c.num_inputs() == 1 && c.num_outputs() == 1);
  CHECK((c.constant_names() == std::vector<std::string>{"scale", "shift"}));

  float scale = 3.f, shift = -1.f;
  AotiConstantMap constants = {{"scale", scalar(&scale)}};
  CHECK(c.set_constants(constants) == Error::InvalidArgument);  // "shift" missing
  constants["shift"] = scalar(&shift);
  CHECK(c.set_constants(constants) == Error::Ok);

  float x[4] = {0.f, 1.f, 2.f, -2.f};
  const int64_t sizes[] = {2, 2};
  AtenTensorHandle in = nullptr, out = nullptr;
  CHECK(aoti_torch_create_tensor_from_blob_v2(x, 2, sizes, nullptr, 0, aoti_torch_dtype_float32(),
                                              aoti_torch_device_type_cpu(), 0, &in, 0, nullptr, 0) == 0);
  CHECK(c.run({&in, 1}, {}) == Error::InvalidArgument);              // one output expected; `in` is still ours
  CHECK(c.run({&in, 1}, {&out, 1}) == Error::Ok && out != nullptr);  // the container took `in` and deleted it
  void* y = nullptr;
  int64_t* got_sizes = nullptr;
  CHECK(aoti_torch_get_data_ptr(out, &y) == 0 && aoti_torch_get_sizes(out, &got_sizes) == 0);
  CHECK(got_sizes[0] == 2 && got_sizes[1] == 2);
  const float* yf = static_cast<const float*>(y);
  CHECK(yf[0] == -1.f && yf[1] == 2.f && yf[2] == 5.f && yf[3] == -7.f);
  aoti_torch_delete_tensor_object(out);
  for (auto& [name, t] : constants) aoti_torch_delete_tensor_object(t);
}

void test_refuses_what_is_no_container(const std::vector<uint8_t>& bytes, const std::vector<uint8_t>& incomplete) {
  const uint8_t text[] = "not a library";
  CHECK(AotiLibrary::load({text, sizeof(text)}).error() == Error::InvalidProgram);
  CHECK(AotiLibrary::load({}).error() == Error::InvalidProgram);
  // An ELF header and little else: the dynamic loader refuses it, with an error and no crash.
  CHECK(AotiLibrary::load({bytes.data(), 200}).error() == Error::InvalidProgram);
  CHECK(AotiLibrary::load({bytes.data(), bytes.size() / 2}).error() == Error::InvalidProgram);
  CHECK(AotiLibrary::load({incomplete.data(), incomplete.size()}).error() == Error::InvalidProgram);
}

}  // namespace

// The container packed as a payload, run through AotiModel on host memory as CudaBackend runs one on
// the device: the payload's method holds the inputs, outputs and constants.
void test_runs_a_payload(const std::vector<uint8_t>& pte) {
  auto loader = executorch::runtime::OwnedBufferDataLoader::copy_of(pte.data(), pte.size());
  CHECK(loader.ok());
  if (!loader.ok()) return;
  auto program = executorch::runtime::Program::load(std::move(loader.get()));
  CHECK(program.ok());
  if (!program.ok()) return;
  const executorch::runtime::Program& p = **program;
  CHECK(executorch::backends::cuda::is_aoti_payload(p));
  auto payload = executorch::backends::cuda::read_aoti_payload(p, 0);
  CHECK(payload.ok());
  if (!payload.ok()) return;
  const char* name = p.method_name(0);
  auto sizes = p.planned_buffer_sizes(name);
  CHECK(sizes.ok());
  if (!sizes.ok()) return;
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<Span<uint8_t>> spans;
  for (uint64_t n : *sizes) buffers.emplace_back(n);
  for (auto& b : buffers) spans.emplace_back(b.data(), b.size());
  executorch::runtime::MemoryManager memory({spans.data(), spans.size()});
  auto method = p.load_method(name, &memory);
  CHECK(method.ok());
  if (!method.ok()) return;
  executorch::runtime::Method& m = **method;

  // Fewer names than the method has constants: refused, naming the count.
  CHECK(AotiModel::load(payload->library, {"scale"}, m, "cpu").error() == Error::InvalidProgram);
  auto model = AotiModel::load(payload->library, payload->constant_names, m, "cpu");
  CHECK(model.ok());
  if (!model.ok()) return;
  float* x = static_cast<float*>(m.input(0).to_tensor().mutable_data_ptr());
  const float in[4] = {0.f, 1.f, 2.f, -2.f};
  std::memcpy(x, in, sizeof(in));
  for (int call = 0; call < 2; ++call) {  // the container takes fresh input handles each time
    CHECK((*model)->run(nullptr) == Error::Ok);
    const float* y = static_cast<const float*>(m.get_output(0).to_tensor().const_data_ptr());
    CHECK(y[0] == -1.f && y[1] == 2.f && y[2] == 5.f && y[3] == -7.f);
  }
}

// A library calling a shim nobody defines: the loader's refusal names the function.
void test_refuses_an_unknown_shim(const std::vector<uint8_t>& unknown) {
  CHECK(AotiLibrary::load({unknown.data(), unknown.size()}).error() == Error::InvalidProgram);
  CHECK(std::strstr(executorch::runtime::last_error_message(), "aoti_torch_frobnicate") != nullptr);
}

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s CONTAINER_SO INCOMPLETE_SO UNKNOWN_SHIM_SO CONTAINER_PTE\n", argv[0]);
    return 2;
  }
  const std::vector<uint8_t> bytes = read_file(argv[1]), incomplete = read_file(argv[2]), unknown = read_file(argv[3]);
  CHECK(bytes.size() > 1000 && incomplete.size() > 100 && unknown.size() > 100);
  test_runs_a_container(bytes);
  test_refuses_what_is_no_container(bytes, incomplete);
  test_refuses_an_unknown_shim(unknown);
  test_runs_a_payload(read_file(argv[4]));
  return executorch::testing::finish("aoti_library_test");
}
