#include <executorch/extension/llm/tokenizer/tokenizer.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include <executorch/extension/llm/tokenizer/json.h>
#include <executorch/extension/llm/tokenizer/utf8.h>

namespace executorch {
namespace extension {
namespace llm {
namespace {

// GPT-2's map of bytes to printable characters (its tokens are strings of these), and back.
struct ByteMap {
  std::array<std::string, 256> to_char;
  std::unordered_map<uint32_t, unsigned char> to_byte;
  ByteMap() {
    uint32_t extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const uint32_t cp = printable ? b : extra++;
      append_utf8(cp, to_char[b]);
      to_byte[cp] = static_cast<unsigned char>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

bool is_space(uint32_t c) {
  return c == ' ' || (c >= 9 && c <= 13) || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
bool is_number(uint32_t c) {
  return (c >= '0' && c <= '9') || c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0xBC && c <= 0xBE) ||
         (c >= 0x660 && c <= 0x669) || (c >= 0x6F0 && c <= 0x6F9) || (c >= 0x966 && c <= 0x96F) ||
         (c >= 0x2070 && c <= 0x2089) || (c >= 0x2150 && c <= 0x2189) || (c >= 0x2460 && c <= 0x249B) ||
         (c >= 0xFF10 && c <= 0xFF19);
}
// Letters: ASCII's, and outside ASCII whatever is not a space, a number, a combining mark or in the
// common punctuation and symbol blocks.
bool is_letter(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (is_space(c) || is_number(c)) return false;
  if (c < 0xC0) return c == 0xAA || c == 0xB5 || c == 0xBA;
  if (c == 0xD7 || c == 0xF7 || (c >= 0x300 && c <= 0x36F)) return false;
  const uint32_t other[][2] = {{0x2000, 0x2BFF}, {0x2E00, 0x2E7F}, {0x3000, 0x303F},
                               {0xFE30, 0xFE4F}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF20},
                               {0xFF3B, 0xFF40}, {0xFF5B, 0xFF65}, {0x1F000, 0x1FAFF}};
  for (const auto& r : other) {
    if (c >= r[0] && c <= r[1]) return false;
  }
  return true;
}

bool is_other(uint32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); }
bool is_newline(uint32_t c) { return c == '\r' || c == '\n'; }

// The code points of a text and their byte offsets (the end's last), for the split patterns.
struct Chars {
  std::vector<uint32_t> cp;
  std::vector<size_t> at;
  explicit Chars(const std::string& s) {
    for (size_t i = 0, n = 0; i < s.size(); i += n) at.push_back(i), cp.push_back(next_char(s, i, &n));
    at.push_back(s.size());
  }
  size_t size() const { return cp.size(); }
  // The end of the run of `in` characters from i.
  size_t run(size_t i, bool (*in)(uint32_t)) const {
    while (i < cp.size() && in(cp[i])) ++i;
    return i;
  }
  // Where \s+(?!\S)|\s+ ends from i: all the whitespace at the end of the text, else all but the
  // last character before a non-space (all of a single one).
  size_t spaces_end(size_t i) const {
    const size_t stop = run(i, is_space);
    return stop == cp.size() || stop - i == 1 ? stop : stop - 1;
  }
};

// GPT-2's pre-tokenizer pattern, 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
// as the regex engine matches it (the first alternative that matches, each as long as it can).
std::vector<std::string> gpt2_split(const std::string& s) {
  const Chars c(s);
  std::vector<std::string> pieces;
  for (size_t i = 0; i < c.size();) {
    size_t end = i;
    if (c.cp[i] == '\'' && i + 1 < c.size()) {
      const uint32_t a = c.cp[i + 1], b = i + 2 < c.size() ? c.cp[i + 2] : 0;
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        end = i + 3;
      } else if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        end = i + 2;
      }
    }
    const size_t from = c.cp[i] == ' ' ? i + 1 : i;  // the optional leading space
    for (bool (*cls)(uint32_t) : {is_letter, is_number, is_other}) {
      if (end == i && from < c.size() && cls(c.cp[from])) end = c.run(from, cls);
    }
    if (end == i) end = c.spaces_end(i);
    pieces.push_back(s.substr(c.at[i], c.at[end] - c.at[i]));
    i = end;
  }
  return pieces;
}

// `bytes` as UTF-8 with each invalid stretch (the longest start of a character, or one byte) as
// U+FFFD, as Rust's from_utf8_lossy (the tokenizers library's byte-level decoding) writes it.
std::string lossy_utf8(const std::string& bytes) {
  std::string out;
  for (size_t i = 0, prefix = 0; i < bytes.size();) {
    if (const size_t n = valid_char(bytes, i, &prefix)) {
      out.append(bytes, i, n), i += n;
    } else {
      out += "\xEF\xBF\xBD", i += prefix;
    }
  }
  return out;
}

bool valid_utf8(const std::string& bytes) {
  size_t prefix = 0;
  for (size_t i = 0, n = 0; i < bytes.size(); i += n) {
    if ((n = valid_char(bytes, i, &prefix)) == 0) return false;
  }
  return true;
}

// The split pattern of Llama 3's and Qwen2's files (tiktoken's), as the regex engine matches it:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|
// \s+(?!\S)|\s+ with D = `digits` (3 for Llama 3; Qwen2's \p{N} is 1).
std::vector<std::string> tiktoken_split(const std::string& s, size_t digits) {
  const Chars c(s);
  auto lower = [](uint32_t v) { return v >= 'A' && v <= 'Z' ? v + 32 : v; };
  std::vector<std::string> pieces;
  for (size_t i = 0; i < c.size();) {
    const uint32_t here = c.cp[i];
    size_t end = i;
    if (here == '\'' && i + 1 < c.size()) {
      const uint32_t a = lower(c.cp[i + 1]), b = i + 2 < c.size() ? lower(c.cp[i + 2]) : 0;
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        end = i + 3;
      } else if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        end = i + 2;
      }
    }
    if (end == i) {  // one character that is no newline, letter or number, then letters
      const size_t from = !is_letter(here) && !is_newline(here) && !is_number(here) && i + 1 < c.size() ? i + 1 : i;
      if (is_letter(c.cp[from])) end = c.run(from, is_letter);
    }
    if (end == i && is_number(here)) end = std::min(c.run(i, is_number), i + digits);
    if (end == i) {
      const size_t from = here == ' ' && i + 1 < c.size() ? i + 1 : i;
      if (is_other(c.cp[from])) end = c.run(c.run(from, is_other), is_newline);
    }
    if (end == i) {  // whitespace: up to its last newline, else as GPT-2's pattern
      for (size_t k = i; k < c.run(i, is_space); ++k) {
        if (is_newline(c.cp[k])) end = k + 1;
      }
      if (end == i) end = c.spaces_end(i);
    }
    pieces.push_back(s.substr(c.at[i], c.at[end] - c.at[i]));
    i = end;
  }
  return pieces;
}

