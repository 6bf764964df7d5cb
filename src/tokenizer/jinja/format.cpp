// Python's str(), repr() and json.dumps() of template values, byte for byte.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tokenizer/jinja/unicode.h"
#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {
namespace {

void check_depth(int depth) {
  if (depth > kMaxValueDepth) {
    throw EvalError("value nested more than " + std::to_string(kMaxValueDepth) + " levels deep");
  }
}

void append_hex(std::string& out, uint32_t value, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i) out.push_back(kHex[(value >> (4 * i)) & 0xF]);
}

std::string repr_at(const Value& v, int depth);

std::string join_repr(const ValueList& items, size_t from, int depth) {
  std::string out;
  for (size_t i = from; i < items.size(); ++i) {
    if (i > from) out += ", ";
    out += repr_at(items[i], depth + 1);
  }
  return out;
}

std::string dict_repr(const Dict& d, int depth) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    out += repr_at(k, depth + 1) + ": " + repr_at(v, depth + 1);
  }
  return out + "}";
}

std::string sequence_repr(const Sequence& s, int depth) {
  switch (s.kind) {
    case SeqKind::List: return cat({"[", join_repr(s.items, 0, depth), "]"});
    case SeqKind::Tuple: return cat({"(", join_repr(s.items, 0, depth), s.items.size() == 1 ? ",)" : ")"});
    case SeqKind::Range:
      return "range(" + std::to_string(s.range_start) + ", " + std::to_string(s.range_stop) +
             (s.range_step == 1 ? "" : ", " + std::to_string(s.range_step)) + ")";
    case SeqKind::KeysView: return "dict_keys([" + join_repr(s.items, 0, depth) + "])";
    case SeqKind::ValuesView: return "dict_values([" + join_repr(s.items, 0, depth) + "])";
    case SeqKind::ItemsView: return "dict_items([" + join_repr(s.items, 0, depth) + "])";
    case SeqKind::Iterator: break;
  }
  // Python prints "<generator object ... at 0x7f...>": an address, so nothing to match.
  throw EvalError("cannot print a generator (the result of map, select, reverse, ...); convert it with |list");
}

std::string repr_at(const Value& v, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::String: return string_repr(v.str());
    case Kind::Sequence: return sequence_repr(v.seq(), depth);
    case Kind::Dict: return dict_repr(v.dict(), depth);
    case Kind::Object: {
      const Object& o = v.object();
      if (o.type == Object::Type::Namespace) return "<Namespace " + dict_repr(o.attrs, depth) + ">";
      return "<LoopContext " + std::to_string(o.index0 + 1) + "/" + std::to_string(o.items->items.size()) + ">";
    }
    default: return to_str(v);
  }
}

// JSON text of a string, as json.dumps (ensure_ascii escapes everything past ASCII).
void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c > 0x7E)) {  // ensure_ascii keeps only " " .. "~"
          if (c > 0xFFFF) {  // a surrogate pair
            const char32_t u = c - 0x10000;
            out += "\\u";
            append_hex(out, 0xD800 + (u >> 10), 4);
            out += "\\u";
            append_hex(out, 0xDC00 + (u & 0x3FF), 4);
          } else {
            out += "\\u";
            append_hex(out, c, 4);
          }
        } else {
          utf8_append(out, c);
        }
    }
  }
  out.push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return format_float(d);
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonOptions& o)
      : o_(o),
        item_separator_(o.item_separator ? std::string_view(*o.item_separator) : std::string_view(o.indent ? "," : ", ")),
        key_separator_(o.key_separator ? std::string_view(*o.key_separator) : std::string_view(": ")) {}

  void write(std::string& out, const Value& v, int depth) {
    check_depth(depth);
    switch (v.kind()) {
      case Kind::None: out += "null"; return;
      case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Kind::Int: out += std::to_string(v.as_int()); return;
      case Kind::Float: out += json_float(v.as_float()); return;
      case Kind::String: json_string(out, v.str(), o_.ensure_ascii); return;
      case Kind::Sequence:
        if (v.seq().kind == SeqKind::List || v.seq().kind == SeqKind::Tuple) {
          write_list(out, v.seq().items, depth);
          return;
        }
        break;
      case Kind::Dict: write_dict(out, v.dict(), depth); return;
      default: break;
    }
    throw EvalError("Object of type " + type_name(v) + " is not JSON serializable");
  }

 private:
  void open(std::string& out, char bracket, int depth) {
    out.push_back(bracket);
    if (o_.indent) newline(out, depth + 1);
  }
  void close(std::string& out, char bracket, int depth) {
    if (o_.indent) newline(out, depth);
    out.push_back(bracket);
  }
  void separator(std::string& out, int depth) {
    out += item_separator_;
    if (o_.indent) newline(out, depth + 1);
  }
  void newline(std::string& out, int level) {
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *o_.indent;
    check_string_size(out.size());
  }

  void write_list(std::string& out, const ValueList& items, int depth) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    open(out, '[', depth);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) separator(out, depth);
      write(out, items[i], depth + 1);
    }
    close(out, ']', depth);
  }

  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Kind::String: return k.str();
      case Kind::None: return "null";
      case Kind::Bool: return k.as_bool() ? "true" : "false";
      case Kind::Int: return std::to_string(k.as_int());
      case Kind::Float: return json_float(k.as_float());
      default: throw EvalError("keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void write_dict(std::string& out, const Dict& d, int depth) {
    if (d.size() == 0) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : d.entries()) entries.push_back(&e);
    if (o_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
        return compare(a->first, CmpOp::Lt, b->first);
      });
    }
    open(out, '{', depth);
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) separator(out, depth);
      json_string(out, key_text(entries[i]->first), o_.ensure_ascii);
      out += key_separator_;
      write(out, entries[i]->second, depth + 1);
    }
    close(out, '}', depth);
  }

  const JsonOptions& o_;
  std::string_view item_separator_;
  std::string_view key_separator_;
};

}  // namespace

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Dict: return "dict";
    case Kind::Function: return "builtin_function_or_method";
    case Kind::Object: return v.object().type == Object::Type::Namespace ? "Namespace" : "LoopContext";
    case Kind::Sequence: break;
  }
  switch (v.seq().kind) {
    case SeqKind::List: return "list";
    case SeqKind::Tuple: return "tuple";
    case SeqKind::Range: return "range";
    case SeqKind::KeysView: return "dict_keys";
    case SeqKind::ValuesView: return "dict_values";
    case SeqKind::ItemsView: return "dict_items";
    case SeqKind::Iterator: return "generator";
  }
  return "object";
}

