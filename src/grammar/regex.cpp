// A recursive-descent parser for the ECMA-262 regex subset JSON Schema patterns use, written out
// as grammar text: classes become code-point sets (then JSON string characters), groups become
// parentheses, quantifiers repetitions; ^ and $ may only begin and end a top-level alternative.
#include "grammar/regex.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "grammar/gbnf.h"
#include "kvinfer/error.h"
#include "tokenizer/utf8.h"

namespace kvinfer::grammar {

namespace {

constexpr char32_t kMax = 0x10FFFF;

CodeSet digits() { return {{'0', '9'}}; }
CodeSet words() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
// ECMA-262 WhiteSpace and LineTerminator.
CodeSet spaces() {
  return normalize_set({{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
                        {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}});
}
// `.` without the s flag: anything but a line terminator.
CodeSet dot() { return complement_set({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}); }

void add(CodeSet& to, const CodeSet& from) { to.insert(to.end(), from.begin(), from.end()); }

class RegexParser {
 public:
  RegexParser(std::string_view p, const std::function<std::string(const CodeSet&)>& chars, const std::string& any)
      : p_(p), chars_(chars), any_(any) {}

  std::string parse() {
    if (!utf8::is_valid(p_)) fail("the pattern is not valid UTF-8");
    std::vector<std::string> alts;
    do {
      bool start = false, end = false;
      if (peek() == '^') {
        ++i_;
        start = true;
      }
      std::string body = alternative(0, /*top=*/true, end);
      alts.push_back((start ? "" : "(" + any_ + ")* ") + "(" + body + ")" + (end ? "" : " (" + any_ + ")*"));
    } while (take('|'));
    if (i_ < p_.size()) fail(fmt::format("unexpected '{}'", p_[i_]));
    std::string out;
    for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::InvalidArgument, fmt::format("pattern {:?}: {}", std::string(p_), what));
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    throw Error(ErrorKind::Unsupported, fmt::format("pattern {:?}: {} is not supported", std::string(p_), what));
  }
  char peek() const { return i_ < p_.size() ? p_[i_] : '\0'; }
  bool take(char c) {
    if (peek() != c || i_ >= p_.size()) return false;
    ++i_;
    return true;
  }
  char32_t next_char() {
    const size_t n = utf8::char_length(p_, i_);
    const char32_t c = utf8::decode(p_, i_, n);
    i_ += n;
    return c;
  }

  std::string disjunction(int depth) {
    std::string out;
    do {
      bool end = false;
      const std::string a = alternative(depth, false, end);
      out += (out.empty() ? "" : " | ") + std::string("(") + a + ")";
    } while (take('|'));
    return out;
  }

  // A sequence of terms; at the top level a trailing $ sets `end`.
  std::string alternative(int depth, bool top, bool& end) {
    std::string out;
    while (i_ < p_.size() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++i_;
        if (top && (i_ == p_.size() || peek() == '|')) {
          end = true;
          break;
        }
        unsupported("'$' other than at the end of an alternative");
      }
      if (peek() == '^') unsupported("'^' other than at the start of an alternative");
      std::string atom_text = atom(depth);
      atom_text = quantified(std::move(atom_text));
      out += (out.empty() ? "" : " ") + atom_text;
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string quantified(std::string atom_text) {
    uint32_t min = 0, max = 0;
    bool unbounded = false;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      min = c == '+' ? 1 : 0;
      max = 1;
      unbounded = c != '?';
    } else if (c == '{') {
      const size_t save = i_;
      ++i_;
      const auto n = number();
      if (!n) {  // Annex B: a '{' that starts no quantifier is a literal
        i_ = save;
        return atom_text;
      }
      min = max = *n;
      if (take(',')) {
        const auto m = number();
        if (m)
          max = *m;
        else
          unbounded = true;
      }
      if (!take('}')) {
        i_ = save;
        return atom_text;
      }
      if (!unbounded && max < min) fail(fmt::format("quantifier {{{},{}}} is out of order", min, max));
    } else {
      return atom_text;
    }
    take('?');  // lazy: the same language
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') fail("nothing to repeat");
    const std::string inner = "(" + atom_text + ")";
    if (unbounded) {
      if (min == 0) return inner + "*";
      if (min == 1) return inner + "+";
      return inner + fmt::format("{{{},}}", min);
    }
    if (min == 0 && max == 1) return inner + "?";
    return inner + fmt::format("{{{},{}}}", min, max);
  }

  std::optional<uint32_t> number() {
    const size_t start = i_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9' && i_ < p_.size()) {
      v = v * 10 + static_cast<uint64_t>(p_[i_++] - '0');
      if (v > kMaxRepeat) unsupported(fmt::format("a repetition count above {}", kMaxRepeat));
    }
    if (i_ == start) return std::nullopt;
    return static_cast<uint32_t>(v);
  }

