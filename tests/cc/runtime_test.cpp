// Unit tests of the runtime core: registries, program loading (valid and hostile containers and
// FlatBuffers built here), method loading and execution with real kernels, and the thread pool.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/log.h>
#include <executorch/runtime/executor/memory_limit.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/executor/program_state.h>
#include <executorch/runtime/kernel/kernel_registry.h>
#include <executorch/schema/program_generated.h>
#include <executorch/tests/cc/check.h>
#include <executorch/tests/cc/program_builder.h>
#include <pthreadpool.h>

namespace rt = executorch::runtime;
namespace fb = executorch_flatbuffer;
using rt::Error;

namespace {

using executorch::testing::build_program;
using executorch::testing::load;
using executorch::testing::Options;

bool message_contains(const char* text) { return std::strstr(rt::last_error_message(), text) != nullptr; }

// --- Tests ---------------------------------------------------------------------------------------

class FakeBackend final : public rt::BackendInterface {
 public:
  explicit FakeBackend(bool available) : available_(available) {}
  bool is_available() const override { return available_; }
  rt::Result<rt::DelegateHandle*> init(rt::BackendInitContext& context, rt::Span<const uint8_t> processed,
                                       rt::Span<const rt::CompileSpec>) const override {
    payload_bytes = processed.size();
    state = context.state;
    return static_cast<rt::DelegateHandle*>(&inits);
  }
  Error execute(rt::DelegateHandle*, rt::Span<rt::EValue*> args) const override {
    ++executes;
    if (fail_execute) return ET_ERROR(Error::Internal, "FakeBackend: device lost");
    return args.size() == 2 ? Error::Ok : Error::InvalidArgument;
  }
  void destroy(rt::DelegateHandle*) const override { ++destroys; }
  mutable size_t payload_bytes = 0;
  mutable rt::ProgramState* state = nullptr;  // what the last init was given
  mutable bool fail_execute = false;
  mutable int inits = 0, executes = 0, destroys = 0;

