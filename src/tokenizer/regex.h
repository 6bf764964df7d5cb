#pragma once
// Patterns for pre-tokenizers, normalizers and decoders: a literal string or a regex run by
// PCRE2 (UTF + UCP, JIT-compiled once). Matching is const and thread-safe: match data is made
// per call. Input may be invalid UTF-8 (PCRE2_MATCH_INVALID_UTF): an invalid byte matches no
// pattern item, so it is never inside a match.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace kvinfer {

struct Span {
  size_t begin = 0, end = 0;
};

class Pattern {
 public:
  // `where` names the file and component for error messages.
  static Pattern literal(std::string text);
  static Pattern regex(std::string_view pattern, std::string_view where);

  // Non-overlapping matches, left to right (byte offsets). Empty matches are skipped.
  void find_all(std::string_view text, std::vector<Span>& out) const;
  const std::string& source() const { return source_; }

 private:
  struct CodeDeleter {
    void operator()(pcre2_real_code_8* code) const;
  };
  std::string source_;
  std::shared_ptr<pcre2_real_code_8> code_;  // null for a literal; shared so steps can be copied
};

// Regex syntax differs between engines in one place that matters here: HF's Oniguruma and
// Rust's regex take \s as Unicode White_Space, PCRE2's UCP \s also matches U+180E. Returns the
// pattern with \s and \S spelt out as White_Space classes.
std::string translate_whitespace_classes(std::string_view pattern);

}  // namespace kvinfer
