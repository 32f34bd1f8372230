// executor_runner: loads a .pte, sets its inputs (raw files or a fill), runs it, prints or saves the
// outputs and times the runs.
//
//   executor_runner --model_path model.pte [--method forward] [--input in0.bin --input in1.bin ...]
//                   [--fill zeros|ones|random] [--output_dir DIR] [--iterations N] [--print]
//
// An input file holds the tensor's raw bytes (its dtype and shape come from the program). Outputs are
// written as DIR/output_<i>.bin, raw bytes. Exit status 0 on success; errors go to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <executorch/examples/common/cli.h>
#include <executorch/extension/module/module.h>
#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/runtime/core/log.h>

namespace rt = executorch::runtime;
using executorch::examples::fail;
using executorch::examples::usage;

namespace {

bool read_file(const std::string& path, std::vector<uint8_t>& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

void fill(const rt::Tensor& t, const std::string& how, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = how == "ones" ? 1.0 : how == "random" ? normal(rng) : 0.0;
    switch (t.scalar_type()) {
      case rt::ScalarType::Float: t.data_ptr<float>()[i] = static_cast<float>(v); break;
      case rt::ScalarType::Long:
        t.data_ptr<int64_t>()[i] = how == "random" ? static_cast<int64_t>(rng() % 2) : static_cast<int64_t>(v);
        break;
      case rt::ScalarType::Bool: t.data_ptr<bool>()[i] = v != 0; break;
      default: std::memset(t.mutable_data_ptr(), 0, t.nbytes()); return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kOptions =
      "--model_path FILE.pte [--method NAME] [--input FILE]... [--fill zeros|ones|random]\n"
      "          [--output_dir DIR] [--iterations N] [--threads N] [--print]";
  std::string model, method_name = "forward", fill_mode = "ones", output_dir;
  std::vector<std::string> inputs;
  int iterations = 1;
  long threads = 0;
  bool print = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--print") {
      print = true;
      continue;
    }
    if (!(v = next())) return usage(argv[0], kOptions);
    if (a == "--model_path")
      model = v;
    else if (a == "--method")
      method_name = v;
    else if (a == "--input")
      inputs.push_back(v);
    else if (a == "--fill")
      fill_mode = v;
    else if (a == "--output_dir")
      output_dir = v;
    else if (a == "--iterations")
      iterations = std::max(1, std::atoi(v));
    else if (a == "--threads")
      threads = std::atol(v);
    else
      return usage(argv[0], kOptions);
  }
  if (model.empty() || (fill_mode != "zeros" && fill_mode != "ones" && fill_mode != "random"))
    return usage(argv[0], kOptions);
  if (threads > 0) executorch::extension::threadpool::set_num_threads(static_cast<size_t>(threads));

  executorch::extension::Module module(model);
  auto loaded = module.method(method_name);
  if (!loaded.ok()) return fail("loading the method", loaded.error());
  rt::Method* method = loaded.get();
  if (!inputs.empty() && inputs.size() != method->num_inputs()) {
    std::fprintf(stderr, "error: method '%s' takes %zu inputs, %zu files given\n", method_name.c_str(),
                 method->num_inputs(), inputs.size());
    return 1;
  }

  // Inputs: the program's declared dtype and shape, data from files or the fill.
  std::mt19937 rng(0);
  std::vector<std::vector<uint8_t>> storage(method->num_inputs());
  for (size_t i = 0; i < method->num_inputs(); ++i) {
    const rt::EValue& declared = method->input(i);
    if (!declared.is_tensor()) continue;  // scalar inputs keep the exported value
    rt::Tensor t = declared.to_tensor();
    storage[i].resize(t.nbytes());
    t.set_data(storage[i].data());
    if (!inputs.empty()) {
      std::vector<uint8_t> bytes;
      if (!read_file(inputs[i], bytes)) {
        std::fprintf(stderr, "error: cannot read %s\n", inputs[i].c_str());
        return 1;
      }
      if (bytes.size() != t.nbytes()) {
        std::fprintf(stderr, "error: %s has %zu bytes; input %zu (%s, %lld elements) needs %zu\n", inputs[i].c_str(),
                     bytes.size(), i, rt::to_string(t.scalar_type()), static_cast<long long>(t.numel()), t.nbytes());
        return 1;
      }
      storage[i] = std::move(bytes);
      t.set_data(storage[i].data());
    } else {
      fill(t, fill_mode, rng);
    }
    const rt::Error e = method->set_input(i, rt::EValue(t));
    if (e != rt::Error::Ok) return fail("setting an input", e);
  }

  std::vector<double> ms;
  for (int it = 0; it < iterations; ++it) {
    const auto start = std::chrono::steady_clock::now();
    const rt::Error e = method->execute();
    const auto end = std::chrono::steady_clock::now();
    if (e != rt::Error::Ok) return fail("executing", e);
    ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("method %s: %d iteration(s), median %.3f ms, min %.3f ms, threads %zu\n", method_name.c_str(), iterations,
              ms[ms.size() / 2], ms.front(), executorch::extension::threadpool::get_num_threads());

  for (size_t i = 0; i < method->num_outputs(); ++i) {
    const rt::EValue& out = method->get_output(i);
    if (!out.is_tensor()) continue;
    const rt::Tensor& t = out.to_tensor();
    std::printf("output %zu: %s [", i, rt::to_string(t.scalar_type()));
    for (int d = 0; d < t.dim(); ++d) std::printf(d ? ", %lld" : "%lld", static_cast<long long>(t.size(d)));
    std::printf("]\n");
    if (print && t.scalar_type() == rt::ScalarType::Float) {
      for (int64_t k = 0; k < std::min<int64_t>(t.numel(), 8); ++k) std::printf("  %g\n", t.data_ptr<float>()[k]);
    }
    if (!output_dir.empty()) {
      const std::string path = output_dir + "/output_" + std::to_string(i) + ".bin";
      std::ofstream f(path, std::ios::binary);
      f.write(static_cast<const char*>(t.const_data_ptr()), static_cast<std::streamsize>(t.nbytes()));
      if (!f) {
        std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
        return 1;
      }
    }
  }
  return 0;
}
