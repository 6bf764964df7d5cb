#pragma once
// A grammar as written (docs/structured-output.md, "Grammar format"): named rules whose bodies are
// regular expressions over characters and references to rules. gbnf.cpp parses the text into it;
// automaton.cpp compiles it.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvinfer::grammar {

// Nodes of a rule's body.
struct Expr {
  enum class Kind : uint8_t {
    Literal,  // `bytes`, in order (a quoted string, already UTF-8)
    Chars,    // one code point from `ranges` (a class, `.`)
    Rule,     // a reference to rule `rule`
    Seq,      // `items` one after another (none: the empty string)
    Alt,      // one of `items`
    Repeat,   // items[0] between min and max times (max kUnbounded: no limit)
  };
  static constexpr uint32_t kUnbounded = UINT32_MAX;

  Kind kind = Kind::Seq;
  std::string bytes;
  std::vector<std::pair<char32_t, char32_t>> ranges;  // sorted, disjoint, not adjacent
  uint32_t rule = 0;
  std::vector<Expr> items;
  uint32_t min = 0, max = 0;
};

struct Rule {
  std::string name;
  Expr body;
  int line = 0;  // where it is defined, for messages
};

struct Ast {
  std::vector<Rule> rules;
  uint32_t root = 0;
};

}  // namespace kvinfer::grammar
