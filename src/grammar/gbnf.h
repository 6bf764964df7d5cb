#pragma once
// The grammar text format (GBNF-style, docs/structured-output.md): parsing into an Ast, and the
// quoting helpers the JSON-schema compiler writes grammars with.
#include <string>
#include <string_view>

#include "grammar/ast.h"

namespace kvinfer::grammar {

// The largest grammar text accepted, and the deepest nesting of parentheses.
inline constexpr size_t kMaxGrammarBytes = 8u << 20;
inline constexpr int kMaxNesting = 200;
// The largest count a {m,n} repetition may name.
inline constexpr uint32_t kMaxRepeat = 10000;

// Parses `text`; throws Error (InvalidArgument) "grammar line L, column C: ..." on a syntax
// error, an undefined or twice-defined rule, a class that matches nothing, or a missing `root`.
Ast parse_gbnf(std::string_view text);

// `bytes` as a grammar string literal ("..." with \" \\ and control bytes escaped).
std::string quote(std::string_view bytes);

}  // namespace kvinfer::grammar
