#pragma once

// UTF-8 for the JSON reader and the tokenizer: encoding a code point, and reading one (strictly, or
// byte by byte where the text is not UTF-8).
#include <cstddef>
#include <cstdint>
#include <string>

namespace executorch {
namespace extension {
namespace llm {

// Appends code point `cp` (at most U+10FFFF) to `out`.
inline void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The length of the valid UTF-8 character at s[i], or 0 with *prefix the bytes of the longest
// start of one there (at least 1).
inline size_t valid_char(const std::string& s, size_t i, size_t* prefix) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  size_t k = 1;
  while (n > 0 && k < n && i + k < s.size() && b(k) >= (k == 1 ? lo : 0x80) && b(k) <= (k == 1 ? hi : 0xBF)) ++k;
  if (n > 0 && k == n) return n;
  *prefix = k;
  return 0;
}

// The code point starting at s[i] and its length in bytes; a byte that starts no valid character
// reads as itself.
inline uint32_t next_char(const std::string& s, size_t i, size_t* length) {
  size_t prefix = 0;
  const size_t n = valid_char(s, i, &prefix);
  const auto c = static_cast<unsigned char>(s[i]);
  if (n <= 1) return *length = 1, c;
  *length = n;
  uint32_t cp = c & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

}  // namespace llm
}  // namespace extension
}  // namespace executorch
