// llm_runner: generates token ids from a program of executorch.llm.export_llm (its prefill and
// decode methods share the key/value cache, the program's state).
//
//   llm_runner --model_path model.pte --prompt 1,15043,29892 [--max_new_tokens 32]
//              [--temperature 0] [--top_k K] [--top_p P] [--seed S] [--threads N]
//   llm_runner --model_path model.pte --tokenizer tokenizer.json --prompt_text "Once upon" [...]
//   llm_runner --tokenizer tokenizer.json --tokenize "Once upon"
//
// Prints the generated ids on stdout, comma-separated, or with --tokenizer and --prompt_text the
// generated text as it comes, and the prefill time and decode tokens/s on stderr. --tokenize prints
// the ids of a text and exits (extension/llm/tokenizer says which tokenizer.json files it reads). Greedy at temperature
// 0 (the default), else sampled from the softmax at that temperature restricted to the top_k tokens and the top_p
// probability mass. Generation stops after max_new_tokens or where the cache is full. Exit status 0 on success, 1 on an
// error, 2 on bad usage.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <executorch/examples/common/cli.h>
#include <executorch/extension/llm/tokenizer/tokenizer.h>
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/runtime/core/half.h>
#include <executorch/runtime/core/log.h>

namespace rt = executorch::runtime;
using executorch::examples::fail;
using executorch::examples::usage;
using executorch::extension::make_tensor_ptr;
using executorch::extension::Module;

namespace {

// Whole-string parses (no glibc strto* : newer headers redirect those to symbols older systems lack).
bool parse_int(const char* text, int64_t& out) {
  const bool negative = *text == '-';
  const char* p = negative ? text + 1 : text;
  if (*p == '\0') return false;
  int64_t value = 0;
  for (; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9' || value > (INT64_MAX - 9) / 10) return false;
    value = value * 10 + (*p - '0');
  }
  out = negative ? -value : value;
  return true;
}

bool parse_fraction(const char* text, double& out) {
  // DIGITS[.DIGITS]: enough for temperatures and probabilities.
  double value = 0, scale = 1;
  bool dot = false, digits = false;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p == '.' && !dot) {
      dot = true;
    } else if (*p >= '0' && *p <= '9') {
      digits = true;
      if (dot) {
        scale /= 10;
        value += (*p - '0') * scale;
      } else {
        value = value * 10 + (*p - '0');
      }
    } else {
      return false;
    }
  }
  out = value;
  return digits;
}

bool parse_ids(const char* text, std::vector<int64_t>& ids) {
  std::string list(text);
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    int64_t id = 0;
    if (!parse_int(list.substr(start, comma - start).c_str(), id)) return false;
    ids.push_back(id);
    start = comma + 1;
  }
  return !ids.empty();
}

struct Sampling {
  double temperature = 0;
  int64_t top_k = 0;  // 0: all tokens
  double top_p = 1;
  std::mt19937_64 rng;
};

// Row `row` of logits [1, rows, vocab] as float, whatever the program's floating dtype.
std::vector<float> logits_row(const rt::Tensor& t, int64_t row) {
  const int64_t vocab = t.size(t.dim() - 1);
  std::vector<float> out(static_cast<size_t>(vocab));
  const size_t at = static_cast<size_t>(row * vocab);
  const auto* half = static_cast<const uint16_t*>(t.const_data_ptr()) + at;
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.scalar_type()) {
      case rt::ScalarType::Float: out[i] = static_cast<const float*>(t.const_data_ptr())[at + i]; break;
      case rt::ScalarType::Half: out[i] = rt::half_to_float(half[i]); break;
      case rt::ScalarType::BFloat16: out[i] = rt::bfloat16_to_float(half[i]); break;
      default: out[i] = 0; break;
    }
  }
  return out;
}

