// Filters on strings and numbers: trim, upper, lower, title, capitalize, replace, indent,
// string, safe, int, float, abs, round, tojson, default.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tokenizer/jinja/filter_table.h"
#include "tokenizer/jinja/strings.h"
#include "tokenizer/jinja/unicode.h"
#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {
namespace {

Value trim(const Value& v, const CallArgs& a) {
  a.check("trim", 1, {"chars"});
  return Value::string(str_strip(to_str(v), arg_string(a, 0, "chars", "trim"), true, true));
}

Value upper(const Value& v, const CallArgs& a) {
  a.check("upper", 0, {});
  return Value::string(str_upper(to_str(v)));
}

Value lower(const Value& v, const CallArgs& a) {
  a.check("lower", 0, {});
  return Value::string(str_lower(to_str(v)));
}

Value capitalize(const Value& v, const CallArgs& a) {
  a.check("capitalize", 0, {});
  return Value::string(str_capitalize(to_str(v)));
}

// jinja2's title (not str.title): words start after runs of -, whitespace, (, {, [ or <.
Value title(const Value& v, const CallArgs& a) {
  a.check("title", 0, {});
  auto is_separator = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c); };
  std::string out;
  bool word_start = true;
  for (char32_t c : utf8_decode(to_str(v))) {
    if (is_separator(c)) {
      utf8_append(out, c);
      word_start = true;
    } else if (word_start) {
      std::string one;
      utf8_append(one, c);
      out += str_upper(one);
      word_start = false;
    } else {
      utf8_append(out, to_lower(c));
    }
  }
  return Value::string(std::move(out));
}

Value replace(const Value& v, const CallArgs& a) {
  a.check("replace", 3, {"old", "new", "count"});
  const Value* old_v = arg_or_null(a, 0, "old");
  const Value* new_v = arg_or_null(a, 1, "new");
  if (old_v == nullptr || new_v == nullptr) throw EvalError("replace() missing required arguments 'old' and 'new'");
  const Value* count = arg_or_null(a, 2, "count");
  if (count != nullptr && !count->is_none() && !count->is_int()) throw EvalError("replace() count must be an integer");
  return Value::string(str_replace(to_str(v), to_str(*old_v), to_str(*new_v),
                                   count == nullptr || count->is_none() ? -1 : count->as_int()));
}

Value indent(const Value& v, const CallArgs& a) {
  a.check("indent", 3, {"width", "first", "blank"});
  if (!v.is_string()) throw EvalError("indent expects a string, not " + type_name(v));
  const Value* width = arg_or_null(a, 0, "width");
  std::string pad(4, ' ');
  if (width != nullptr) pad = width->is_string() ? width->str() : std::string(static_cast<size_t>(std::max<int64_t>(0, width->is_int() ? width->as_int() : 0)), ' ');
  const bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
  const std::vector<std::string> lines = str_splitlines(v.str() + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += pad;
    }
    out += lines[i];
    check_string_size(out.size());
  }
  return Value::string(first ? pad + out : out);
}

Value string(const Value& v, const CallArgs& a) {
  a.check("string", 0, {});
  return v.is_string() ? v : Value::string(to_str(v));
}

