#include "tokenizer/utf8.h"

#include <utf8proc.h>

namespace kvinfer::utf8 {

namespace {

struct Scan {
  size_t length;  // bytes examined: the sequence, its valid prefix, or the invalid subpart
  enum { Complete, Truncated, Invalid } status;
};

// Unicode Table 3-7: the range the second byte may take after each lead byte; every later
// byte is 80..BF.
Scan scan(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {1, Scan::Complete};
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {1, Scan::Invalid};
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return {k, Scan::Truncated};
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
    if (b < min || b > max) return {k, Scan::Invalid};
  }
  return {len, Scan::Complete};
}

constexpr char kReplacement[] = "\xEF\xBF\xBD";

}  // namespace

size_t sequence_length(std::string_view s, size_t i) {
  Scan r = scan(s, i);
  return r.status == Scan::Complete ? r.length : 0;
}

char32_t decode(std::string_view s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k])); };
  switch (n) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    Scan r = scan(s, i);
    if (r.status != Scan::Complete) return false;
    i += r.length;
  }
  return true;
}

size_t append_lossy(std::string& out, std::string_view s, bool final) {
  size_t i = 0, run = 0;  // [run, i) is valid text not yet copied
  while (i < s.size()) {
    Scan r = scan(s, i);
    if (r.status == Scan::Complete) {
      i += r.length;
      continue;
    }
    out.append(s.substr(run, i - run));
    if (r.status == Scan::Truncated && !final) return i;
    out.append(kReplacement);
    i += r.length;
    run = i;
  }
  out.append(s.substr(run));
  return s.size();
}

std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  append_lossy(out, s);
  return out;
}

bool is_whitespace(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return c == 0x85 || cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_word(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_ND) || cat == UTF8PROC_CATEGORY_NL ||
         cat == UTF8PROC_CATEGORY_PC;
}

}  // namespace kvinfer::utf8
