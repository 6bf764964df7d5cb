#pragma once
// UTF-8 helpers for the tokenizer. Text handed to encode() may be any bytes: a "character" is a
// valid UTF-8 sequence (Unicode Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF)
// or, failing that, one single byte. Character classes follow Rust's char methods, which HF
// `tokenizers` uses (e.g. for Digits, Strip, lstrip/rstrip of added tokens).
#include <cstddef>
#include <string>
#include <string_view>

namespace kvinfer::utf8 {

// The length of the valid sequence starting at s[i], or 0 when none starts there.
size_t sequence_length(std::string_view s, size_t i);

// The length of the character at s[i]: a valid sequence, or 1 for a byte that starts none.
inline size_t char_length(std::string_view s, size_t i) {
  size_t n = sequence_length(s, i);
  return n ? n : 1;
}

// The code point of the valid `n`-byte sequence at s[i].
char32_t decode(std::string_view s, size_t i, size_t n);

void append(std::string& out, char32_t cp);

bool is_valid(std::string_view s);

// Appends `s` to `out` with every maximal invalid subpart (Unicode §3.9, "U+FFFD substitution
// of maximal subparts", as Rust's String::from_utf8_lossy) replaced by U+FFFD. When `final` is
// false, an incomplete but so-far-valid sequence at the very end is left unconsumed (more bytes
// may complete it). Returns the number of bytes of `s` consumed.
size_t append_lossy(std::string& out, std::string_view s, bool final = true);
std::string lossy(std::string_view s);

// Unicode White_Space (Rust char::is_whitespace, regex \s).
bool is_whitespace(char32_t c);
// General category N* (Rust char::is_numeric, regex \p{N}).
bool is_numeric(char32_t c);
// Regex \w: letters, marks, decimal and letter numbers, connector punctuation, ZWNJ/ZWJ.
bool is_word(char32_t c);

}  // namespace kvinfer::utf8