 private:
  bool available_;
};

void test_backend_registry() {
  static FakeBackend fake(true), missing_gpu(false);
  const size_t before = rt::get_num_registered_backends();
  CHECK(rt::register_backend({"FakeBackend", &fake}) == Error::Ok);
  CHECK(rt::register_backend({"FakeBackend", &fake}) == Error::RegistrationAlreadyRegistered);
  CHECK(rt::register_backend({nullptr, &fake}) == Error::InvalidArgument);
  CHECK(rt::register_backend({"Unavailable", &missing_gpu}) == Error::Ok);
  CHECK(rt::get_num_registered_backends() == before + 2);
  CHECK(rt::get_backend_class("FakeBackend") == &fake);
  CHECK(rt::get_backend_class("NoSuch") == nullptr);
  CHECK(std::strcmp(rt::get_backend_name(before), "FakeBackend") == 0);
  CHECK(rt::get_backend_name(1000) == nullptr);
}

rt::Error dummy_kernel(rt::KernelRuntimeContext&, rt::Span<rt::EValue*>) { return Error::Ok; }

void test_kernel_signatures() {
  auto args = [](std::vector<rt::EValue>& values) {
    std::vector<const rt::EValue*> out;
    for (auto& v : values) out.push_back(&v);
    return out;
  };
  float data[1] = {0};
  int64_t sizes[1] = {1};
  int64_t strides[1] = {1};
  const rt::Tensor t(rt::ScalarType::Float, 1, sizes, strides, data);
  std::vector<rt::EValue> good = {rt::EValue(t), rt::EValue(t), rt::EValue(int64_t{1}), rt::EValue(t)};
  CHECK(std::strcmp(rt::get_kernel_signature("aten::add.Tensor"), "NNd>T") == 0);
  CHECK(rt::get_kernel_signature("aten::no_such_op") == nullptr);
  auto ok = args(good);
  CHECK(rt::check_kernel_arguments("TTd>T", {ok.data(), ok.size()}) == Error::Ok);
  CHECK(rt::check_kernel_arguments("TTd>TT", {ok.data(), ok.size()}) == Error::InvalidProgram &&
        message_contains("takes 3 arguments and 2 output(s), got 4 values"));
  std::vector<rt::EValue> none_for_tensor = {rt::EValue(t), rt::EValue(), rt::EValue(2.0), rt::EValue(t)};
  auto bad = args(none_for_tensor);
  CHECK(rt::check_kernel_arguments("TTd>T", {bad.data(), bad.size()}) == Error::InvalidProgram &&
        message_contains("argument 1 must be a tensor"));
  CHECK(rt::check_kernel_arguments("Ttd>T", {bad.data(), bad.size()}) == Error::Ok);  // t: a tensor or None
  std::vector<rt::EValue> split = {rt::EValue(t), rt::EValue(t), rt::EValue(t)};
  auto outs = args(split);
  CHECK(rt::check_kernel_arguments("T>*", {outs.data(), outs.size()}) == Error::Ok);  // one or more outputs
  CHECK(rt::check_kernel_arguments("T>*", {outs.data(), 1}) == Error::InvalidProgram);
  const rt::KernelSignature twice[] = {{"aten::add.Tensor", "NNd>T"}};
  CHECK(rt::register_kernel_signatures({twice, 1}) == Error::RegistrationAlreadyRegistered);
}

void test_kernel_registry() {
  const rt::Kernel k[] = {{"test::dummy", dummy_kernel}};
  CHECK(rt::register_kernels({k, 1}) == Error::Ok);
  CHECK(rt::register_kernels({k, 1}) == Error::RegistrationAlreadyRegistered);
  CHECK(rt::get_op_function("test::dummy").ok());
  auto missing = rt::get_op_function("test::missing");
  CHECK(!missing.ok() && missing.error() == Error::NotFound && message_contains("test::missing"));
  CHECK(rt::get_op_function("aten::add.Tensor").ok());  // the CPU kernels registered themselves
}

void test_method_runs() {
  auto program = load(build_program());
  CHECK(program.ok());
  if (!program.ok()) return;
  CHECK(program.get()->num_methods() == 1 && std::strcmp(program.get()->method_name(0), "forward") == 0);
  auto method = program.get()->load_method("forward");
  CHECK(method.ok());
  if (!method.ok()) return;
  std::vector<int64_t> sizes = {2, 3}, strides = {3, 1};
  float x[6] = {1, -2, 3, -4, 5, -6}, y[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 10};
  rt::Tensor tx(rt::ScalarType::Float, 2, sizes.data(), strides.data(), x),
      ty(rt::ScalarType::Float, 2, sizes.data(), strides.data(), y);
  CHECK(method.get()->set_input(0, rt::EValue(tx)) == Error::Ok);
  CHECK(method.get()->set_input(1, rt::EValue(ty)) == Error::Ok);
  CHECK(method.get()->execute() == Error::Ok);
  const float* out = method.get()->get_output(0).to_tensor().data_ptr<float>();
  const float want[6] = {1.5f, 0, 3.5f, 0, 5.5f, 4};
  for (int i = 0; i < 6; ++i) CHECK(std::fabs(out[i] - want[i]) < 1e-6f);
  // A second run without setting inputs again sees the same inputs.
  CHECK(method.get()->execute() == Error::Ok);
  CHECK(std::fabs(method.get()->get_output(0).to_tensor().data_ptr<float>()[5] - 4) < 1e-6f);

  // Wrong inputs are errors with a reason.
  std::vector<int64_t> bad_sizes = {3, 2};
  rt::Tensor wrong_shape(rt::ScalarType::Float, 2, bad_sizes.data(), strides.data(), x);
  CHECK(method.get()->set_input(0, rt::EValue(wrong_shape)) == Error::InvalidArgument &&
        message_contains("expected 2"));
  int64_t ix[6] = {};
  rt::Tensor wrong_dtype(rt::ScalarType::Long, 2, sizes.data(), strides.data(), ix);
  CHECK(method.get()->set_input(1, rt::EValue(wrong_dtype)) == Error::InvalidArgument && message_contains("int64"));
  CHECK(method.get()->set_input(7, rt::EValue(tx)) == Error::InvalidArgument);
  CHECK(program.get()->load_method("backward").error() == Error::NotFound);
}

// Outputs written to a caller's buffer; device memory only where no CPU kernel touches them.
void test_output_buffers() {
  auto program = load(build_program());
  auto method = program.get()->load_method("forward");
  CHECK(method.ok());
  if (!method.ok()) return;
  rt::Method& m = *method.get();
  CHECK(!m.input_may_be_on_device(0) && !m.input_may_be_on_device(9));    // planned inputs are copied
  CHECK(!m.output_may_be_on_device(0) && !m.output_may_be_on_device(3));  // the CPU relu writes it
  std::vector<int64_t> sizes = {2, 3}, strides = {3, 1};
  float x[6] = {1, -2, 3, -4, 5, -6}, y[6] = {1, 1, 1, 1, 1, 1}, out[6] = {};
  rt::Tensor tx(rt::ScalarType::Float, 2, sizes.data(), strides.data(), x),
      ty(rt::ScalarType::Float, 2, sizes.data(), strides.data(), y);
  CHECK(m.set_input(0, rt::EValue(tx)) == Error::Ok && m.set_input(1, rt::EValue(ty)) == Error::Ok);
  CHECK(m.set_output_data(0, out, sizeof(out) - 4, {}) == Error::InvalidArgument && message_contains("expected 24"));
  CHECK(m.set_output_data(0, out, sizeof(out), {rt::DeviceType::CUDA, 0}) == Error::NotSupported &&
        message_contains("CPU kernel"));
  CHECK(m.set_output_data(1, out, sizeof(out), {}) == Error::InvalidArgument);
  CHECK(m.set_output_data(0, out, sizeof(out), {}) == Error::Ok);
  CHECK(m.execute() == Error::Ok);
  CHECK(m.get_output(0).to_tensor().data_ptr<float>() == out);
  const float want[6] = {2, 0, 4, 0, 6, 0};
  for (int i = 0; i < 6; ++i) CHECK(out[i] == want[i]);

  auto unplanned = load(build_program({.planned_inputs = false}));
  auto method2 = unplanned.get()->load_method("forward");
  CHECK(method2.ok() && method2.get()->input_may_be_on_device(0) && method2.get()->input_may_be_on_device(1));
}

void test_memory_manager_buffers() {
  auto program = load(build_program());
  alignas(64) static uint8_t arena[256];
  rt::Span<uint8_t> buffers[1] = {{arena, sizeof(arena)}};
  rt::MemoryManager mm({buffers, 1});
  auto method = program.get()->load_method("forward", &mm);
  CHECK(method.ok());
  if (method.ok()) CHECK(method.get()->get_output(0).to_tensor().data_ptr<uint8_t>() == arena + 96);
  rt::Span<uint8_t> small[1] = {{arena, 64}};
  rt::MemoryManager too_small({small, 1});
  CHECK(program.get()->load_method("forward", &too_small).error() == Error::InvalidArgument);
}

void test_planned_memory_limit() {
  auto program = load(build_program({.buffer_size = 4096}));
  rt::set_max_planned_bytes(4095);
  auto refused = program.get()->load_method("forward");
  CHECK(refused.error() == Error::MemoryAllocationFailed);
  CHECK(std::strcmp(rt::last_error_message(),
                    "method 'forward': its planned memory plans 4096 bytes, more than the limit of 4095 "
                    "(EXECUTORCH_MAX_PLANNED_BYTES, Runtime.max_planned_bytes)") == 0);
  // Memory the caller provides is the caller's choice.
  alignas(64) static uint8_t arena[4096];
  rt::Span<uint8_t> buffers[1] = {{arena, sizeof(arena)}};
  rt::MemoryManager mm({buffers, 1});
  CHECK(program.get()->load_method("forward", &mm).ok());
  rt::set_max_planned_bytes(4096);
  CHECK(program.get()->load_method("forward").ok());
  rt::set_max_planned_bytes(0);
  CHECK(rt::max_planned_bytes() == 0 &&
        load(build_program({.buffer_size = 1 << 20})).get()->load_method("forward").ok());
}

void test_unplanned_input_must_be_set() {
  auto program = load(build_program({.planned_inputs = false}));
  auto method = program.get()->load_method("forward");
  CHECK(method.ok());
  if (method.ok()) CHECK(method.get()->execute() == Error::InvalidState && message_contains("never set"));
}

void test_hostile_programs() {
  const std::vector<uint8_t> good = build_program();
  auto expect_invalid = [](const std::vector<uint8_t>& bytes, const char* why) {
    auto p = load(bytes);
    const bool said = !p.ok() && message_contains(why);  // "" is in every message
    CHECK(!p.ok() && p.error() == Error::InvalidProgram && said);
    if (!said) std::printf("  (wanted \"%s\"; message was: %s)\n", why, rt::last_error_message());
  };
  for (size_t cut : {size_t{0}, size_t{3}, size_t{31}, size_t{40}, good.size() / 2}) {
    expect_invalid(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(cut)), "");
  }
  std::vector<uint8_t> magic = good;
  magic[0] = 'Y';
  expect_invalid(magic, "bad magic");
  std::vector<uint8_t> ident = good;
  std::memcpy(ident.data() + rt::kProgramHeaderSize + 4, "NOPE", 4);
  expect_invalid(ident, "identifier");
  std::vector<uint8_t> big = good;
  const uint64_t huge = ~uint64_t{0};
  std::memcpy(big.data() + 8, &huge, 8);
  expect_invalid(big, "does not fit");
  std::vector<uint8_t> seg = good;
  std::memcpy(seg.data() + 24, &huge, 8);
  expect_invalid(seg, "segment area");
  expect_invalid(build_program({.version = 99}), "version 99");
  std::vector<uint8_t> root = good;  // the root table's offset points past the FlatBuffer
  const uint32_t far = 0x7ffffff0;
  std::memcpy(root.data() + rt::kProgramHeaderSize, &far, 4);
  expect_invalid(root, "failed verification: an offset, vector length or string points outside it");
  // Flip every byte of the FlatBuffer in turn: loading and method loading must fail cleanly or
  // succeed; nothing may crash.
  for (size_t i = rt::kProgramHeaderSize; i < good.size(); ++i) {
    std::vector<uint8_t> flipped = good;
    flipped[i] ^= 0xA5;
    auto p = load(flipped);
    if (p.ok()) (void)p.get()->load_method("forward");
  }