// The split patterns a Split pre-tokenizer may name, and the digits each groups.
const std::pair<const char*, size_t> kSplitPatterns[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     3},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     1},
};

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

const std::string* text_of(const Json* j) { return j != nullptr && j->is(Json::Kind::String) ? &j->string : nullptr; }

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path, std::string& error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return error = "cannot read " + path, nullptr;
  std::ostringstream text;
  text << file.rdbuf();
  Json root;
  if (!parse_json(text.str(), root, error)) return error = path + ": not JSON: " + error, nullptr;
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  if (!t->read(root, error)) return error = path + ": " + error, nullptr;
  return t;
}

bool Tokenizer::read_steps(const Json* node, const char* what, std::vector<Step>& out, std::string& error) const {
  if (node == nullptr || node->is(Json::Kind::Null)) return true;
  const std::string* type = text_of(node->get("type"));
  if (type == nullptr) return error = std::string(what) + " without a type", false;
  if (*type == "Sequence") {
    const Json* list = node->get(std::string(what) == "normalizer" ? "normalizers"
                                 : std::string(what) == "decoder"  ? "decoders"
                                                                   : "pretokenizers");
    if (list == nullptr || !list->is(Json::Kind::Array))
      return error = std::string(what) + ": Sequence without a list", false;
    for (const Json& item : list->items) {
      if (!read_steps(&item, what, out, error)) return false;
    }
    return true;
  }
  Step step{};
  const Json* flag = nullptr;
  if (*type == "Prepend" && text_of(node->get("prepend"))) {
    step.kind = Step::Kind::Prepend, step.a = *text_of(node->get("prepend"));
  } else if (*type == "Replace" && node->get("pattern") && text_of(node->get("pattern")->get("String")) &&
             text_of(node->get("content"))) {
    step.kind = Step::Kind::Replace, step.a = *text_of(node->get("pattern")->get("String"));
    step.b = *text_of(node->get("content"));
  } else if (*type == "ByteLevel") {
    step.kind = Step::Kind::ByteLevel;
    if ((flag = node->get("add_prefix_space")) && flag->is(Json::Kind::Bool)) step.flag = flag->boolean;
    if ((flag = node->get("use_regex")) && flag->is(Json::Kind::Bool)) step.use_regex = flag->boolean;
  } else if (*type == "Metaspace" && text_of(node->get("replacement"))) {
    step.kind = Step::Kind::Metaspace, step.a = *text_of(node->get("replacement"));
    if (const std::string* scheme = text_of(node->get("prepend_scheme"))) {
      step.prepend = *scheme != "never", step.flag = *scheme == "first";
    } else if ((flag = node->get("add_prefix_space")) && flag->is(Json::Kind::Bool)) {
      step.prepend = flag->boolean;
    }
    if ((flag = node->get("split")) && flag->is(Json::Kind::Bool)) step.split = flag->boolean;
  } else if (*type == "Split") {
    const Json* pattern = node->get("pattern");
    const std::string* regex = pattern ? text_of(pattern->get("Regex")) : nullptr;
    const std::string* behavior = text_of(node->get("behavior"));
    const Json* invert = node->get("invert");
    step.kind = Step::Kind::Split;
    for (const auto& [known, digits] : kSplitPatterns) {
      if (regex != nullptr && *regex == known) step.start = static_cast<int64_t>(digits);
    }
    if (step.start == 0 || behavior == nullptr || *behavior != "Isolated" ||
        (invert != nullptr && invert->is(Json::Kind::Bool) && invert->boolean)) {
      return error = "pre_tokenizer Split is not supported with this pattern (Llama 3's and Qwen2's only)", false;
    }
  } else if (*type == "NFC") {
    step.kind = Step::Kind::Nfc;
  } else if (*type == "ByteFallback") {
    step.kind = Step::Kind::ByteFallback;
  } else if (*type == "Fuse") {
    step.kind = Step::Kind::Fuse;
  } else if (*type == "Strip" && text_of(node->get("content"))) {
    step.kind = Step::Kind::Strip, step.a = *text_of(node->get("content"));
    if ((flag = node->get("start")) && flag->is(Json::Kind::Number)) step.start = static_cast<int64_t>(flag->number);
    if ((flag = node->get("stop")) && flag->is(Json::Kind::Number)) step.stop = static_cast<int64_t>(flag->number);
  } else {
    return error = std::string(what) + " " + *type + " is not supported", false;
  }
  out.push_back(step);
  return true;
}