int64_t pick(const std::vector<float>& logits, Sampling& s) {
  if (s.temperature <= 0) return std::max_element(logits.begin(), logits.end()) - logits.begin();
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  if (s.top_k > 0 && static_cast<size_t>(s.top_k) < order.size()) order.resize(static_cast<size_t>(s.top_k));
  std::vector<double> probs(order.size());
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    probs[i] = std::exp((logits[order[i]] - logits[order[0]]) / s.temperature);
    total += probs[i];
  }
  size_t keep = order.size();
  double mass = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    mass += probs[i] / total;
    if (mass >= s.top_p) {
      keep = i + 1;
      break;
    }
  }
  std::discrete_distribution<size_t> choose(probs.begin(), probs.begin() + static_cast<long>(keep));
  return order[choose(s.rng)];
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kOptions =
      "--model_path FILE.pte (--prompt ID,ID,... | --tokenizer tokenizer.json --prompt_text TEXT)\n"
      "          [--max_new_tokens N] [--temperature T] [--top_k K] [--top_p P] [--seed S] [--threads N]\n"
      "       or: --tokenizer tokenizer.json --tokenize TEXT";
  std::string model_path, tokenizer_path, prompt_text, tokenize;
  bool text_prompt = false, tokenize_only = false;
  std::vector<int64_t> prompt;
  int64_t max_new_tokens = 32, top_k = 0, seed = 0, threads = 0;
  double temperature = 0, top_p = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage(argv[0], kOptions);
    const char* value = argv[++i];
    bool ok = true;
    if (flag == "--model_path") {
      model_path = value;
    } else if (flag == "--prompt") {
      ok = parse_ids(value, prompt);
    } else if (flag == "--tokenizer") {
      tokenizer_path = value;
    } else if (flag == "--prompt_text") {
      prompt_text = value, text_prompt = true;
    } else if (flag == "--tokenize") {
      tokenize = value, tokenize_only = true;
    } else if (flag == "--max_new_tokens") {
      ok = parse_int(value, max_new_tokens) && max_new_tokens >= 0;
    } else if (flag == "--temperature") {
      ok = parse_fraction(value, temperature);
    } else if (flag == "--top_k") {
      ok = parse_int(value, top_k) && top_k >= 0;
    } else if (flag == "--top_p") {
      ok = parse_fraction(value, top_p) && top_p > 0 && top_p <= 1;
    } else if (flag == "--seed") {
      ok = parse_int(value, seed);
    } else if (flag == "--threads") {
      ok = parse_int(value, threads) && threads >= 1 && threads <= 1024;
    } else {
      return usage(argv[0], kOptions);
    }
    if (!ok) {
      std::fprintf(stderr, "error: %s %s: not a valid value\n", flag.c_str(), value);
      return 2;
    }
  }
  std::unique_ptr<executorch::extension::llm::Tokenizer> tokenizer;
  if (!tokenizer_path.empty()) {
    std::string error;
    tokenizer = executorch::extension::llm::Tokenizer::load(tokenizer_path, error);
    if (tokenizer == nullptr) return std::fprintf(stderr, "error: tokenizer: %s\n", error.c_str()), 1;
  }
  if ((text_prompt || tokenize_only) && tokenizer == nullptr) return usage(argv[0], kOptions);
  if (text_prompt || tokenize_only) {
    std::string error;
    if (!prompt.empty() || (text_prompt && tokenize_only)) return usage(argv[0], kOptions);
    if (!tokenizer->encode(tokenize_only ? tokenize : prompt_text, prompt, error)) {
      return std::fprintf(stderr, "error: tokenizer: %s\n", error.c_str()), 1;
    }
    if (tokenize_only) {
      for (size_t i = 0; i < prompt.size(); ++i) std::printf(i ? ",%lld" : "%lld", static_cast<long long>(prompt[i]));
      std::printf("\n");
      return 0;
    }
    if (prompt.empty()) return std::fprintf(stderr, "error: the prompt text has no tokens\n"), 1;
  }
  if (model_path.empty() || prompt.empty()) return usage(argv[0], kOptions);
  if (threads > 0) executorch::extension::threadpool::set_num_threads(static_cast<size_t>(threads));

  Module module(model_path);
  if (const rt::Error e = module.load(); e != rt::Error::Ok) return fail("cannot load the program", e);
  int64_t max_seq_len = 0, chunk = 0, vocab = 0;
  if (!parse_int(module.metadata("llm_max_seq_len").c_str(), max_seq_len) ||
      !parse_int(module.metadata("llm_prefill_chunk").c_str(), chunk) ||
      !parse_int(module.metadata("llm_vocab_size").c_str(), vocab) || chunk < 1 || chunk > max_seq_len) {
    return fail("not a program of executorch.llm.export_llm (no llm_max_seq_len/llm_prefill_chunk/llm_vocab_size)");
  }
  if (int64_t batch = 1; !module.metadata("llm_batch_size").empty() &&
                         (!parse_int(module.metadata("llm_batch_size").c_str(), batch) || batch != 1)) {
    std::fprintf(stderr, "error: the program has batch %s; llm_runner runs programs of batch 1\n",
                 module.metadata("llm_batch_size").c_str());
    return 1;
  }
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (n > max_seq_len) {
    std::fprintf(stderr, "error: the prompt has %lld tokens; the program holds %lld\n", static_cast<long long>(n),
                 static_cast<long long>(max_seq_len));
    return 1;
  }
  for (int64_t id : prompt) {
    if (id < 0 || id >= vocab) {
      std::fprintf(stderr, "error: prompt token %lld lies outside [0, %lld)\n", static_cast<long long>(id),
                   static_cast<long long>(vocab));
      return 1;
    }
  }

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Prefill in chunks of up to `chunk` tokens; a dynamic prefill (llm_prefill_min below the chunk)
  // takes the last one as it is. A chunk shorter than the program takes starts early enough to be
  // full where the prompt allows (its earlier positions are computed again, to the same keys and
  // values), else it is padded, and the padding's cache entries are overwritten by decode before
  // any position attends to them.
  int64_t shortest = chunk;
  if (!module.metadata("llm_prefill_min").empty() &&
      (!parse_int(module.metadata("llm_prefill_min").c_str(), shortest) || shortest < 1 || shortest > chunk)) {
    return fail("llm_prefill_min is not a length from 1 to llm_prefill_chunk");
  }
  std::vector<float> logits;
  // A prefill that returns its last position's logits only is never padded: a prompt shorter than
  // it takes goes through decode, a token at a time.
  const bool last_only = module.metadata("llm_prefill_logits") == "last";
  for (int64_t p = 0; last_only && n < shortest && p < n; ++p) {
    auto out = module.execute("decode", {rt::EValue(*make_tensor_ptr({1, 1}, std::vector<int64_t>{prompt[p]})),
                                         rt::EValue(*make_tensor_ptr({1}, std::vector<int64_t>{p}))});
    if (!out.ok()) return fail("decode", out.error());
    logits = logits_row(out.get()[0].to_tensor(), 0);
  }
  for (int64_t begin = last_only && n < shortest ? n : 0; begin < n;) {
    const int64_t length = std::max(shortest, std::min(chunk, n - begin));  // this call's
    const int64_t first = std::min(begin, std::max<int64_t>(n - length, 0));
    const int64_t real = std::min(length, n - first);
    std::vector<int64_t> window(static_cast<size_t>(length), 0), positions(static_cast<size_t>(length));
    std::copy(prompt.begin() + first, prompt.begin() + first + real, window.begin());
    std::iota(positions.begin(), positions.end(), first);
    auto out = module.execute("prefill", {rt::EValue(*make_tensor_ptr({1, length}, std::move(window))),
                                          rt::EValue(*make_tensor_ptr({length}, std::move(positions)))});
    if (!out.ok()) return fail("prefill", out.error());
    logits = logits_row(out.get()[0].to_tensor(), last_only ? 0 : real - 1);
    begin = first + real;
  }
  const auto prefilled = Clock::now();

  Sampling sampling{temperature, top_k, top_p, std::mt19937_64(static_cast<uint64_t>(seed))};
  std::vector<int64_t> tokens;
  std::string printed;  // text mode: the decoded text written so far
  auto stream = [&](bool last) {
    if (!text_prompt) return;
    const std::string text = tokenizer->decode(tokens);
    // Held back while the text ends in U+FFFD: a character whose bytes are still coming. Written:
    // what the newest tokens added, or where they changed earlier text, all of it from there.
    if (!last && text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) return;
    size_t same = 0;
    while (same < printed.size() && same < text.size() && printed[same] == text[same]) ++same;
    if (same < printed.size()) std::printf("\n");
    std::fwrite(text.data() + same, 1, text.size() - same, stdout);
    std::fflush(stdout);
    printed = text;
  };
  for (int64_t position = n; static_cast<int64_t>(tokens.size()) < max_new_tokens;) {
    tokens.push_back(pick(logits, sampling));
    stream(false);
    if (static_cast<int64_t>(tokens.size()) == max_new_tokens || position >= max_seq_len) break;
    auto out = module.execute("decode", {rt::EValue(*make_tensor_ptr({1, 1}, std::vector<int64_t>{tokens.back()})),
                                         rt::EValue(*make_tensor_ptr({1}, std::vector<int64_t>{position}))});
    if (!out.ok()) return fail("decode", out.error());
    logits = logits_row(out.get()[0].to_tensor(), 0);
    ++position;
  }
  const auto done = Clock::now();
  stream(true);

  if (!text_prompt) {
    for (size_t i = 0; i < tokens.size(); ++i) std::printf(i ? ",%lld" : "%lld", static_cast<long long>(tokens[i]));
  }
  std::printf("\n");
  const double prefill_ms = std::chrono::duration<double, std::milli>(prefilled - start).count();
  const double decode_s = std::chrono::duration<double>(done - prefilled).count();
  std::fprintf(stderr, "prompt %lld tokens, prefill %.2f ms; %zu tokens, decode %.1f tokens/s\n",
               static_cast<long long>(n), prefill_ms, tokens.size(),
               tokens.size() > 1 && decode_s > 0 ? static_cast<double>(tokens.size() - 1) / decode_s : 0.0);
  return 0;
}
