// The gate arithmetic of one LSTM or GRU time step, from its gate pre-activations (the exporter
// writes each step of nn.LSTM / nn.GRU as a matrix product and one of these), and whole layers
// (lstm_layer, gru_layer: what programs for CudaBackend hold, run here where a payload runs on the
// CPU). float32 tensors; the exporter widens half-precision programs for the CPU.
// docs/program_format.md states the arithmetic, which CudaBackend's kernels share.
#include <algorithm>
#include <cmath>

#include <executorch/kernels/kernel_util.h>

namespace executorch {
namespace kernels {
namespace {

float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// The cell arithmetic of one unit from its input and hidden gate pre-activations xg and hg (i, f, g,
// o or r, z, n): returns the new hidden state. `state` is an LSTM's previous cell (its new one goes
// to *cell) or a GRU's previous hidden state.
float recurrent_unit(bool lstm, const float* xg, const float* hg, float state, float* cell) {
  if (lstm) {
    const float c = sigmoid(xg[1] + hg[1]) * state + sigmoid(xg[0] + hg[0]) * std::tanh(xg[2] + hg[2]);
    *cell = c;
    return sigmoid(xg[3] + hg[3]) * std::tanh(c);
  }
  const float z = sigmoid(xg[1] + hg[1]), n = std::tanh(xg[2] + sigmoid(xg[0] + hg[0]) * hg[2]);
  return (1.f - z) * n + z * state;
}

// One cell step over every (row, unit) from contiguous gates [rows, G * h].
void cell_step(bool lstm, const float* xg, const float* hg, const float* state, float* h_out, float* c_out,
               int64_t rows, int64_t h) {
  const int64_t gates = lstm ? 4 : 3;
  for (int64_t b = 0; b < rows; ++b) {
    for (int64_t j = 0; j < h; ++j) {
      float x[4] = {}, y[4] = {}, c = 0.f;
      for (int64_t g = 0; g < gates; ++g) x[g] = xg[(b * gates + g) * h + j], y[g] = hg[(b * gates + g) * h + j];
      h_out[b * h + j] = recurrent_unit(lstm, x, y, state[b * h + j], &c);
      if (lstm) c_out[b * h + j] = c;
    }
  }
}

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
  cell_step(true, args[0]->to_tensor().data_ptr<float>(), args[1]->to_tensor().data_ptr<float>(),
            args[2]->to_tensor().data_ptr<float>(), args[3]->to_tensor().data_ptr<float>(),
            args[4]->to_tensor().data_ptr<float>(), rows, h);
  return Error::Ok;
}

// gru_cell(input_gates, hidden_gates, hidden) -> hidden: gates in order r, z, n;
// r = sigmoid(xr + hr), z = sigmoid(xz + hz), n = tanh(xn + r * hn), h' = (1 - z) * n + z * h.
Error gru_cell(KernelRuntimeContext&, Args args) {
  const char* op = "executorch::gru_cell";
  int64_t rows = 0, h = 0;
  ET_TRY(check_cell(args, 1, 3, op, &rows, &h));
  cell_step(false, args[0]->to_tensor().data_ptr<float>(), args[1]->to_tensor().data_ptr<float>(),
            args[2]->to_tensor().data_ptr<float>(), args[3]->to_tensor().data_ptr<float>(), nullptr, rows, h);
  return Error::Ok;
}

// lstm_layer(gates [T, B, 4H], w_hh [4H, H], b_hh [4H]?, h0 [B, H], c0 [B, H], reverse) -> (y [T, B, H],
// h_n, c_n) and gru_layer(gates [T, B, 3H], w_hh [3H, H], b_hh [3H]?, h0, reverse) -> (y, h_n): every
// step's hidden gates h W_hh^T + b_hh, then the cell above, backwards in time where `reverse`.
Error recurrent_layer(Args args, bool lstm) {
  const char* op = lstm ? "executorch::lstm_layer" : "executorch::gru_layer";
  const int64_t gates = lstm ? 4 : 3;
  const size_t first_output = lstm ? 6 : 5;
  Tensor *x = nullptr, *w = nullptr, *b = nullptr, *h0 = nullptr, *c0 = nullptr, *y = nullptr, *hn = nullptr,
         *cn = nullptr;
  int64_t reverse = 0;
  ET_TRY(read_args(args, op, first_output + (lstm ? 3 : 2), at(0, &x), at(1, &w), optional_at(2, &b), at(3, &h0),
                   at(first_output - 1, &reverse), at(first_output, &y), at(first_output + 1, &hn)));
  if (lstm) ET_TRY(read_args(args, op, 9, at(4, &c0), at(8, &cn)));
  for (const Tensor* t : {x, w, b, h0, c0, y, hn, cn}) {
    if (t != nullptr) ET_TRY(check_dtype(*t, ScalarType::Float, op, "a tensor"));
  }
  KCHECK(h0->dim() == 2, "%s: the initial hidden state must be 2-D [batch, hidden]", op);
  const int64_t rows = h0->size(0), h = h0->size(1);
  KCHECK(x->dim() == 3 && x->size(1) == rows && x->size(2) == gates * h, "%s: gates must be [steps, %lld, %lld]", op,
         static_cast<long long>(rows), static_cast<long long>(gates * h));
  const int64_t steps = x->size(0);
  KCHECK(w->dim() == 2 && w->size(0) == gates * h && w->size(1) == h, "%s: w_hh must be [%lld, %lld]", op,
         static_cast<long long>(gates * h), static_cast<long long>(h));
  if (b != nullptr) ET_TRY(check_numel(*b, gates * h, op, "b_hh"));
  KCHECK(y->dim() == 3 && y->size(0) == steps && y->size(1) == rows && y->size(2) == h,
         "%s: the output must be [steps, batch, hidden]", op);
  for (const Tensor* t : {c0, hn, cn}) {
    KCHECK(t == nullptr || runtime::same_shape(*t, *h0), "%s: states must be shaped like the initial hidden state", op);
  }
  const float* wd = w->data_ptr<float>();
  const float* bd = b != nullptr ? b->data_ptr<float>() : nullptr;
  const int64_t step_size = rows * h;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;
    const float* prev = s == 0 ? h0->data_ptr<float>() : y->data_ptr<float>() + (reverse ? t + 1 : t - 1) * step_size;
    const float* c_prev = !lstm ? nullptr : s == 0 ? c0->data_ptr<float>() : cn->data_ptr<float>();
    const float* xg = x->data_ptr<float>() + t * rows * gates * h;
    float* out = y->data_ptr<float>() + t * step_size;
    for (int64_t r = 0; r < rows; ++r) {
      const float* hp = prev + r * h;
      for (int64_t j = 0; j < h; ++j) {
        float x[4] = {}, hg[4] = {}, c = 0.f;  // this unit's input and hidden projections
        for (int64_t g = 0; g < gates; ++g) {
          const float* row = wd + (g * h + j) * h;
          float dot = bd != nullptr ? bd[g * h + j] : 0.f;
          for (int64_t k = 0; k < h; ++k) dot += hp[k] * row[k];
          hg[g] = dot;
          x[g] = xg[r * gates * h + g * h + j];
        }
        const int64_t i = r * h + j;
        out[i] = recurrent_unit(lstm, x, hg, lstm ? c_prev[i] : hp[j], &c);
        if (lstm) cn->data_ptr<float>()[i] = c;
      }
    }
  }
  if (steps > 0) {
    const float* last = y->data_ptr<float>() + (reverse ? 0 : steps - 1) * step_size;
    std::copy(last, last + step_size, hn->data_ptr<float>());
  } else {
    std::copy(h0->data_ptr<float>(), h0->data_ptr<float>() + step_size, hn->data_ptr<float>());
    if (lstm) std::copy(c0->data_ptr<float>(), c0->data_ptr<float>() + step_size, cn->data_ptr<float>());
  }
  return Error::Ok;
}

Error lstm_layer(KernelRuntimeContext&, Args args) { return recurrent_layer(args, true); }
Error gru_layer(KernelRuntimeContext&, Args args) { return recurrent_layer(args, false); }

const runtime::Kernel kKernels[] = {
    {"executorch::lstm_cell", lstm_cell},
    {"executorch::gru_cell", gru_cell},
    {"executorch::lstm_layer", lstm_layer},
    {"executorch::gru_layer", gru_layer},
};

const bool registered = runtime::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])}) == Error::Ok;

}  // namespace
}  // namespace kernels
}  // namespace executorch