bool Tokenizer::read(const Json& root, std::string& error) {
  const Json* model = root.get("model");
  const std::string* type = model ? text_of(model->get("type")) : nullptr;
  if (model == nullptr || (type != nullptr && *type != "BPE")) {
    return error = "model " + (type ? *type : std::string("(none)")) + " is not supported (BPE only)", false;
  }
  const Json* vocab = model->get("vocab");
  const Json* merges = model->get("merges");
  if (vocab == nullptr || !vocab->is(Json::Kind::Object) || merges == nullptr || !merges->is(Json::Kind::Array)) {
    return error = "model: BPE without vocab or merges", false;
  }
  for (const char* unsupported : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* v = model->get(unsupported);
    if (v != nullptr && !v->is(Json::Kind::Null) && !(v->is(Json::Kind::String) && v->string.empty())) {
      return error = std::string("model: ") + unsupported + " is not supported", false;
    }
  }
  constexpr double kMaxId = 1 << 24;
  for (const auto& [token, id] : vocab->members) {
    if (!id.is(Json::Kind::Number) || id.number < 0 || id.number >= kMaxId ||
        id.number != static_cast<int64_t>(id.number)) {
      return error = "model: the id of \"" + token + "\" is not an id", false;
    }
    const auto i = static_cast<int64_t>(id.number);
    vocab_[token] = i;
    if (static_cast<size_t>(i) >= tokens_.size()) tokens_.resize(static_cast<size_t>(i) + 1);
    tokens_[static_cast<size_t>(i)] = token;
  }
  for (size_t rank = 0; rank < merges->items.size(); ++rank) {
    const Json& m = merges->items[rank];
    std::string a, b;
    if (m.is(Json::Kind::String) && m.string.find(' ') != std::string::npos) {
      a = m.string.substr(0, m.string.find(' ')), b = m.string.substr(m.string.find(' ') + 1);
    } else if (m.is(Json::Kind::Array) && m.items.size() == 2 && text_of(&m.items[0]) && text_of(&m.items[1])) {
      a = m.items[0].string, b = m.items[1].string;
    } else {
      return error = "model: merge " + std::to_string(rank) + " is neither \"a b\" nor [a, b]", false;
    }
    ranks_.emplace(a + '\x01' + b, static_cast<int64_t>(rank));
  }
  const Json* flag = model->get("byte_fallback");
  byte_fallback_ = flag != nullptr && flag->is(Json::Kind::Bool) && flag->boolean;
  if (const std::string* unk = text_of(model->get("unk_token")); unk && vocab_.count(*unk)) unk_ = vocab_[*unk];
  if (const Json* added = root.get("added_tokens"); added != nullptr && added->is(Json::Kind::Array)) {
    for (const Json& a : added->items) {
      const Json* id = a.get("id");
      const std::string* content = text_of(a.get("content"));
      if (id == nullptr || !id->is(Json::Kind::Number) || content == nullptr || content->empty() || id->number < 0 ||
          id->number >= kMaxId) {
        return error = "added_tokens: an entry without id or content", false;
      }
      const auto i = static_cast<int64_t>(id->number);
      added_.push_back({*content, i});
      if (static_cast<size_t>(i) >= tokens_.size()) tokens_.resize(static_cast<size_t>(i) + 1);
      tokens_[static_cast<size_t>(i)] = *content;
    }
  }
  if (!read_steps(root.get("normalizer"), "normalizer", normalizer_, error) ||
      !read_steps(root.get("pre_tokenizer"), "pre_tokenizer", pre_tokenizer_, error) ||
      !read_steps(root.get("decoder"), "decoder", decoder_, error)) {
    return false;
  }
  for (const Step& s : normalizer_) {
    if (s.kind != Step::Kind::Prepend && s.kind != Step::Kind::Replace && s.kind != Step::Kind::Nfc) {
      return error = "normalizer: unsupported step", false;
    }
    nfc_ |= s.kind == Step::Kind::Nfc;
  }
  for (const Step& s : pre_tokenizer_) {
    if (s.kind != Step::Kind::ByteLevel && s.kind != Step::Kind::Metaspace && s.kind != Step::Kind::Split) {
      return error = "pre_tokenizer: unsupported step", false;
    }
    byte_level_ |= s.kind == Step::Kind::ByteLevel;
  }
  return true;
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string text, bool first) const {
  for (const Step& s : normalizer_) {
    if (s.kind == Step::Kind::Prepend && !text.empty()) text = s.a + text;
    if (s.kind == Step::Kind::Replace) replace_all(text, s.a, s.b);
  }
  std::vector<std::string> pieces{text};
  for (const Step& s : pre_tokenizer_) {
    std::vector<std::string> next;
    for (std::string piece : pieces) {
      if (s.kind == Step::Kind::Split) {
        for (std::string& p : tiktoken_split(piece, static_cast<size_t>(s.start))) next.push_back(std::move(p));
      } else if (s.kind == Step::Kind::Metaspace) {
        replace_all(piece, " ", s.a);
        if (s.prepend && (!s.flag || first) && piece.compare(0, s.a.size(), s.a) != 0) piece = s.a + piece;
        if (!s.split) {
          next.push_back(piece);
          continue;
        }
        size_t start = 0;
        for (size_t at = piece.find(s.a, 1); at != std::string::npos; at = piece.find(s.a, at + s.a.size())) {
          next.push_back(piece.substr(start, at - start));
          start = at;
        }
        next.push_back(piece.substr(start));
      } else {  // ByteLevel
        if (s.flag && piece.compare(0, 1, " ") != 0) piece = " " + piece;
        for (const std::string& word : s.use_regex ? gpt2_split(piece) : std::vector<std::string>{piece}) {
          std::string mapped;
          for (unsigned char c : word) mapped += byte_map().to_char[c];
          next.push_back(mapped);
        }
      }
    }
    pieces.swap(next);
  }
  return pieces;
}

