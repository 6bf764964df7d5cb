#include "tokenizer/jinja/strings.h"

#include <algorithm>

#include "tokenizer/jinja/unicode.h"
#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {
namespace {

// Full case mappings that change length (German sharp s), on top of unicode.cpp's simple ones.
void append_upper(std::string& out, char32_t c) {
  if (c == 0xDF) {
    out += "SS";
    return;
  }
  utf8_append(out, to_upper(c));
}

// The title case of a code point: the capital, except for the digraphs with their own title form.
void append_title(std::string& out, char32_t c) {
  switch (c) {
    case 0x01C4: case 0x01C5: case 0x01C6: utf8_append(out, 0x01C5); return;
    case 0x01C7: case 0x01C8: case 0x01C9: utf8_append(out, 0x01C8); return;
    case 0x01CA: case 0x01CB: case 0x01CC: utf8_append(out, 0x01CB); return;
    case 0x01F1: case 0x01F2: case 0x01F3: utf8_append(out, 0x01F2); return;
    case 0xDF: out += "Ss"; return;
    default: append_upper(out, c);
  }
}

size_t byte_to_index(std::string_view s, size_t byte) { return utf8_length(s.substr(0, byte)); }

}  // namespace

std::string str_upper(std::string_view s) {
  std::string out;
  for (char32_t c : utf8_decode(s)) append_upper(out, c);
  return out;
}

std::string str_lower(std::string_view s) {
  std::string out;
  for (char32_t c : utf8_decode(s)) utf8_append(out, to_lower(c));
  return out;
}

std::string str_title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (char32_t c : utf8_decode(s)) {
    if (previous_cased) {
      utf8_append(out, to_lower(c));
    } else {
      append_title(out, c);
    }
    previous_cased = is_cased(c);
  }
  return out;
}

std::string str_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t c : utf8_decode(s)) {
    if (first) {
      append_title(out, c);
    } else {
      utf8_append(out, to_lower(c));
    }
    first = false;
  }
  return out;
}

std::string str_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  if (!chars) {
    if (left) s.remove_prefix(leading_space_bytes(s));
    if (right) s.remove_suffix(trailing_space_bytes(s));
    return std::string(s);
  }
  const std::u32string set = utf8_decode(*chars);
  const std::u32string cps = utf8_decode(s);
  auto strip = [&](char32_t c) { return set.find(c) != std::u32string::npos; };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip(cps[e - 1])) --e;
  }
  return utf8_encode(std::u32string_view(cps).substr(b, e - b));
}

std::vector<std::string> str_split(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep && sep->empty()) throw EvalError("empty separator");
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (!from_right) {
      size_t start = 0;
      for (int64_t n = 0; n < maxsplit; ++n) {
        const size_t pos = s.find(*sep, start);
        if (pos == std::string_view::npos) break;
        parts.emplace_back(s.substr(start, pos - start));
        start = pos + sep->size();
      }
      parts.emplace_back(s.substr(start));
    } else {
      size_t end = s.size();
      for (int64_t n = 0; n < maxsplit && end >= sep->size(); ++n) {
        const size_t pos = s.rfind(*sep, end - sep->size());
        if (pos == std::string_view::npos) break;
        parts.emplace_back(s.substr(pos + sep->size(), end - pos - sep->size()));
        end = pos;
      }
      parts.emplace_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
    return parts;
  }
  // Whitespace splitting, on code points.
  const std::u32string cps = utf8_decode(s);
  std::vector<std::pair<size_t, size_t>> words;
  for (size_t i = 0; i < cps.size();) {
    while (i < cps.size() && is_space(cps[i])) ++i;
    if (i == cps.size()) break;
    size_t j = i;
    while (j < cps.size() && !is_space(cps[j])) ++j;
    words.emplace_back(i, j);
    i = j;
  }
  const std::u32string_view view(cps);
  if (static_cast<int64_t>(words.size()) - 1 > maxsplit) {
    // Past maxsplit the rest is one part, keeping its whitespace on the far side (as CPython).
    const size_t keep = static_cast<size_t>(maxsplit);
    if (!from_right) {
      for (size_t w = 0; w < keep; ++w) parts.push_back(utf8_encode(view.substr(words[w].first, words[w].second - words[w].first)));
      parts.push_back(utf8_encode(view.substr(words[keep].first)));
    } else {
      const size_t first_kept = words.size() - keep;
      parts.push_back(utf8_encode(view.substr(0, words[first_kept - 1].second)));
      for (size_t w = first_kept; w < words.size(); ++w) parts.push_back(utf8_encode(view.substr(words[w].first, words[w].second - words[w].first)));
    }
    return parts;
  }
  for (const auto& [b, e] : words) parts.push_back(utf8_encode(view.substr(b, e - b)));
  return parts;
}

std::vector<std::string> str_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  const std::u32string cps = utf8_decode(s);
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
  };
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!is_break(cps[i])) continue;
    size_t end = i + 1;
    if (cps[i] == '\r' && end < cps.size() && cps[end] == '\n') ++end;
    lines.push_back(utf8_encode(std::u32string_view(cps).substr(start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < cps.size()) lines.push_back(utf8_encode(std::u32string_view(cps).substr(start)));
  return lines;
}

std::string str_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    const std::u32string cps = utf8_decode(s);
    int64_t n = 0;
    for (char32_t c : cps) {
      if (n++ < count) out += repl;
      utf8_append(out, c);
      check_string_size(out.size());
    }
    if (n < count) out += repl;
    return out;
  }
  size_t start = 0;
  for (int64_t n = 0; n < count; ++n) {
    const size_t pos = s.find(old, start);
    if (pos == std::string_view::npos) break;
    out.append(s.substr(start, pos - start));
    out.append(repl);
    check_string_size(out.size());
    start = pos + old.size();
  }
  out.append(s.substr(start));
  return out;
}

int64_t str_find(std::string_view s, std::string_view sub, bool last) {
  const size_t pos = last ? s.rfind(sub) : s.find(sub);
  return pos == std::string_view::npos ? -1 : static_cast<int64_t>(byte_to_index(s, pos));
}

int64_t str_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

}  // namespace kvinfer::jinja
