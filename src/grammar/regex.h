#pragma once
// JSON Schema's "pattern" (an ECMA-262 regular expression, matched anywhere in the string) as a
// grammar expression over the string's contents. The subset is in docs/structured-output.md.
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvinfer::grammar {

using CodeSet = std::vector<std::pair<char32_t, char32_t>>;  // sorted, disjoint ranges

// `chars(set)` writes the grammar expression for one character of the set as it appears inside a
// JSON string (escaped where JSON needs it); `any` is the expression for any one character. The
// result matches exactly the contents of the strings that contain a match of `pattern` (or that
// match it whole, where it is anchored with ^ and $). Throws Error (Unsupported) naming a
// construct outside the subset (lookaround, backreferences, \b, \p{...}, flags) and
// (InvalidArgument) for a malformed pattern.
std::string pattern_to_gbnf(std::string_view pattern, const std::function<std::string(const CodeSet&)>& chars,
                            const std::string& any);

CodeSet normalize_set(CodeSet set);      // sorted and merged, surrogates removed
CodeSet complement_set(const CodeSet& set);

}  // namespace kvinfer::grammar