bool Tokenizer::bpe(const std::string& word, std::vector<int64_t>& ids, std::string& error) const {
  if (word.empty()) return true;
  std::vector<std::string> symbols;
  for (size_t i = 0, n = 0; i < word.size(); i += n) {
    next_char(word, i, &n);
    symbols.push_back(word.substr(i, n));
  }
  // The adjacent pair of lowest rank merges first (the leftmost of equal ones), until none has one.
  while (symbols.size() > 1) {
    int64_t best = std::numeric_limits<int64_t>::max();
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = ranks_.find(symbols[i] + '\x01' + symbols[i + 1]);
      if (it != ranks_.end() && it->second < best) best = it->second, at = i;
    }
    if (best == std::numeric_limits<int64_t>::max()) break;
    symbols[at] += symbols[at + 1];
    symbols.erase(symbols.begin() + static_cast<long>(at) + 1);
  }
  for (const std::string& s : symbols) {
    if (const auto it = vocab_.find(s); it != vocab_.end()) {
      ids.push_back(it->second);
    } else if (byte_fallback_) {
      for (unsigned char c : s) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", c);
        const auto b = vocab_.find(name);
        if (b == vocab_.end()) return error = std::string("no token for byte ") + name, false;
        ids.push_back(b->second);
      }
    } else if (unk_ >= 0) {
      ids.push_back(unk_);
    } else {
      return error = "no token for \"" + s + "\" (no byte fallback, no unk_token)", false;
    }
  }
  return true;
}

