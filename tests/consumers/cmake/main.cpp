// my_app MODEL.pte INPUT.bin D0,D1,... OUTPUT.bin
// Runs `forward` on one float32 input read from INPUT.bin with the given shape and writes output 0's
// bytes to OUTPUT.bin; prints the registered backends. Built with MY_APP_ON_GPU (my_gpu_app, the
// seed's example in ../cmake_cuda), it first copies the input to the GPU and hands `forward` a
// tensor pointing at that device memory.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#ifdef MY_APP_ON_GPU
#include <cuda_runtime_api.h>
#endif

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/log.h>

using namespace executorch::extension;
namespace rt = executorch::runtime;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL.pte INPUT.bin D0,D1,... OUTPUT.bin\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> data(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(data.data()));
  std::vector<int64_t> sizes;
  std::stringstream dims(argv[3]);
  for (std::string d; std::getline(dims, d, ',');) sizes.push_back(std::stoll(d));

  std::printf("backends:");
  for (size_t i = 0; i < rt::get_num_registered_backends(); ++i) std::printf(" %s", rt::get_backend_name(i));
  std::printf("\n");

#ifdef MY_APP_ON_GPU
  float* input = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&input), bytes.size()) != cudaSuccess ||
      cudaMemcpy(input, data.data(), bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
    std::fprintf(stderr, "cannot place the input on the GPU\n");
    return 1;
  }
  const rt::Device device{rt::DeviceType::CUDA, 0};
#else
  float* input = data.data();
  const rt::Device device{};
#endif

  Module module(argv[1]);
  auto result = module.forward(make_tensor_ptr(sizes, input, device));
  if (!result.ok()) {
    std::fprintf(stderr, "forward failed: %s: %s\n", rt::to_string(result.error()), rt::last_error_message());
    return 1;
  }
  const rt::Tensor& out = result.get()[0].to_tensor();
  std::ofstream(argv[4], std::ios::binary)
      .write(static_cast<const char*>(out.const_data_ptr()), static_cast<std::streamsize>(out.nbytes()));
  std::printf("output: %lld elements\n", static_cast<long long>(out.numel()));
#ifdef MY_APP_ON_GPU
  cudaFree(input);
#endif
  return 0;
}
