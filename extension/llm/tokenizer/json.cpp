#include <executorch/extension/llm/tokenizer/json.h>

#include <executorch/extension/llm/tokenizer/utf8.h>

#include <cstdint>
#include <cstdio>

namespace executorch {
namespace extension {
namespace llm {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  bool document(Json& out, std::string& error) {
    if (!value(out, 0) || (space(), pos_ != s_.size() && fail("text after the document"))) {
      char where[64];
      std::snprintf(where, sizeof(where), " (at byte %zu)", pos_);
      error = error_ + where;
      return false;
    }
    return true;
  }

 private:
  bool fail(const char* what) {
    if (error_.empty()) error_ = what;
    return false;
  }
  void space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(const char* word) {
    size_t n = 0;
    while (word[n] != '\0') ++n;
    if (s_.compare(pos_, n, word) != 0) return fail("unknown literal");
    pos_ += n;
    return true;
  }
  bool hex4(uint32_t& out) {
    if (pos_ + 4 > s_.size()) return fail("short \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      out <<= 4;
      if (c >= '0' && c <= '9') {
        out |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        out |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        out |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return fail("bad \\u escape");
      }
    }
    return true;
  }
  bool string(std::string& out) {
    ++pos_;  // the opening quote
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate: its low half follows
            uint32_t low = 0;
            if (s_.compare(pos_, 2, "\\u") != 0) return fail("unpaired surrogate");
            pos_ += 2;
            if (!hex4(low) || low < 0xDC00 || low >= 0xE000) return fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return fail("unpaired surrogate");
          }
          append_utf8(cp, out);
          break;
        }
        default: return fail("bad escape");
      }
    }
    return fail("unterminated string");
  }
  bool number(double& out) {
    const size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > from;
    };
    if (!digits()) return fail("bad number");
    if (pos_ < s_.size() && s_[pos_] == '.' && (++pos_, !digits())) return fail("bad number");
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) return fail("bad number");
    }
    // Integers (ids, ranks) are exact; fractions are read digit by digit, enough for a tokenizer.
    double value = 0, scale = 0;
    int exponent = 0;
    bool negative_exponent = false;
    size_t i = start + (s_[start] == '-');
    for (; i < pos_ && s_[i] >= '0' && s_[i] <= '9'; ++i) value = value * 10 + (s_[i] - '0');
    if (i < pos_ && s_[i] == '.') {
      scale = 1;
      for (++i; i < pos_ && s_[i] >= '0' && s_[i] <= '9'; ++i) value += (s_[i] - '0') * (scale /= 10);
    }
    if (i < pos_) {  // the exponent
      ++i;
      if (s_[i] == '+' || s_[i] == '-') negative_exponent = s_[i++] == '-';
      for (; i < pos_ && exponent < 400; ++i) exponent = exponent * 10 + (s_[i] - '0');
    }
    for (int e = 0; e < exponent; ++e) value = negative_exponent ? value / 10 : value * 10;
    out = s_[start] == '-' ? -value : value;
    return true;
  }
  bool value(Json& out, int depth) {
    if (depth > kMaxDepth) return fail("nested too deeply");
    space();
    if (pos_ >= s_.size()) return fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') {
      out.kind = Json::Kind::Object;
      ++pos_;
      space();
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      while (true) {
        space();
        if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a member name");
        std::string key;
        if (!string(key)) return false;
        space();
        if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':'");
        ++pos_;
        out.members.emplace_back(std::move(key), Json());
        if (!value(out.members.back().second, depth + 1)) return false;
        space();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      out.kind = Json::Kind::Array;
      ++pos_;
      space();
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      while (true) {
        out.items.emplace_back();
        if (!value(out.items.back(), depth + 1)) return false;
        space();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') return out.kind = Json::Kind::String, string(out.string);
    if (c == 't') return out.kind = Json::Kind::Bool, out.boolean = true, literal("true");
    if (c == 'f') return out.kind = Json::Kind::Bool, literal("false");
    if (c == 'n') return literal("null");
    if (c == '-' || (c >= '0' && c <= '9')) return out.kind = Json::Kind::Number, number(out.number);
    return fail("unexpected character");
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

const Json* Json::get(const std::string& key) const {
  for (const auto& [name, value] : members) {
    if (name == key) return &value;
  }
  return nullptr;
}

bool parse_json(const std::string& text, Json& out, std::string& error) {
  out = Json();
  return Parser(text).document(out, error);
}

}  // namespace llm
}  // namespace extension
}  // namespace executorch
