#include "tokenizer/jinja/string_literal.h"

#include "tokenizer/jinja/unicode.h"
#include "tokenizer/jinja/value.h"

namespace kvinfer::jinja {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string decode_string_literal(std::string_view raw) {
  std::string ascii;
  for (char32_t c : utf8_decode(raw)) {
    if (c < 0x80) {
      ascii.push_back(static_cast<char>(c));
      continue;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    const int digits = c <= 0xFF ? 2 : c <= 0xFFFF ? 4 : 8;
    ascii += c <= 0xFF ? "\\x" : c <= 0xFFFF ? "\\u" : "\\U";
    for (int i = digits - 1; i >= 0; --i) ascii.push_back(kHex[(c >> (4 * i)) & 0xF]);
  }
  std::string out;
  for (size_t i = 0; i < ascii.size(); ++i) {
    if (ascii[i] != '\\' || i + 1 == ascii.size()) {
      out.push_back(ascii[i]);
      continue;
    }
    const char c = ascii[++i];
    switch (c) {
      case '\n': break;
      case '\\': case '\'': case '"': out.push_back(c); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': case 'u': case 'U': {
        const int n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        char32_t cp = 0;
        for (int k = 1; k <= n; ++k) {
          const int h = i + k < ascii.size() ? hex_value(ascii[i + k]) : -1;
          if (h < 0) throw EvalError(std::string("truncated \\") + c + " escape in string literal");
          cp = cp * 16 + static_cast<char32_t>(h);
        }
        if (cp > 0x10FFFF) throw EvalError("illegal Unicode character in string literal");
        if (cp >= 0xD800 && cp <= 0xDFFF) throw EvalError("unsupported: a lone surrogate escape in a string literal");
        utf8_append(out, cp);
        i += static_cast<size_t>(n);
        break;
      }
      case 'N': throw EvalError("unsupported: \\N{...} escape in a string literal");
      default:
        if (c >= '0' && c <= '7') {
          char32_t cp = static_cast<char32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < ascii.size() && ascii[i + 1] >= '0' && ascii[i + 1] <= '7'; ++k) {
            cp = cp * 8 + static_cast<char32_t>(ascii[++i] - '0');
          }
          utf8_append(out, cp);
        } else {
          out.push_back('\\');
          out.push_back(c);
        }
    }
  }
  return out;
}

}  // namespace kvinfer::jinja
