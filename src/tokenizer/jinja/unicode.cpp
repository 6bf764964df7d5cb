#include "tokenizer/jinja/unicode.h"

#include "tokenizer/utf8.h"

namespace kvinfer::jinja {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Decodes one code point at s[pos]; *len gets its byte length (1 for an invalid byte).
char32_t decode_at(std::string_view s, size_t pos, size_t* len) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  *len = 1;
  if (b0 < 0x80) return b0;
  int extra = 0;
  char32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    extra = 1;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    extra = 2;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    extra = 3;
    cp = b0 & 0x07;
  } else {
    return kReplacement;
  }
  if (pos + static_cast<size_t>(extra) >= s.size()) return kReplacement;
  for (int i = 1; i <= extra; ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) return kReplacement;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kReplacement;
  *len = static_cast<size_t>(extra) + 1;
  return cp;
}

bool in(char32_t c, char32_t lo, char32_t hi) { return c >= lo && c <= hi; }

// Case pairs laid out as (upper, lower) alternating from `first`; `upper_even` says which parity
// is the capital.
bool alternating(char32_t c, char32_t first, char32_t last, bool upper_even) {
  if (!in(c, first, last)) return false;
  return ((c - first) % 2 == 0) == upper_even;
}

struct Range {
  char32_t first, last;
  bool upper_even;
};
// Blocks where capitals and small letters alternate.
constexpr Range kAlternating[] = {
    {0x0100, 0x012F, true},  {0x0132, 0x0137, true},  {0x0139, 0x0148, true},
    {0x014A, 0x0177, true},  {0x0179, 0x017E, true},  {0x01CD, 0x01DC, true},
    {0x01DE, 0x01EF, true},  {0x01F8, 0x021F, true},  {0x0222, 0x0233, true},
    {0x0460, 0x0481, true},  {0x048A, 0x04BF, true},  {0x04C1, 0x04CE, true},
    {0x04D0, 0x052F, true},  {0x1E00, 0x1E95, true},  {0x1EA0, 0x1EFF, true},
};

// Blocks where capitals are a fixed offset below the small letters.
struct Offset {
  char32_t upper_first, upper_last;
  char32_t delta;
};
constexpr Offset kOffsets[] = {
    {U'A', U'Z', 0x20},      {0x00C0, 0x00D6, 0x20}, {0x00D8, 0x00DE, 0x20},
    {0x0391, 0x03A1, 0x20},  {0x03A3, 0x03AB, 0x20}, {0x0388, 0x038A, 0x25},
    {0x0410, 0x042F, 0x20},  {0x0400, 0x040F, 0x50}, {0x0531, 0x0556, 0x30},
    {0xFF21, 0xFF3A, 0x20},
};

}  // namespace

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 0;
    out.push_back(decode_at(s, pos, &len));
    pos += len;
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) { utf8::append(out, cp); }

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 0;
    decode_at(s, pos, &len);
    pos += len;
    ++n;
  }
  return n;
}