// Python's float(str): optional sign, digits with single underscores, inf/nan; else nullopt.
std::optional<double> parse_float(std::string_view s) {
  std::string text = str_strip(s, std::nullopt, true, true);
  std::string lower = str_lower(text);
  size_t i = (!lower.empty() && (lower[0] == '+' || lower[0] == '-')) ? 1 : 0;
  const std::string body = lower.substr(i);
  if (body == "inf" || body == "infinity" || body == "nan") return std::strtod(lower.c_str(), nullptr);
  std::string clean = lower.substr(0, i);
  bool digit_before = false, any_digit = false, seen_dot = false, seen_e = false;
  for (; i < lower.size(); ++i) {
    const char c = lower[i];
    if (c >= '0' && c <= '9') {
      digit_before = any_digit = true;
    } else if (c == '_') {
      if (!digit_before || i + 1 >= lower.size() || !(lower[i + 1] >= '0' && lower[i + 1] <= '9')) return std::nullopt;
      continue;
    } else if (c == '.' && !seen_dot && !seen_e) {
      seen_dot = true;
      digit_before = false;
    } else if (c == 'e' && any_digit && !seen_e) {
      seen_e = true;
      digit_before = false;
      clean.push_back('e');
      if (i + 1 < lower.size() && (lower[i + 1] == '+' || lower[i + 1] == '-')) clean.push_back(lower[++i]);
      continue;
    } else {
      return std::nullopt;
    }
    clean.push_back(c);
  }
  if (!any_digit || (seen_e && !digit_before)) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

// Python's int(str, base): sign, optional base prefix, digits with single underscores.
std::optional<int64_t> parse_int(std::string_view s, int64_t base) {
  std::string text = str_lower(str_strip(s, std::nullopt, true, true));
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  auto has_prefix = [&](char p) { return i + 1 < text.size() && text[i] == '0' && text[i + 1] == p; };
  if (base == 0) {
    base = has_prefix('x') ? 16 : has_prefix('o') ? 8 : has_prefix('b') ? 2 : 10;
    if (base != 10) i += 2;
  } else if ((base == 16 && has_prefix('x')) || (base == 8 && has_prefix('o')) || (base == 2 && has_prefix('b'))) {
    i += 2;
    if (i < text.size() && text[i] == '_') ++i;
  }
  if (base < 2 || base > 36 || i >= text.size()) return std::nullopt;
  uint64_t value = 0;
  bool digit_before = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_' && digit_before && i + 1 < text.size() && text[i + 1] != '_') {
      digit_before = false;
      continue;
    }
    const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (value > (static_cast<uint64_t>(INT64_MAX) - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) {
      throw EvalError("integer overflow (kvinfer's integers are 64-bit)");
    }
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    digit_before = true;
  }
  if (!digit_before) return std::nullopt;
  return negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
}

// int(float): nullopt where Python fails (inf, nan); an error where Python's big int would not
// fit kvinfer's 64 bits.
std::optional<int64_t> float_to_int(double d) {
  if (!std::isfinite(d)) return std::nullopt;
  if (std::fabs(d) >= 9.2e18) throw EvalError("integer overflow (kvinfer's integers are 64-bit)");
  return static_cast<int64_t>(d);  // truncates toward zero, as int()
}

Value to_int(const Value& v, const CallArgs& a) {
  a.check("int", 2, {"default", "base"});
  const Value* dflt = arg_or_null(a, 0, "default");
  const Value* base = arg_or_null(a, 1, "base");
  const Value fallback = dflt != nullptr ? *dflt : Value::integer(0);
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.kind() == Kind::Float) {
    auto i = float_to_int(v.as_float());
    return i ? Value::integer(*i) : fallback;
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), base != nullptr && base->is_int() ? base->as_int() : 10)) return Value::integer(*i);
    if (auto d = parse_float(v.str())) {  // "42.23"|int is 42
      if (auto i = float_to_int(*d)) return Value::integer(*i);
    }
  }
  return fallback;
}

Value to_float(const Value& v, const CallArgs& a) {
  a.check("float", 1, {"default"});
  const Value* dflt = arg_or_null(a, 0, "default");
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string()) {
    if (auto d = parse_float(v.str())) return Value::number(*d);
  }
  return dflt != nullptr ? *dflt : Value::number(0.0);
}

Value abs_value(const Value& v, const CallArgs& a) {
  a.check("abs", 0, {});
  if (v.is_int()) return v.as_int() < 0 ? negate(v) : Value::integer(v.as_int());
  if (v.kind() == Kind::Float) return Value::number(std::fabs(v.as_float()));
  throw EvalError("bad operand type for abs(): '" + type_name(v) + "'");
}