  auto method_error = [](const Options& o) {
    auto p = load(build_program(o));
    return p.ok() ? p.get()->load_method("forward").error() : Error::Internal;
  };
  CHECK(method_error({.bad_arg = 99}) == Error::InvalidProgram && message_contains("out of range"));
  CHECK(method_error({.buffer_size = 100}) == Error::InvalidProgram && message_contains("outside planned buffer"));
  CHECK(method_error({.op = "aten::nonexistent"}) == Error::NotFound && message_contains("aten::nonexistent.Tensor"));
  CHECK(method_error({.op = ""}) == Error::NotFound && message_contains("operator '.Tensor' has no kernel"));
  // Tensor x where add's alpha (a number) belongs: refused at load, not at execute.
  CHECK(method_error({.bad_arg = 0, .bad_arg_position = 2}) == Error::InvalidProgram &&
        std::strcmp(rt::last_error_message(),
                    "instruction 0: operator 'aten::add.Tensor': argument 2 must be a number") == 0);
  CHECK(method_error({.delegate = "NotRegistered"}) == Error::NotFound && message_contains("NotRegistered"));
  CHECK(method_error({.delegate = "Unavailable"}) == Error::NotSupported && message_contains("not available"));
}

void test_delegate_lifecycle() {
  auto* fake = static_cast<FakeBackend*>(rt::get_backend_class("FakeBackend"));
  {
    auto p = load(build_program({.delegate = "FakeBackend"}));
    CHECK(p.ok());
    if (!p.ok()) return;
    auto method = p.get()->load_method("forward");
    CHECK(method.ok() && fake->payload_bytes == 3);
    if (method.ok()) CHECK(method.get()->execute() == Error::Ok && fake->executes == 1);
  }
  CHECK(fake->destroys == 1);
}

