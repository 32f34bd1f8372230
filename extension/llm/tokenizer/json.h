#pragma once

// A JSON reader for tokenizer.json: the whole document as a tree of values. Numbers are doubles;
// strings are UTF-8 (\u escapes, surrogate pairs included, decoded). Nesting deeper than 64 levels
// is refused, so a hostile file cannot exhaust the stack.
#include <string>
#include <utility>
#include <vector>

namespace executorch {
namespace extension {
namespace llm {

struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> items;                            // Array
  std::vector<std::pair<std::string, Json>> members;  // Object, in document order

  // The member `key` of an object (nullptr where absent, or where this is no object).
  const Json* get(const std::string& key) const;
  bool is(Kind k) const { return kind == k; }
};

// Parses `text` into `out`; false with a message in `error` (and its byte offset) otherwise.
bool parse_json(const std::string& text, Json& out, std::string& error);

}  // namespace llm
}  // namespace extension
}  // namespace executorch
