#pragma once
// Python str methods on UTF-8 strings (code-point semantics), shared by the string methods
// ('x'.strip()) and the filters (x|trim).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvinfer::jinja {

std::string str_upper(std::string_view s);
std::string str_lower(std::string_view s);
std::string str_title(std::string_view s);       // str.title()
std::string str_capitalize(std::string_view s);  // str.capitalize()
// strip/lstrip/rstrip; chars nullopt strips whitespace.
std::string str_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// split/rsplit; sep nullopt splits on whitespace runs and drops empty parts.
std::vector<std::string> str_split(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit, bool from_right);
std::vector<std::string> str_splitlines(std::string_view s, bool keepends);
std::string str_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
// Code-point index of the first/last occurrence, or -1.
int64_t str_find(std::string_view s, std::string_view sub, bool last);
int64_t str_count(std::string_view s, std::string_view sub);

}  // namespace kvinfer::jinja
