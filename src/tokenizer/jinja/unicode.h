#pragma once
// UTF-8 and the few Unicode properties Python's str methods use (whitespace, case, printability).
// Strings stay UTF-8 everywhere; code points are decoded only where Python counts them (len,
// indexing, slicing, case mapping). Invalid UTF-8 bytes decode as U+FFFD.
#include <cstddef>
#include <string>
#include <string_view>

namespace kvinfer::jinja {

std::u32string utf8_decode(std::string_view s);
void utf8_append(std::string& out, char32_t cp);
std::string utf8_encode(std::u32string_view s);
size_t utf8_length(std::string_view s);  // in code points

// Python's str.isspace(): the whitespace that strip(), split() and the regex \s use.
bool is_space(char32_t c);
// The code point that starts at s[pos] is whitespace; its byte length goes to *len.
bool space_at(std::string_view s, size_t pos, size_t* len);
// The byte length of the whitespace that ends s (for rstrip without decoding everything).
size_t trailing_space_bytes(std::string_view s);
size_t leading_space_bytes(std::string_view s);

// Simple (one-to-one) case mappings for Latin, Greek, Cyrillic and Armenian; other scripts are
// returned unchanged (see docs/chat-templates.md).
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_cased(char32_t c);  // has an upper or lower form
bool is_upper(char32_t c);
bool is_lower(char32_t c);
bool is_alpha(char32_t c);
bool is_digit(char32_t c);
// Whether Python's repr() prints the code point as is (else as \xNN / \uNNNN / \UNNNNNNNN).
bool is_printable(char32_t c);

}  // namespace kvinfer::jinja