// A device copy kept in host memory, counting its transfers.
class HostCopy final : public rt::ProgramState::DeviceCopy {
 public:
  explicit HostCopy(size_t bytes, uint8_t fill) : memory_(bytes, fill) {}
  rt::Span<uint8_t> memory() override { return {memory_.data(), memory_.size()}; }
  Error upload(rt::Span<const uint8_t> host) override {
    ++uploads;
    std::copy(host.begin(), host.end(), memory_.begin());
    return Error::Ok;
  }
  Error download(rt::Span<uint8_t> host) override {
    ++downloads;
    std::copy(memory_.begin(), memory_.end(), host.begin());
    return Error::Ok;
  }
  Error zero(rt::Span<const uint8_t>) override {
    ++zeros;
    std::fill(memory_.begin(), memory_.end(), 0);
    return Error::Ok;
  }
  int uploads = 0, downloads = 0, zeros = 0;

 private:
  std::vector<uint8_t> memory_;
};

void test_program_state_device_copies() {
  auto p = load(build_program({.delegate = "FakeBackend", .state = true}));
  CHECK(p.ok());
  if (!p.ok()) return;
  const rt::Program& program = *p.get();
  CHECK(program.num_mutable_buffers() == 2 && program.mutable_buffer_size(0) == 24 &&
        std::strcmp(program.mutable_buffer_name(1), "count") == 0);
  auto created = rt::ProgramState::create(program);
  CHECK(created.ok());
  if (!created.ok()) return;
  std::shared_ptr<rt::ProgramState> state = created.get();
  CHECK(state->find("count").ok() && *state->find("count") == 1);
  CHECK(state->find("missing").error() == Error::NotFound && message_contains("no buffer 'missing'"));

  // A delegate's init sees the method's state, and keeps its copy of a buffer there.
  auto* fake = static_cast<FakeBackend*>(rt::get_backend_class("FakeBackend"));
  auto method = program.load_method("forward", nullptr, state);
  CHECK(method.ok() && fake->state == state.get());
  CHECK(state->set_device_copy(0, std::make_unique<HostCopy>(8, 0)) == Error::InvalidArgument);  // wrong size
  auto owned = std::make_unique<HostCopy>(24, 0xff);
  HostCopy* copy = owned.get();
  CHECK(state->set_device_copy(0, std::move(owned)) == Error::Ok && state->device_copy(0) == copy);
  CHECK(copy->uploads == 1 && copy->memory()[0] == 0);  // the buffer's contents, uploaded
  CHECK(state->set_device_copy(0, std::make_unique<HostCopy>(24, 0)) == Error::InvalidArgument);
  CHECK(state->device_copy(1) == nullptr);

  // The copy is what methods update: read() fetches it, reset() overwrites it.
  copy->memory()[5] = 42;
  auto read = state->read(0);
  CHECK(read.ok() && read->size() == 24 && (*read)[5] == 42 && copy->downloads == 1);
  // A buffer without initial data is cleared in place, not uploaded.
  CHECK(state->reset() == Error::Ok && copy->zeros == 1 && copy->uploads == 1 && copy->memory()[5] == 0);

  // A state over the caller's memory (a payload run on device copies): sizes must fit.
  std::vector<uint8_t> cache(24), count(8);
  std::vector<rt::Span<uint8_t>> spans = {{cache.data(), cache.size()}, {count.data(), count.size()}};
  CHECK(rt::ProgramState::over(program, {spans.data(), 1}).error() == Error::InvalidArgument);
  spans[1] = {count.data(), 4};
  CHECK(rt::ProgramState::over(program, {spans.data(), 2}).error() == Error::InvalidArgument &&
        message_contains("('count'): 8 bytes declared, 4 given"));
  spans[1] = {count.data(), 8};
  auto over = rt::ProgramState::over(program, {spans.data(), 2});
  CHECK(over.ok());
  if (!over.ok()) return;
  CHECK((*over)->buffer(0).data() == cache.data() && (*over)->belongs_to(program));
  cache[3] = 7;
  CHECK((*over)->reset() == Error::Ok && cache[3] == 7);  // the caller's memory is left alone
  CHECK((*over)->read(0).error() == Error::InvalidArgument);
  CHECK((*over)->set_device_copy(0, std::make_unique<HostCopy>(24, 0)) == Error::InvalidArgument);
}