// Python's round(x, n): the correctly rounded decimal (printf rounds the exact binary value,
// half to even, as CPython's dtoa does).
double python_round(double x, int64_t digits) {
  if (!std::isfinite(x) || digits > 323) return x;
  if (digits < 0) {
    const double p = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / p) * p;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(digits), x);
  return std::strtod(buf, nullptr);
}

Value round_value(const Value& v, const CallArgs& a) {
  a.check("round", 2, {"precision", "method"});
  const Value* precision_v = arg_or_null(a, 0, "precision");
  const Value* method_v = arg_or_null(a, 1, "method");
  const int64_t precision = precision_v != nullptr && precision_v->is_int() ? precision_v->as_int() : 0;
  const std::string method = method_v != nullptr ? to_str(*method_v) : "common";
  if (method != "common" && method != "ceil" && method != "floor") throw EvalError("method must be common, ceil or floor");
  if (!v.is_number()) throw EvalError("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_int()) {
      if (precision >= 0) return Value::integer(v.as_int());
      return Value::integer(static_cast<int64_t>(python_round(static_cast<double>(v.as_int()), precision)));
    }
    return Value::number(python_round(v.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = v.as_float() * scale;
  return Value::number((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value tojson(const Value& v, const CallArgs& a) {
  a.check("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  if (const Value* e = arg_or_null(a, 0, "ensure_ascii")) o.ensure_ascii = truthy(*e);
  if (const Value* ind = arg_or_null(a, 1, "indent"); ind != nullptr && !ind->is_none()) {
    if (ind->is_string()) o.indent = ind->str();
    else if (ind->is_int()) o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(ind->as_int(), 0, 1 << 16)), ' ');
    else throw EvalError("tojson indent must be an int or a string");
  }
  if (const Value* sep = arg_or_null(a, 2, "separators"); sep != nullptr && !sep->is_none()) {
    const ValueList parts = iterate(*sep);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
      throw EvalError("tojson separators must be two strings");
    }
    o.item_separator = parts[0].str();
    o.key_separator = parts[1].str();
  }
  if (const Value* sk = arg_or_null(a, 3, "sort_keys")) o.sort_keys = truthy(*sk);
  return Value::string(to_json(v, o));
}

Value default_value(const Value& v, const CallArgs& a) {
  a.check("default", 2, {"default_value", "boolean"});
  const Value* dflt = arg_or_null(a, 0, "default_value");
  if (v.is_undefined() || (arg_bool(a, 1, "boolean", false) && !truthy(v))) {
    return dflt != nullptr ? *dflt : Value::string("");
  }
  return v;
}

Value safe(const Value& v, const CallArgs& a) {
  a.check("safe", 0, {});
  return Value::string(to_str(v));  // autoescape is off: marking safe changes nothing
}

struct Entry {
  std::string_view name;
  FilterFn fn;
};

constexpr Entry kFilters[] = {
    {"trim", trim},        {"upper", upper},          {"lower", lower},   {"capitalize", capitalize},
    {"title", title},      {"replace", replace},      {"indent", indent}, {"string", string},
    {"int", to_int},       {"float", to_float},       {"abs", abs_value}, {"round", round_value},
    {"tojson", tojson},    {"default", default_value}, {"d", default_value}, {"safe", safe},
};

}  // namespace

FilterFn find_text_filter(std::string_view name) {
  for (const auto& e : kFilters) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

const Value* arg_or_null(const CallArgs& args, size_t position, const char* name) { return args.get(position, name); }

bool arg_bool(const CallArgs& args, size_t position, const char* name, bool dflt) {
  const Value* v = args.get(position, name);
  return v == nullptr ? dflt : truthy(*v);
}

std::optional<std::string> arg_string(const CallArgs& args, size_t position, const char* name, const char* filter) {
  const Value* v = args.get(position, name);
  if (v == nullptr || v->is_none()) return std::nullopt;
  if (!v->is_string()) throw EvalError(std::string(filter) + "() argument '" + name + "' must be str or None");
  return v->str();
}

}  // namespace kvinfer::jinja
