// my_gpu_app MODEL_cuda.pte INPUT.bin D0,D1,... OUTPUT.bin
// Copies a float32 input to the GPU, runs `forward` with a tensor pointing at that device memory,
// and writes output 0 (host memory) to OUTPUT.bin.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/core/log.h>

using namespace executorch::extension;
namespace rt = executorch::runtime;

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  std::ifstream in(argv[2], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<int64_t> sizes;
  std::stringstream dims(argv[3]);
  for (std::string d; std::getline(dims, d, ',');) sizes.push_back(std::stoll(d));

  float* gpu_data = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&gpu_data), bytes.size()) != cudaSuccess ||
      cudaMemcpy(gpu_data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
    std::fprintf(stderr, "cannot place the input on the GPU\n");
    return 1;
  }

  Module module(argv[1]);
  auto result = module.forward(make_tensor_ptr(sizes, gpu_data, rt::Device{rt::DeviceType::CUDA, 0}));
  if (!result.ok()) {
    std::fprintf(stderr, "forward failed: %s: %s\n", rt::to_string(result.error()), rt::last_error_message());
    return 1;
  }
  const rt::Tensor& out = result.get()[0].to_tensor();
  std::ofstream(argv[4], std::ios::binary)
      .write(static_cast<const char*>(out.const_data_ptr()), static_cast<std::streamsize>(out.nbytes()));
  std::printf("device input -> %lld outputs\n", static_cast<long long>(out.numel()));
  cudaFree(gpu_data);
  return 0;
}