void test_error_chain() {
  // Each layer says where the failure passed, once, before what the innermost one said.
  (void)ET_ERROR(Error::Internal, "device lost");
  (void)ET_ERROR_CONTEXT(Error::Internal, "instruction 3 (aten::mm.out)");
  (void)ET_ERROR_CONTEXT(Error::Internal, "instruction 3 (aten::mm.out)");
  (void)ET_ERROR_CONTEXT(Error::Internal, "method '%s'", "forward");
  CHECK(std::string(rt::last_error_message()) == "method 'forward': instruction 3 (aten::mm.out): device lost");
  rt::clear_error();
  (void)ET_ERROR_CONTEXT(Error::Internal, "instruction 0");
  CHECK(std::string(rt::last_error_message()) == "instruction 0");
  // A hostile program's names cannot grow the message without bound.
  const std::string long_name(5000, 'x');
  (void)ET_ERROR(Error::InvalidProgram, "operator %s has no kernel", long_name.c_str());
  (void)ET_ERROR_CONTEXT(Error::InvalidProgram, "%s", long_name.c_str());
  CHECK(std::strlen(rt::last_error_message()) == 2048);

  // Through a method: the delegate's own message, after the method and the instruction.
  auto* fake = static_cast<FakeBackend*>(rt::get_backend_class("FakeBackend"));
  auto p = load(build_program({.delegate = "FakeBackend"}));
  CHECK(p.ok());
  if (!p.ok()) return;
  auto method = p.get()->load_method("forward");
  CHECK(method.ok());
  if (!method.ok()) return;
  fake->fail_execute = true;
  CHECK(method.get()->execute() == Error::Internal);
  fake->fail_execute = false;
  const std::string message = rt::last_error_message();
  CHECK(message == "method 'forward': instruction 2 (delegate FakeBackend): FakeBackend: device lost");
  if (message.find("method 'forward'") != 0) std::printf("  (message was: %s)\n", message.c_str());
  // The method runs again once the delegate does.
  CHECK(method.get()->execute() == Error::Ok);
}