bool Tokenizer::encode(const std::string& text, std::vector<int64_t>& ids, std::string& error) const {
  ids.clear();
  // NFC leaves ASCII as it is; composing other text is not implemented, so it is refused.
  for (unsigned char c : text) {
    if (nfc_ && c >= 0x80) return error = "normalizer NFC: text outside ASCII is not supported", false;
  }
  size_t start = 0;
  auto flush = [&](size_t end) {  // "first" is the piece at the start of the text (Metaspace's scheme)
    for (const std::string& word :
         end > start ? pre_tokenize(text.substr(start, end - start), start == 0) : std::vector<std::string>{}) {
      if (!bpe(word, ids, error)) return false;
    }
    return true;
  };
  for (size_t i = 0; i < text.size();) {
    const Added* match = nullptr;
    for (const Added& a : added_) {
      if ((!match || a.content.size() > match->content.size()) && text.compare(i, a.content.size(), a.content) == 0) {
        match = &a;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    if (!flush(i)) return false;
    ids.push_back(match->id);
    i += match->content.size();
    start = i;
  }
  return flush(text.size());
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  for (int64_t id : ids) {
    if (id >= 0 && static_cast<size_t>(id) < tokens_.size()) tokens.push_back(tokens_[static_cast<size_t>(id)]);
  }
  for (const Step& s : decoder_) {
    switch (s.kind) {
      case Step::Kind::ByteLevel: {
        std::string joined, bytes;
        for (const std::string& t : tokens) joined += t;
        for (size_t i = 0, n = 0; i < joined.size(); i += n) {
          const auto it = byte_map().to_byte.find(next_char(joined, i, &n));
          bytes += it != byte_map().to_byte.end() ? std::string(1, static_cast<char>(it->second)) : joined.substr(i, n);
        }
        tokens = {lossy_utf8(bytes)};
        break;
      }
      case Step::Kind::Metaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          replace_all(tokens[i], s.a, " ");
          if (i == 0 && s.prepend && tokens[i].compare(0, 1, " ") == 0) tokens[i].erase(0, 1);
        }
        break;
      case Step::Kind::Replace:
        for (std::string& t : tokens) replace_all(t, s.a, s.b);
        break;
      case Step::Kind::ByteFallback: {
        // Runs of "<0xAB>" tokens are their bytes where those are UTF-8, else one U+FFFD per byte
        // (no sscanf: newer glibc headers redirect it past GLIBC_2.34).
        auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
        auto byte_of = [&](const std::string& t) {
          return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(t[3]) >= 0 && hex(t[4]) >= 0
                     ? hex(t[3]) * 16 + hex(t[4])
                     : -1;
        };
        std::vector<std::string> out;
        std::string run;
        size_t run_length = 0;
        auto flush = [&] {
          if (run_length == 0) return;
          if (valid_utf8(run)) {
            out.push_back(run);
          } else {
            for (size_t k = 0; k < run_length; ++k) out.push_back("\xEF\xBF\xBD");
          }
          run.clear(), run_length = 0;
        };
        for (const std::string& t : tokens) {
          if (const int value = byte_of(t); value >= 0) {
            run += static_cast<char>(value), ++run_length;
          } else {
            flush();
            out.push_back(t);
          }
        }
        flush();
        tokens.swap(out);
        break;
      }
      case Step::Kind::Fuse: {
        std::string joined;
        for (const std::string& t : tokens) joined += t;
        tokens = {joined};
        break;
      }
      case Step::Kind::Strip:
        for (std::string& t : tokens) {
          for (int64_t k = 0; k < s.start && t.compare(0, s.a.size(), s.a) == 0; ++k) t.erase(0, s.a.size());
          for (int64_t k = 0;
               k < s.stop && t.size() >= s.a.size() && t.compare(t.size() - s.a.size(), s.a.size(), s.a) == 0; ++k) {
            t.erase(t.size() - s.a.size());
          }
        }
        break;
      default: break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace llm
}  // namespace extension
}  // namespace executorch