bool is_space(char32_t c) {
  return in(c, 0x09, 0x0D) || in(c, 0x1C, 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         in(c, 0x2000, 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool space_at(std::string_view s, size_t pos, size_t* len) {
  return is_space(decode_at(s, pos, len));
}

size_t leading_space_bytes(std::string_view s) {
  size_t pos = 0;
  size_t len = 0;
  while (pos < s.size() && space_at(s, pos, &len)) pos += len;
  return pos;
}

size_t trailing_space_bytes(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;  // back up to the lead byte of the last code point
    while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t len = 0;
    if (!space_at(s, start, &len) || start + len != end) break;
    end = start;
  }
  return s.size() - end;
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= U'a' && c <= U'z') ? c - 0x20 : c;
  for (const auto& r : kOffsets) {
    if (in(c, r.upper_first + r.delta, r.upper_last + r.delta)) return c - r.delta;
  }
  for (const auto& r : kAlternating) {
    if (alternating(c, r.first, r.last, !r.upper_even)) return c - (r.upper_even ? 1 : -1);
  }
  switch (c) {
    case 0x00B5: return 0x039C;
    case 0x00FF: return 0x0178;
    case 0x0131: return U'I';
    case 0x017F: return U'S';
    case 0x03C2: return 0x03A3;
    case 0x03AC: return 0x0386;
    case 0x03CC: return 0x038C;
    case 0x03CD: return 0x038E;
    case 0x03CE: return 0x038F;
    case 0x01C5: case 0x01C6: return 0x01C4;
    case 0x01C8: case 0x01C9: return 0x01C7;
    case 0x01CB: case 0x01CC: return 0x01CA;
    case 0x01F2: case 0x01F3: return 0x01F1;
    case 0x04CF: return 0x04C0;
    default: return c;
  }
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= U'A' && c <= U'Z') ? c + 0x20 : c;
  for (const auto& r : kOffsets) {
    if (in(c, r.upper_first, r.upper_last)) return c + r.delta;
  }
  for (const auto& r : kAlternating) {
    if (alternating(c, r.first, r.last, r.upper_even)) return c + (r.upper_even ? 1 : -1);
  }
  switch (c) {
    case 0x0178: return 0x00FF;
    case 0x0130: return U'i';
    case 0x0386: return 0x03AC;
    case 0x038C: return 0x03CC;
    case 0x038E: return 0x03CD;
    case 0x038F: return 0x03CE;
    case 0x01C4: case 0x01C5: return 0x01C6;
    case 0x01C7: case 0x01C8: return 0x01C9;
    case 0x01CA: case 0x01CB: return 0x01CC;
    case 0x01F1: case 0x01F2: return 0x01F3;
    case 0x04C0: return 0x04CF;
    default: return c;
  }
}

// Titlecase digraphs (U+01C5 "Dž" ...) are cased but neither upper nor lower.
static bool is_titlecase(char32_t c) { return c == 0x01C5 || c == 0x01C8 || c == 0x01CB || c == 0x01F2; }
bool is_upper(char32_t c) { return to_lower(c) != c && !is_titlecase(c); }
bool is_lower(char32_t c) { return (to_upper(c) != c && !is_titlecase(c)) || c == 0x00DF; }
bool is_cased(char32_t c) { return to_upper(c) != c || to_lower(c) != c || c == 0x00DF; }

bool is_alpha(char32_t c) {
  return is_cased(c) || in(c, 0x00AA, 0x00AA) || in(c, 0x00BA, 0x00BA) || in(c, 0x05D0, 0x05EA) ||
         in(c, 0x0620, 0x064A) || in(c, 0x0904, 0x0939) || in(c, 0x3041, 0x3096) ||
         in(c, 0x30A1, 0x30FA) || in(c, 0x3400, 0x4DBF) || in(c, 0x4E00, 0x9FFF) ||
         in(c, 0xAC00, 0xD7A3);
}

bool is_digit(char32_t c) {
  return in(c, U'0', U'9') || c == 0xB2 || c == 0xB3 || c == 0xB9 || in(c, 0x0660, 0x0669) ||
         in(c, 0x06F0, 0x06F9) || in(c, 0x0966, 0x096F) || in(c, 0xFF10, 0xFF19);
}

bool is_printable(char32_t c) {
  if (c < 0x20 || in(c, 0x7F, 0xA0)) return false;
  if (c < 0x100) return c != 0xAD;
  return !(c == 0x1680 || in(c, 0x2000, 0x200F) || in(c, 0x2028, 0x202F) ||
           in(c, 0x205F, 0x2064) || in(c, 0x2066, 0x206F) || c == 0x3000 || c == 0xFEFF ||
           in(c, 0xFFF9, 0xFFFB) || c == 0xFFFE || c == 0xFFFF || in(c, 0xD800, 0xF8FF) ||
           in(c, 0x0600, 0x0605) || c == 0x061C || c == 0x06DD || c == 0x070F || c == 0x180E ||
           in(c, 0xE0000, 0xE007F) || c >= 0xF0000);
}

}  // namespace kvinfer::jinja
