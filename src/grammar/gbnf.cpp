// The grammar text format: a recursive-descent parser into grammar::Ast. Whitespace (newlines
// included) and `#` comments separate tokens anywhere; a rule ends where the next `name ::=`
// begins.
#include "grammar/gbnf.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "tokenizer/utf8.h"

namespace kvinfer::grammar {

namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// Sorts and merges ranges, and removes the surrogates (no UTF-8 encodes them).
std::vector<std::pair<char32_t, char32_t>> normalize(std::vector<std::pair<char32_t, char32_t>> r) {
  std::vector<std::pair<char32_t, char32_t>> cut;
  for (auto [lo, hi] : r) {
    if (lo <= 0xD7FF) cut.emplace_back(lo, std::min<char32_t>(hi, 0xD7FF));
    if (hi >= 0xE000) cut.emplace_back(std::max<char32_t>(lo, 0xE000), hi);
  }
  std::sort(cut.begin(), cut.end());
  std::vector<std::pair<char32_t, char32_t>> out;
  for (auto [lo, hi] : cut) {
    if (!out.empty() && lo <= out.back().second + 1)
      out.back().second = std::max(out.back().second, hi);
    else
      out.emplace_back(lo, hi);
  }
  return out;
}

std::vector<std::pair<char32_t, char32_t>> complement(const std::vector<std::pair<char32_t, char32_t>>& r) {
  std::vector<std::pair<char32_t, char32_t>> out;
  char32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return normalize(std::move(out));
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Ast parse() {
    if (s_.size() > kMaxGrammarBytes)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("grammar: {} bytes is more than the limit of {}", s_.size(), kMaxGrammarBytes));
    if (!utf8::is_valid(s_)) throw Error(ErrorKind::InvalidArgument, "grammar: the text is not valid UTF-8");
    skip_space();
    while (pos_ < s_.size()) {
      const size_t at = pos_;
      const std::string name = read_name();
      if (name.empty()) fail(at, "expected a rule name");
      skip_space();
      if (s_.substr(pos_, 3) != "::=") fail(pos_, fmt::format("expected '::=' after the rule name '{}'", name));
      pos_ += 3;
      skip_space();
      const uint32_t id = rule_id(name);
      Rule& r = ast_.rules[id];
      if (r.line != 0)
        fail(at, fmt::format("rule '{}' is defined twice (first on line {})", name, r.line));
      r.line = line_of(at);
      Expr body = alternatives(0);
      ast_.rules[id].body = std::move(body);
      if (pos_ < s_.size() && s_[pos_] == ')') fail(pos_, "unmatched ')'");
    }
    for (const Rule& r : ast_.rules)
      if (r.line == 0)
        throw Error(ErrorKind::InvalidArgument,
                    fmt::format("grammar line {}: rule '{}' is used but never defined", first_use_.at(r.name), r.name));
    const auto root = ids_.find("root");
    if (root == ids_.end()) throw Error(ErrorKind::InvalidArgument, "grammar: no rule named 'root' (where the output starts)");
    ast_.root = root->second;
    return std::move(ast_);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else if ((static_cast<unsigned char>(s_[i]) & 0xC0) != 0x80) {
        ++col;
      }
    }
    throw Error(ErrorKind::InvalidArgument, fmt::format("grammar line {}, column {}: {}", line, col, what));
  }

  int line_of(size_t at) const { return 1 + static_cast<int>(std::count(s_.begin(), s_.begin() + at, '\n')); }

  void skip_space() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string read_name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  // Whether a rule definition (`name ::=`) starts at pos_.
  bool at_definition() const {
    size_t p = pos_;
    while (p < s_.size() && is_name_char(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n' || s_[p] == '\r')) ++p;
    return s_.substr(p, 3) == "::=";
  }

  uint32_t rule_id(const std::string& name) {
    const auto [it, added] = ids_.emplace(name, static_cast<uint32_t>(ast_.rules.size()));
    if (added) ast_.rules.push_back({name, {}, 0});
    return it->second;
  }

  Expr alternatives(int depth) {
    if (depth > kMaxNesting) fail(pos_, fmt::format("parentheses nested deeper than {} levels", kMaxNesting));
    Expr alt;
    alt.kind = Expr::Kind::Alt;
    alt.items.push_back(sequence(depth));
    while (pos_ < s_.size() && s_[pos_] == '|') {
      ++pos_;
      skip_space();
      alt.items.push_back(sequence(depth));
    }
    if (alt.items.size() == 1) return std::move(alt.items[0]);
    return alt;
  }

  Expr sequence(int depth) {
    Expr seq;
    seq.kind = Expr::Kind::Seq;
    while (pos_ < s_.size() && s_[pos_] != '|' && s_[pos_] != ')' && !at_definition()) {
      Expr item = primary(depth);
      skip_space();
      item = quantified(std::move(item));
      seq.items.push_back(std::move(item));
    }
    if (seq.items.size() == 1) return std::move(seq.items[0]);
    return seq;
  }

  Expr quantified(Expr item) {
    if (pos_ >= s_.size()) return item;
    const char c = s_[pos_];
    uint32_t min = 0, max = 0;
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : Expr::kUnbounded;
    } else if (c == '{') {
      const size_t at = pos_++;
      skip_space();
      min = number(at);
      skip_space();
      max = min;
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        skip_space();
        max = pos_ < s_.size() && s_[pos_] == '}' ? Expr::kUnbounded : number(at);
        skip_space();
      }
      if (pos_ >= s_.size() || s_[pos_] != '}') fail(pos_, "expected '}' to close the repetition");
      ++pos_;
      if (max < min) fail(at, fmt::format("repetition {{{},{}}}: the maximum is below the minimum", min, max));
    } else {
      return item;
    }
    skip_space();
    if (pos_ < s_.size() && (s_[pos_] == '*' || s_[pos_] == '+' || s_[pos_] == '?' || s_[pos_] == '{'))
      fail(pos_, "two repetition operators in a row: use parentheses");
    Expr rep;
    rep.kind = Expr::Kind::Repeat;
    rep.min = min;
    rep.max = max;
    rep.items.push_back(std::move(item));
    return rep;
  }

  uint32_t number(size_t at) {
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(s_[pos_] - '0');
      if (v > kMaxRepeat) fail(at, fmt::format("a repetition count above the limit of {}", kMaxRepeat));
      ++pos_;
    }
    if (pos_ == start) fail(pos_, "expected a number in the repetition");
    return static_cast<uint32_t>(v);
  }

  Expr primary(int depth) {
    const size_t at = pos_;
    const char c = s_[pos_];
    if (c == '"') {
      ++pos_;
      Expr lit;
      lit.kind = Expr::Kind::Literal;
      while (true) {
        if (pos_ >= s_.size()) fail(at, "unterminated string");
        if (s_[pos_] == '"') break;
        utf8::append(lit.bytes, character(at));
      }
      ++pos_;
      return lit;
    }
    if (c == '[') {
      ++pos_;
      const bool negate = pos_ < s_.size() && s_[pos_] == '^';
      if (negate) ++pos_;
      std::vector<std::pair<char32_t, char32_t>> ranges;
      while (true) {
        if (pos_ >= s_.size()) fail(at, "unterminated character class");
        if (s_[pos_] == ']') break;
        const char32_t lo = character(at);
        char32_t hi = lo;
        if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
          ++pos_;
          hi = character(at);
          if (hi < lo) fail(at, fmt::format("character range U+{:04X}-U+{:04X} is reversed", static_cast<uint32_t>(lo),
                                            static_cast<uint32_t>(hi)));
        }
        ranges.emplace_back(lo, hi);
      }
      ++pos_;
      Expr cls;
      cls.kind = Expr::Kind::Chars;
      cls.ranges = negate ? complement(normalize(std::move(ranges))) : normalize(std::move(ranges));
      if (cls.ranges.empty()) fail(at, "the character class matches no character");
      return cls;
    }
    if (c == '.') {
      ++pos_;
      Expr any;
      any.kind = Expr::Kind::Chars;
      any.ranges = normalize({{0, kMaxCodePoint}});
      return any;
    }
    if (c == '(') {
      ++pos_;
      skip_space();
      Expr inner = alternatives(depth + 1);
      if (pos_ >= s_.size() || s_[pos_] != ')') fail(at, "unmatched '('");
      ++pos_;
      return inner;
    }
    if (is_name_char(c)) {
      const std::string name = read_name();
      Expr ref;
      ref.kind = Expr::Kind::Rule;
      ref.rule = rule_id(name);
      first_use_.emplace(name, line_of(at));
      return ref;
    }
    fail(at, fmt::format("unexpected '{}'", escape(c)));
  }

  static std::string escape(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u >= 0x7f ? fmt::format("\\x{:02x}", u) : std::string(1, c);
  }

  uint32_t hex(size_t n, size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < n; ++i, ++pos_) {
      if (pos_ >= s_.size()) fail(at, "incomplete escape");
      const char h = s_[pos_];
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) fail(pos_, fmt::format("'{}' is not a hex digit", escape(h)));
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  // One character of a string or class, escapes decoded.
  char32_t character(size_t at) {
    if (s_[pos_] != '\\') {
      const size_t n = utf8::char_length(s_, pos_);
      const char32_t cp = utf8::decode(s_, pos_, n);
      pos_ += n;
      return cp;
    }
    const size_t esc = pos_++;
    if (pos_ >= s_.size()) fail(at, "incomplete escape");
    const char e = s_[pos_++];
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': return static_cast<char32_t>(e);
      case 'x': return hex(2, at);
      case 'u': case 'U': {
        const uint32_t v = hex(e == 'u' ? 4 : 8, at);
        if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF))
          fail(esc, fmt::format("escape \\{}{:X} is not a Unicode scalar value", e, v));
        return v;
      }
      default: fail(esc, fmt::format("unknown escape '\\{}'", escape(e)));
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  Ast ast_;
  std::map<std::string, uint32_t> ids_;
  std::map<std::string, int> first_use_;
};

}  // namespace

Ast parse_gbnf(std::string_view text) { return Parser(text).parse(); }

std::string quote(std::string_view bytes) {
  std::string out = "\"";
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace kvinfer::grammar
