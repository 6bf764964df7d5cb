#include "tokenizer/normalizer.h"

#include <cstdlib>

#include <utf8proc.h>

#include "kvinfer/error.h"
#include "tokenizer/utf8.h"

namespace kvinfer {

namespace {

using Kind = NormalizerStep::Kind;

// Applies `f` to every maximal run of valid UTF-8 in `s`, copying invalid bytes unchanged.
template <typename F>
std::string map_valid_runs(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t run = 0, i = 0;
  while (i < s.size()) {
    const size_t n = utf8::sequence_length(s, i);
    if (n) {
      i += n;
      continue;
    }
    if (i > run) f(s.substr(run, i - run), out);
    out.push_back(s[i]);
    run = ++i;
  }
  if (i > run) f(s.substr(run, i - run), out);
  return out;
}

void unicode_form(std::string_view s, int options, std::string& out) {
  bool ascii = true;  // ASCII is stable under every normalization form
  for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    out.append(s);
    return;
  }
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &result,
                                          static_cast<utf8proc_option_t>(UTF8PROC_STABLE | options));
  if (n < 0) throw Error(ErrorKind::InvalidArgument, std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  std::free(result);
}

// Rust's char::to_lowercase, which HF applies per character: the simple mapping, except
// U+0130 (İ), the one character whose unconditional lowercase is two code points.
void lowercase(std::string_view s, std::string& out) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8::sequence_length(s, i);
    const char32_t c = utf8::decode(s, i, n);
    if (c == 0x130) {
      out += "i\xCC\x87";
    } else {
      utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
    i += n;
  }
}

std::string strip(std::string_view s, bool left, bool right) {
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      const size_t n = utf8::sequence_length(s, begin);
      if (!n || !utf8::is_whitespace(utf8::decode(s, begin, n))) break;
      begin += n;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;  // back up to the lead byte of the last character
      while (start > begin && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      const size_t n = utf8::sequence_length(s, start);
      if (n != end - start || !utf8::is_whitespace(utf8::decode(s, start, n))) break;
      end = start;
    }
  }
  return std::string(s.substr(begin, end - begin));
}

std::string replace(std::string_view s, const Pattern& pattern, const std::string& content) {
  std::vector<Span> matches;
  pattern.find_all(s, matches);
  if (matches.empty()) return std::string(s);
  std::string out;
  size_t prev = 0;
  for (const Span& m : matches) {
    out.append(s.substr(prev, m.begin - prev));
    out += content;
    prev = m.end;
  }
  out.append(s.substr(prev));
  return out;
}

}  // namespace

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case Kind::Nfc:
        s = map_valid_runs(s, [](std::string_view r, std::string& o) { unicode_form(r, UTF8PROC_COMPOSE, o); });
        break;
      case Kind::Nfd:
        s = map_valid_runs(s, [](std::string_view r, std::string& o) { unicode_form(r, UTF8PROC_DECOMPOSE, o); });
        break;
      case Kind::Nfkc:
        s = map_valid_runs(
            s, [](std::string_view r, std::string& o) { unicode_form(r, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, o); });
        break;
      case Kind::Nfkd:
        s = map_valid_runs(
            s, [](std::string_view r, std::string& o) { unicode_form(r, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, o); });
        break;
      case Kind::Lowercase: s = map_valid_runs(s, lowercase); break;
      case Kind::Strip: s = strip(s, step.strip_left, step.strip_right); break;
      case Kind::Prepend:
        if (!s.empty()) s.insert(0, step.text);  // HF prepends only to non-empty text
        break;
      case Kind::Replace: s = replace(s, *step.pattern, step.text); break;
    }
  }
  return s;
}

}  // namespace kvinfer