void fail_undefined(const Value& v) {
  throw EvalError(v.str().empty() ? std::string("value is undefined") : v.str());
}

void check_string_size(size_t bytes) {
  if (bytes > kMaxStringBytes) {
    throw EvalError("string of " + std::to_string(bytes) + " bytes exceeds the limit of " +
                    std::to_string(kMaxStringBytes));
  }
}

void check_sequence_size(size_t items) {
  if (items > kMaxSequenceItems) {
    throw EvalError("sequence of " + std::to_string(items) + " items exceeds the limit of " +
                    std::to_string(kMaxSequenceItems));
  }
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.as_bool();
    case Kind::Int: return v.as_int() != 0;
    case Kind::Float: return v.as_float() != 0.0;
    case Kind::String: return !v.str().empty();
    case Kind::Sequence: return v.seq().kind == SeqKind::Iterator || !v.seq().items.empty();
    case Kind::Dict: return v.dict().size() != 0;
    case Kind::Object:
    case Kind::Function: return true;
  }
  return false;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest digits that round-trip (Python's repr), then Python's layout: positional for
  // exponents -4..15, scientific (at least two exponent digits) otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exp10 = std::atoi(sci.c_str() + e_pos + 1);
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  if (exp10 < -4 || exp10 >= 16) {
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    const std::string_view ds(digits);
    return cat({sign, ds.substr(0, 1), ds.size() > 1 ? "." : "", ds.substr(1), exp_buf});
  }
  if (exp10 < 0) return cat({sign, "0.", std::string(static_cast<size_t>(-exp10 - 1), '0'), digits});
  const auto int_digits = static_cast<size_t>(exp10) + 1;
  if (digits.size() <= int_digits) return cat({sign, digits, std::string(int_digits - digits.size(), '0'), ".0"});
  const std::string_view ds(digits);
  return cat({sign, ds.substr(0, int_digits), ".", ds.substr(int_digits)});
}

std::string string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (is_printable(c)) {
      utf8_append(out, c);
    } else if (c <= 0xFF) {
      out += "\\x";
      append_hex(out, c, 2);
    } else if (c <= 0xFFFF) {
      out += "\\u";
      append_hex(out, c, 4);
    } else {
      out += "\\U";
      append_hex(out, c, 8);
    }
  }
  out.push_back(quote);
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return v.as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(v.as_int());
    case Kind::Float: return format_float(v.as_float());
    case Kind::String: return v.str();
    case Kind::Function:
      // Python prints "<built-in method ... at 0x7f...>": an address, so nothing to match.
      throw EvalError("cannot print the function '" + v.function().name + "'; call it");
    default: return repr_at(v, 0);
  }
}

std::string repr(const Value& v) { return repr_at(v, 0); }

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  JsonWriter(options).write(out, v, 0);
  check_string_size(out.size());
  return out;
}

}  // namespace kvinfer::jinja