void test_thread_pool() {
  namespace tp = executorch::extension::threadpool;
  tp::set_num_threads(4);
  CHECK(tp::get_num_threads() == 4);
  std::vector<std::atomic<int>> hits(10007);
  tp::parallel_for(0, static_cast<int64_t>(hits.size()), 7, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    // Nested calls run inline on this thread.
    tp::parallel_for(0, 3, 1, [](int64_t, int64_t) {});
  });
  bool once = true;
  for (auto& h : hits) once &= h.load() == 1;
  CHECK(once);
  // 0: back to the default, the CPU count unless EXECUTORCH_NUM_THREADS says otherwise.
  tp::set_num_threads(0);
  const char* env = std::getenv("EXECUTORCH_NUM_THREADS");
  const size_t cpus = std::max(1u, std::thread::hardware_concurrency());
  const size_t asked = env != nullptr ? std::strtoul(env, nullptr, 10) : 0;
  CHECK(tp::get_num_threads() == (asked > 0 ? asked : cpus));
  // Resizing keeps the one pool.
  const void* identity = tp::pool_identity();
  tp::set_num_threads(2);
  CHECK(tp::get_num_threads() == 2 && tp::pool_identity() == identity);
  // The pthreadpool under it, as a library that takes one (XNNPACK) sees it: the same size, and
  // work handed to it runs on the pool's threads and the caller.
  auto* native = static_cast<pthreadpool_t>(tp::pthreadpool_handle());
  CHECK(native != nullptr && pthreadpool_get_threads_count(native) == 2);
  std::vector<std::atomic<int>> items(1000);
  pthreadpool_parallelize_1d(
      native, [](void* context, size_t i) { (*static_cast<std::vector<std::atomic<int>>*>(context))[i]++; }, &items,
      items.size(), 0);
  once = true;
  for (auto& h : items) once &= h.load() == 1;
  CHECK(once);
  tp::set_num_threads(0);
}

}  // namespace

int main() {
  test_backend_registry();
  test_kernel_registry();
  test_kernel_signatures();
  test_method_runs();
  test_output_buffers();
  test_memory_manager_buffers();
  test_planned_memory_limit();
  test_unplanned_input_must_be_set();
  test_hostile_programs();
  test_delegate_lifecycle();
  test_program_state_device_copies();
  test_error_chain();
  test_thread_pool();
  return executorch::testing::finish("runtime_test");
}
