#pragma once

// Reads the corpus file tests/hostile/make_corpus.py writes (format in malformed.py).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace executorch {
namespace testing {

struct CorpusCase {
  std::string name;
  bool invalid;  // loading or running must fail; otherwise it only must not crash
  std::vector<uint8_t> data;
};

inline bool read_corpus(const char* path, std::vector<CorpusCase>* out) {
  std::FILE* f = std::fopen(path, "rb");
  if (!f) return false;
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  for (size_t n; (n = std::fread(chunk, 1, sizeof(chunk), f)) > 0;) bytes.insert(bytes.end(), chunk, chunk + n);
  std::fclose(f);
  size_t at = 0;
  auto take = [&](void* dst, size_t n) {
    if (n > bytes.size() - at) return false;
    std::memcpy(dst, bytes.data() + at, n);
    at += n;
    return true;
  };
  char magic[4];
  uint32_t count = 0;
  if (!take(magic, 4) || std::memcmp(magic, "XTHC", 4) != 0 || !take(&count, 4)) return false;
  for (uint32_t i = 0; i < count; ++i) {
    uint16_t name_len = 0;
    uint8_t invalid = 0;
    uint64_t size = 0;
    CorpusCase c;
    if (!take(&name_len, 2)) return false;
    c.name.resize(name_len);
    if (!take(&c.name[0], name_len) || !take(&invalid, 1) || !take(&size, 8) || size > bytes.size() - at) return false;
    c.invalid = invalid != 0;
    c.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                  bytes.begin() + static_cast<std::ptrdiff_t>(at + size));
    at += size;
    out->push_back(std::move(c));
  }
  return at == bytes.size();
}

}  // namespace testing
}  // namespace executorch
