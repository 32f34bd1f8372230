// Runs the exported model through @executorch's shared libraries: prints the registered backends and
// the output. Exit 0 when the model ran and produced four finite values.
#include <cmath>
#include <cstdio>
#include <vector>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/log.h>

using namespace executorch::extension;
namespace rt = executorch::runtime;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::printf("backends:");
  for (size_t i = 0; i < rt::get_num_registered_backends(); ++i) std::printf(" %s", rt::get_backend_name(i));
  std::printf("\n");
  Module module(argv[1]);
  auto result = module.forward(make_tensor_ptr({1, 8}, std::vector<float>(8, 1.f)));
  if (!result.ok()) {
    std::fprintf(stderr, "forward failed: %s: %s\n", rt::to_string(result.error()), rt::last_error_message());
    return 1;
  }
  const rt::Tensor& out = result.get()[0].to_tensor();
  std::printf("output:");
  for (int64_t i = 0; i < out.numel(); ++i) std::printf(" %g", out.data_ptr<float>()[i]);
  std::printf("\n");
  if (out.numel() != 4) return 1;
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (!std::isfinite(out.data_ptr<float>()[i])) return 1;
  }
  return 0;
}
