#pragma once
// The value of a string literal in a template, decoded as jinja2 decodes it.
#include <string>
#include <string_view>

namespace kvinfer::jinja {

// Python's .encode("ascii", "backslashreplace").decode("unicode-escape") of the text between
// the quotes: \n \t \xNN \uNNNN \NNN ... are decoded, unknown escapes stay as written.
// Throws EvalError for malformed escapes.
std::string decode_string_literal(std::string_view raw);

}  // namespace kvinfer::jinja
