// The gate arithmetic of one LSTM or GRU time step, from its gate pre-activations (the exporter
// writes each step of nn.LSTM / nn.GRU as a matrix product and one of these). float32 tensors;
// the exporter widens half-precision programs for the CPU. docs/program_format.md states the
// arithmetic, which CudaBackend's kernels share.
#include <cmath>

#include <executorch/kernels/kernel_util.h>

namespace executorch {
namespace kernels {
namespace {

float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// Checks a cell call: args = (input_gates [B, G*H], hidden_gates [B, G*H], state [B, H], outputs
// [B, H]...), all float32 and contiguous. Sets rows B and width H.
Error check_cell(Args args, size_t outputs, int64_t gates, const char* op, int64_t* rows, int64_t* width) {
  ET_TRY(check_count(args, 3 + outputs, op));
  for (size_t i = 0; i < args.size(); ++i) {
    Tensor* t = nullptr;
    ET_TRY(tensor_at(args, i, op, &t));
    ET_TRY(check_dtype(*t, ScalarType::Float, op, i < 2 ? "a gate tensor" : "a state tensor"));
    KCHECK(t->dim() == 2, "%s: argument %zu must be 2-D [batch, features]", op, i);
  }
  const Tensor& state = args[2]->to_tensor();
  *rows = state.size(0), *width = state.size(1);
  for (size_t i : {0, 1}) {
    const Tensor& g = args[i]->to_tensor();
    KCHECK(g.size(0) == *rows && g.size(1) == gates * *width, "%s: argument %zu is [%lld, %lld], expected [%lld, %lld]",
           op, i, static_cast<long long>(g.size(0)), static_cast<long long>(g.size(1)), static_cast<long long>(*rows),
           static_cast<long long>(gates * *width));
  }
  for (size_t i = 3; i < args.size(); ++i) {
    KCHECK(same_shape(args[i]->to_tensor(), state), "%s: output %zu must be shaped like the state", op, i - 3);
  }
  return Error::Ok;
}

// lstm_cell(input_gates, hidden_gates, cell) -> (hidden, cell): gates in order i, f, g, o;
// c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h' = sigmoid(o) * tanh(c').
Error lstm_cell(KernelRuntimeContext&, Args args) {
  const char* op = "executorch::lstm_cell";
  int64_t rows = 0, h = 0;
  ET_TRY(check_cell(args, 2, 4, op, &rows, &h));
  const float* xg = args[0]->to_tensor().data_ptr<float>();
  const float* hg = args[1]->to_tensor().data_ptr<float>();
  const float* c = args[2]->to_tensor().data_ptr<float>();
  float* h_out = args[3]->to_tensor().data_ptr<float>();
  float* c_out = args[4]->to_tensor().data_ptr<float>();
  for (int64_t b = 0; b < rows; ++b) {
    const float* x = xg + b * 4 * h;
    const float* y = hg + b * 4 * h;
    for (int64_t j = 0; j < h; ++j) {
      const float i = sigmoid(x[j] + y[j]), f = sigmoid(x[h + j] + y[h + j]);
      const float g = std::tanh(x[2 * h + j] + y[2 * h + j]), o = sigmoid(x[3 * h + j] + y[3 * h + j]);
      const float next = f * c[b * h + j] + i * g;
      c_out[b * h + j] = next;
      h_out[b * h + j] = o * std::tanh(next);
    }
  }
  return Error::Ok;
}

// gru_cell(input_gates, hidden_gates, hidden) -> hidden: gates in order r, z, n;
// r = sigmoid(xr + hr), z = sigmoid(xz + hz), n = tanh(xn + r * hn), h' = (1 - z) * n + z * h.
Error gru_cell(KernelRuntimeContext&, Args args) {
  const char* op = "executorch::gru_cell";
  int64_t rows = 0, h = 0;
  ET_TRY(check_cell(args, 1, 3, op, &rows, &h));
  const float* xg = args[0]->to_tensor().data_ptr<float>();
  const float* hg = args[1]->to_tensor().data_ptr<float>();
  const float* prev = args[2]->to_tensor().data_ptr<float>();
  float* out = args[3]->to_tensor().data_ptr<float>();
  for (int64_t b = 0; b < rows; ++b) {
    const float* x = xg + b * 3 * h;
    const float* y = hg + b * 3 * h;
    for (int64_t j = 0; j < h; ++j) {
      const float r = sigmoid(x[j] + y[j]), z = sigmoid(x[h + j] + y[h + j]);
      const float n = std::tanh(x[2 * h + j] + r * y[2 * h + j]);
      out[b * h + j] = (1.f - z) * n + z * prev[b * h + j];
    }
  }
  return Error::Ok;
}

const runtime::Kernel kKernels[] = {
    {"executorch::lstm_cell", lstm_cell},
    {"executorch::gru_cell", gru_cell},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
