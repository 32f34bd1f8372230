#pragma once

// Text to token ids and back from a Hugging Face tokenizer.json, for llm_runner. What it reads:
//
// - model: BPE (vocab, merges as "a b" strings or [a, b] pairs, byte_fallback, unk_token);
// - normalizer: none, Prepend, Replace (of a string), NFC (on ASCII text, which it leaves as it is;
//   other text is refused), or a Sequence of those;
// - pre_tokenizer: none, ByteLevel (GPT-2's split pattern), Split with Llama 3's or Qwen2's pattern
//   (Isolated), Metaspace, or a Sequence of those. The patterns are matched by hand: outside ASCII,
//   letters and numbers are told apart from spaces and punctuation by a table of the common
//   Unicode ranges;
// - decoder: ByteLevel, Metaspace, or a Sequence of Replace, ByteFallback, Fuse and Strip;
// - added_tokens: matched verbatim in the text before anything else.
//
// Anything else (WordPiece and Unigram models, other split patterns, other Unicode normalization
// forms) is refused at load with a message naming it. encode() adds no special tokens: write
// Llama 3's "<|begin_of_text|>" into the text where the model wants it.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace executorch {
namespace extension {
namespace llm {

struct Json;

class Tokenizer {
 public:
  // The tokenizer of the file at `path`, or nullptr with the reason in `error`.
  static std::unique_ptr<Tokenizer> load(const std::string& path, std::string& error);

  // The ids of `text` (UTF-8), as the tokenizers library's encode(text, add_special_tokens=False).
  // False with the reason in `error` where a piece has no id (no byte fallback and no unk token).
  bool encode(const std::string& text, std::vector<int64_t>& ids, std::string& error) const;

  // The text of `ids`; ids outside the vocabulary decode to nothing.
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  struct Step {
    enum class Kind { Prepend, Replace, Nfc, ByteLevel, Metaspace, Split, ByteFallback, Fuse, Strip };
    Kind kind;
    std::string a, b;             // Prepend: a; Replace: a -> b; Metaspace: a (the replacement)
    bool flag = false;            // ByteLevel: add_prefix_space; Metaspace: prepend only to the first piece
    bool use_regex = true;        // ByteLevel
    bool prepend = true;          // Metaspace: prepend_scheme other than "never"
    bool split = true;            // Metaspace
    int64_t start = 0, stop = 0;  // Strip; Split: start = the digits its pattern groups
  };
  struct Added {
    std::string content;
    int64_t id;
  };

  Tokenizer() = default;
  bool read(const Json& root, std::string& error);
  bool read_steps(const Json* node, const char* what, std::vector<Step>& out, std::string& error) const;
  std::vector<std::string> pre_tokenize(std::string text, bool first) const;
  bool bpe(const std::string& word, std::vector<int64_t>& ids, std::string& error) const;

  std::unordered_map<std::string, int64_t> vocab_;
  std::vector<std::string> tokens_;                 // by id
  std::unordered_map<std::string, int64_t> ranks_;  // "a\x01b" -> merge rank
  std::vector<Added> added_;
  std::vector<Step> normalizer_, pre_tokenizer_, decoder_;
  bool byte_level_ = false;  // words are bytes mapped to printable characters (GPT-2)
  bool byte_fallback_ = false;
  bool nfc_ = false;  // the NFC normalizer: ASCII text only
  int64_t unk_ = -1;
};

}  // namespace llm
}  // namespace extension
}  // namespace executorch