  std::string atom(int depth) {
    if (depth > kMaxNesting) unsupported(fmt::format("nesting deeper than {} groups", kMaxNesting));
    const char c = peek();
    if (c == '(') {
      ++i_;
      if (take('?')) {
        if (take(':')) {
        } else if (peek() == '<' && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          ++i_;
          while (i_ < p_.size() && peek() != '>') ++i_;
          if (!take('>')) fail("unterminated group name");
        } else if (peek() == '=' || peek() == '!' || peek() == '<') {
          unsupported("lookaround ((?=, (?!, (?<=, (?<!)");
        } else {
          unsupported("the group modifier '(?" + std::string(1, peek()) + "'");
        }
      }
      const std::string inner = disjunction(depth + 1);
      if (!take(')')) fail("unmatched '('");
      return "(" + inner + ")";
    }
    if (c == ')') fail("unmatched ')'");
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
    if (c == '.') {
      ++i_;
      return chars_(dot());
    }
    if (c == '[') return chars_(char_class());
    if (c == '\\') {
      ++i_;
      return chars_(escape(false));
    }
    const char32_t ch = next_char();
    return chars_({{ch, ch}});
  }

  // After a backslash. In a class, \b is a backspace and \- a hyphen.
  CodeSet escape(bool in_class) {
    if (i_ >= p_.size()) fail("a trailing backslash");
    const char e = p_[i_++];
    switch (e) {
      case 'd': return digits();
      case 'D': return complement_set(digits());
      case 'w': return words();
      case 'W': return complement_set(normalize_set(words()));
      case 's': return spaces();
      case 'S': return complement_set(spaces());
      case 't': return {{'\t', '\t'}};
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        unsupported("the word boundary \\b");
      case 'B': unsupported("\\B");
      case '0':
        if (peek() >= '0' && peek() <= '9') unsupported("octal escapes");
        return {{0, 0}};
      case 'x': {
        const char32_t v = hex(2);
        return {{v, v}};
      }
      case 'u': {
        if (peek() == '{') unsupported("\\u{...} (the u flag)");
        char32_t v = hex(4);
        if (v >= 0xD800 && v <= 0xDBFF && p_.substr(i_, 2) == "\\u") {  // a surrogate pair: one code point
          const size_t save = i_;
          i_ += 2;
          const char32_t lo = hex(4);
          if (lo >= 0xDC00 && lo <= 0xDFFF) return {{0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00), 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00)}};
          i_ = save;
        }
        if (v >= 0xD800 && v <= 0xDFFF) unsupported("a lone surrogate escape");
        return {{v, v}};
      }
      case 'c': unsupported("control escapes \\cX");
      case 'p': case 'P': unsupported("Unicode property escapes \\p{...}");
      case 'k': unsupported("named backreferences \\k<...>");
      default:
        if (e >= '1' && e <= '9') unsupported("backreferences");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) fail(fmt::format("unknown escape '\\{}'", e));
        --i_;
        {
          const char32_t ch = next_char();
          return {{ch, ch}};
        }
    }
  }

  char32_t hex(int n) {
    char32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char h = peek();
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0 || i_ >= p_.size()) fail("a malformed hex escape");
      ++i_;
      v = v * 16 + static_cast<char32_t>(d);
    }
    return v;
  }

  CodeSet char_class() {
    ++i_;  // [
    const bool negate = take('^');
    CodeSet set;
    bool first = true;
    while (true) {
      if (i_ >= p_.size()) fail("unterminated character class");
      if (peek() == ']' && !first) break;
      if (peek() == ']' && first) break;  // [] matches nothing, [^] anything
      first = false;
      CodeSet lo_set = class_atom();
      if (peek() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        CodeSet hi_set = class_atom();
        if (lo_set.size() != 1 || hi_set.size() != 1 || lo_set[0].first != lo_set[0].second ||
            hi_set[0].first != hi_set[0].second)
          fail("a range with a class escape at one end");
        if (hi_set[0].first < lo_set[0].first) fail("a range out of order");
        set.emplace_back(lo_set[0].first, hi_set[0].first);
      } else {
        add(set, lo_set);
      }
    }
    ++i_;  // ]
    set = normalize_set(std::move(set));
    return negate ? complement_set(set) : set;
  }

  CodeSet class_atom() {
    if (peek() == '\\') {
      ++i_;
      if (peek() == '-') {
        ++i_;
        return {{'-', '-'}};
      }
      return escape(true);
    }
    const char32_t ch = next_char();
    return {{ch, ch}};
  }

  std::string_view p_;
  size_t i_ = 0;
  const std::function<std::string(const CodeSet&)>& chars_;
  const std::string& any_;
};

}  // namespace

CodeSet normalize_set(CodeSet r) {
  CodeSet cut;
  for (auto [lo, hi] : r) {
    if (lo <= 0xD7FF) cut.emplace_back(lo, std::min<char32_t>(hi, 0xD7FF));
    if (hi >= 0xE000) cut.emplace_back(std::max<char32_t>(lo, 0xE000), hi);
  }
  std::sort(cut.begin(), cut.end());
  CodeSet out;
  for (auto [lo, hi] : cut) {
    if (!out.empty() && lo <= out.back().second + 1)
      out.back().second = std::max(out.back().second, hi);
    else
      out.emplace_back(lo, hi);
  }
  return out;
}

CodeSet complement_set(const CodeSet& set) {
  const CodeSet r = normalize_set(set);
  CodeSet out;
  char32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMax) out.emplace_back(next, kMax);
  return normalize_set(std::move(out));
}

std::string pattern_to_gbnf(std::string_view pattern, const std::function<std::string(const CodeSet&)>& chars,
                            const std::string& any) {
  return RegexParser(pattern, chars, any).parse();
}

}  // namespace kvinfer::grammar
