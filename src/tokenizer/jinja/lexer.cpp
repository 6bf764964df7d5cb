#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cstdlib>

#include "kvinfer/error.h"
#include "tokenizer/jinja/string_literal.h"
#include "tokenizer/jinja/unicode.h"
#include "tokenizer/jinja/value.h"

namespace kvinfer::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// \r\n, \r and \n all become \n, and one trailing newline goes (keep_trailing_newline=False).
std::string normalise_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalise_newlines(source)) {
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') newlines_.push_back(i);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) root();
    push(TokenType::Eof, "", pos_);
    return std::move(tokens_);
  }

 private:
  int line_at(size_t pos) const {
    return 1 + static_cast<int>(std::lower_bound(newlines_.begin(), newlines_.end(), pos) - newlines_.begin());
  }
  [[noreturn]] void fail(size_t pos, const std::string& message) const {
    throw Error(message.starts_with("unsupported") ? ErrorKind::Unsupported : ErrorKind::BadFile, "chat template line " + std::to_string(line_at(pos)) + ": " + message);
  }
  void push(TokenType type, std::string text, size_t pos) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = line_at(pos);
    tokens_.push_back(std::move(t));
  }
  bool starts(size_t pos, std::string_view s) const { return src_.compare(pos, s.size(), s) == 0; }
  size_t skip_space(size_t pos) const {
    size_t len = 0;
    while (pos < src_.size() && space_at(src_, pos, &len)) pos += len;
    return pos;
  }

  // Text before a tag, after the tag's whitespace control: "-" strips all whitespace before it;
  // otherwise lstrip_blocks removes the spaces between the line start and a block/comment tag.
  void emit_text(size_t begin, size_t end, char sign, bool lstrip) {
    std::string_view text(src_.data() + begin, end - begin);
    if (sign == '-') {
      text.remove_suffix(trailing_space_bytes(text));
    } else if (sign != '+' && lstrip) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      const bool line_starting = begin == 0 || src_[begin - 1] == '\n';
      if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
          leading_space_bytes(text.substr(l_pos)) == text.size() - l_pos) {
        text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) push(TokenType::Data, std::string(text), begin);
  }

  // The end of a block tag at pos ("+%}", "-%}" + whitespace, or "%}" + one newline), or npos.
  size_t block_end(size_t pos) const {
    if (starts(pos, "+%}")) return pos + 3;
    if (starts(pos, "-%}")) return skip_space(pos + 3);
    if (starts(pos, "%}")) return pos + 2 + (starts(pos + 2, "\n") ? 1 : 0);
    return std::string_view::npos;
  }

  // {%(-|+|)\s*NAME\s*%} with NAME raw/endraw: the end of the tag and its sign, or npos.
  size_t raw_tag(size_t pos, std::string_view name, char* sign) const {
    if (!starts(pos, "{%")) return std::string_view::npos;
    size_t p = pos + 2;
    *sign = (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ? src_[p++] : '\0';
    p = skip_space(p);
    if (!starts(p, name)) return std::string_view::npos;
    p = skip_space(p + name.size());
    if (name == "raw") {  // the raw start tag takes no trim_blocks newline and no "+"
      if (starts(p, "-%}")) return skip_space(p + 3);
      return starts(p, "%}") ? p + 2 : std::string_view::npos;
    }
    return block_end(p);
  }

  void root() {
    size_t p = pos_;
    while (true) {
      p = src_.find('{', p);
      if (p == std::string::npos || p + 1 >= src_.size()) {
        emit_text(pos_, src_.size(), '+', false);
        pos_ = src_.size();
        return;
      }
      const char kind = src_[p + 1];
      if (kind == '{' || kind == '%' || kind == '#') break;
      ++p;
    }
    const char kind = src_[p + 1];
    char sign = (p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+')) ? src_[p + 2] : '\0';
    char raw_sign = '\0';
    if (kind == '%') {
      if (size_t raw_end = raw_tag(p, "raw", &raw_sign); raw_end != std::string_view::npos) {
        emit_text(pos_, p, raw_sign, true);
        raw(p, raw_end);
        return;
      }
    }
    emit_text(pos_, p, sign, kind != '{');
    const size_t inner = p + 2 + (sign ? 1 : 0);
    if (kind == '#') {
      comment(p, inner);
    } else {
      push(kind == '{' ? TokenType::VariableBegin : TokenType::BlockBegin, "", p);
      tag(inner, kind == '{');
    }
  }

  void raw(size_t tag_pos, size_t body) {
    for (size_t p = src_.find("{%", body); p != std::string::npos; p = src_.find("{%", p + 1)) {
      char sign = '\0';
      const size_t end = raw_tag(p, "endraw", &sign);
      if (end == std::string_view::npos) continue;
      emit_text(body, p, sign, true);
      pos_ = end;
      return;
    }
    fail(tag_pos, "Missing end of raw directive");
  }

  void comment(size_t tag_pos, size_t p) {
    for (; p < src_.size(); ++p) {
      if (starts(p, "+#}")) {
        pos_ = p + 3;
        return;
      }
      if (starts(p, "-#}")) {
        pos_ = skip_space(p + 3);
        return;
      }
      if (starts(p, "#}")) {
        pos_ = p + 2 + (starts(p + 2, "\n") ? 1 : 0);
        return;
      }
    }
    fail(tag_pos, "Missing end of comment tag");
  }

  // Tokens inside {{ }} or {% %} up to the end tag (only recognised outside brackets).
  void tag(size_t p, bool variable) {
    std::string brackets;
    while (p < src_.size()) {
      if (brackets.empty()) {
        if (variable && starts(p, "-}}")) {
          push(TokenType::VariableEnd, "", p);
          pos_ = skip_space(p + 3);
          return;
        }
        if (variable && starts(p, "}}")) {
          push(TokenType::VariableEnd, "", p);
          pos_ = p + 2;
          return;
        }
        if (!variable) {
          if (size_t end = block_end(p); end != std::string_view::npos) {
            push(TokenType::BlockEnd, "", p);
            pos_ = end;
            return;
          }
        }
      }
      if (size_t q = skip_space(p); q != p) {
        p = q;
      } else if (size_t q2 = number(p); q2 != p) {
        p = q2;
      } else if (is_name_start(src_[p])) {
        size_t e = p;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        push(TokenType::Name, src_.substr(p, e - p), p);
        p = e;
      } else if (src_[p] == '\'' || src_[p] == '"') {
        p = string(p);
      } else {
        p = op(p, brackets);
      }
    }
    pos_ = p;  // end of input inside a tag: the parser reports the missing end
  }

  // Digits with single underscores between them (jinja2's (\d+_)*\d+); returns the end or p.
  size_t digits(size_t p, bool (*ok)(char)) const {
    size_t e = p;
    while (e < src_.size() && ok(src_[e])) {
      ++e;
      if (e + 1 < src_.size() && src_[e] == '_' && ok(src_[e + 1])) ++e;
    }
    return e;
  }

  size_t number(size_t p) {
    if (!is_digit(src_[p])) return p;
    if (p > 0 && src_[p - 1] == '.') return integer(p);  // float_re's (?<!\.): xs.0 is an index
    const size_t int_end = digits(p, is_digit);
    auto fraction = [&](size_t q) {
      return (q + 1 < src_.size() && src_[q] == '.' && is_digit(src_[q + 1])) ? digits(q + 1, is_digit) : q;
    };
    auto exponent = [&](size_t q) {
      if (q >= src_.size() || (src_[q] != 'e' && src_[q] != 'E')) return q;
      size_t r = q + 1;
      if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
      return (r < src_.size() && is_digit(src_[r])) ? digits(r, is_digit) : q;
    };
    size_t end = fraction(int_end);
    if (size_t e = exponent(end); e != end) {
      end = e;
    } else if (size_t e2 = exponent(int_end); e2 != int_end) {
      end = e2;
    }
    if (end != int_end) {
      std::string text;
      for (size_t i = p; i < end; ++i) {
        if (src_[i] != '_') text.push_back(src_[i]);
      }
      Token t;
      t.type = TokenType::Float;
      t.number = std::strtod(text.c_str(), nullptr);
      t.line = line_at(p);
      tokens_.push_back(t);
      return end;
    }
    return integer(p);
  }

  size_t integer(size_t p) {
    int base = 10;
    size_t begin = p, end = p;
    const char prefix = p + 1 < src_.size() ? static_cast<char>(src_[p + 1] | 0x20) : '\0';
    auto prefixed = [&](int b, bool (*ok)(char)) {
      // 0x(_?[\da-f])+ and friends: an underscore may follow the prefix.
      size_t q = p + 2;
      if (q < src_.size() && src_[q] == '_') ++q;
      if (q >= src_.size() || !ok(src_[q])) return false;
      base = b;
      begin = p + 2;
      end = digits(q, ok);
      return true;
    };
    const bool done = src_[p] == '0' &&
                      ((prefix == 'b' && prefixed(2, [](char c) { return c == '0' || c == '1'; })) ||
                       (prefix == 'o' && prefixed(8, [](char c) { return c >= '0' && c <= '7'; })) ||
                       (prefix == 'x' && prefixed(16, [](char c) { return hex_value(c) >= 0; })));
    if (!done) {
      end = src_[p] == '0' ? digits(p, [](char c) { return c == '0'; }) : digits(p, is_digit);
    }
    uint64_t value = 0;
    for (size_t i = begin; i < end; ++i) {
      if (src_[i] == '_') continue;
      const auto d = static_cast<uint64_t>(hex_value(src_[i]));
      if (value > (static_cast<uint64_t>(INT64_MAX) - d) / static_cast<uint64_t>(base)) {
        fail(p, "integer literal " + src_.substr(p, end - p) + " does not fit in 64 bits");
      }
      value = value * static_cast<uint64_t>(base) + d;
    }
    Token t;
    t.type = TokenType::Integer;
    t.integer = static_cast<int64_t>(value);
    t.line = line_at(p);
    tokens_.push_back(t);
    return end;
  }

  size_t string(size_t p) {
    const char quote = src_[p];
    size_t e = p + 1;
    while (e < src_.size() && src_[e] != quote) e += src_[e] == '\\' ? 2 : 1;
    if (e >= src_.size()) fail(p, std::string("unexpected char '") + quote + "' (unterminated string)");
    Token t;
    t.type = TokenType::String;
    try {
      t.text = decode_string_literal(std::string_view(src_).substr(p + 1, e - p - 1));
    } catch (const EvalError& err) {
      fail(p, err.what());
    }
    t.line = line_at(p);
    tokens_.push_back(std::move(t));
    return e + 1;
  }

  size_t op(size_t p, std::string& brackets) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (auto two : kTwo) {
      if (starts(p, two)) {
        push(TokenType::Operator, std::string(two), p);
        return p + 2;
      }
    }
    const char c = src_[p];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      std::string shown;
      utf8_append(shown, utf8_decode(std::string_view(src_).substr(p, 4)).front());
      fail(p, "unexpected char '" + shown + "'");
    }
    if (c == '(' || c == '[' || c == '{') brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) fail(p, std::string("unexpected '") + c + "'");
      if (brackets.back() != c) fail(p, std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
      brackets.pop_back();
    }
    push(TokenType::Operator, std::string(1, c), p);
    return p + 1;
  }

  std::string src_;
  std::vector<size_t> newlines_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace kvinfer::jinja
