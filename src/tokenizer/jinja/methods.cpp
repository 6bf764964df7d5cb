// The methods templates call on strings ('x'.strip()) and dicts (d.items()), bound to their
// receiver as Python's bound methods are.
#include <string>

#include "tokenizer/jinja/strings.h"
#include "tokenizer/jinja/unicode.h"
#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {
namespace {

using Method = Value (*)(const Value& self, const CallArgs& args, const std::string& name);

std::optional<std::string> optional_string(const CallArgs& args, size_t pos, const char* arg, const std::string& method) {
  const Value* v = args.get(pos, arg);
  if (v == nullptr || v->is_none()) return std::nullopt;
  if (!v->is_string()) throw EvalError(method + "() argument must be str or None, not " + type_name(*v));
  return v->str();
}

std::string required_string(const CallArgs& args, size_t pos, const char* arg, const std::string& method) {
  const Value* v = args.get(pos, arg);
  if (v == nullptr) throw EvalError(method + "() missing required argument '" + arg + "'");
  if (!v->is_string()) throw EvalError(method + "() argument must be str, not " + type_name(*v));
  return v->str();
}

int64_t optional_int(const CallArgs& args, size_t pos, const char* arg, int64_t dflt, const std::string& method) {
  const Value* v = args.get(pos, arg);
  if (v == nullptr) return dflt;
  if (!v->is_int()) throw EvalError(method + "() argument '" + arg + "' must be int, not " + type_name(*v));
  return v->as_int();
}

Value string_list(const std::vector<std::string>& parts) {
  ValueList out;
  for (const auto& p : parts) out.push_back(Value::string(p));
  return Value::sequence(std::move(out));
}

Value strip(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 1, {"chars"});
  return Value::string(str_strip(self.str(), optional_string(args, 0, "chars", name), name != "rstrip", name != "lstrip"));
}

Value split(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 2, {"sep", "maxsplit"});
  return string_list(str_split(self.str(), optional_string(args, 0, "sep", name),
                               optional_int(args, 1, "maxsplit", -1, name), name == "rsplit"));
}

Value splitlines(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 1, {"keepends"});
  const Value* keep = args.get(0, "keepends");
  return string_list(str_splitlines(self.str(), keep != nullptr && truthy(*keep)));
}

Value affix(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 1, {});
  const Value* arg = args.get(0, "prefix");
  if (arg == nullptr) throw EvalError(name + "() takes at least 1 argument (0 given)");
  std::vector<std::string> options;
  if (arg->is_string()) {
    options.push_back(arg->str());
  } else if (arg->is_seq(SeqKind::Tuple)) {
    for (const auto& v : arg->seq().items) {
      if (!v.is_string()) throw EvalError("tuple for " + name + " must only contain str, not " + type_name(v));
      options.push_back(v.str());
    }
  } else {
    throw EvalError(name + " first arg must be str or a tuple of str, not " + type_name(*arg));
  }
  const std::string& s = self.str();
  for (const auto& o : options) {
    const bool hit = name == "startswith" ? s.compare(0, o.size(), o) == 0 && s.size() >= o.size()
                                          : s.size() >= o.size() && s.compare(s.size() - o.size(), o.size(), o) == 0;
    if (hit) return Value::boolean(true);
  }
  return Value::boolean(false);
}

Value change_case(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 0, {});
  if (name == "upper") return Value::string(str_upper(self.str()));
  if (name == "lower") return Value::string(str_lower(self.str()));
  if (name == "title") return Value::string(str_title(self.str()));
  return Value::string(str_capitalize(self.str()));
}

Value replace(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 3, {"old", "new", "count"});
  return Value::string(str_replace(self.str(), required_string(args, 0, "old", name),
                                   required_string(args, 1, "new", name), optional_int(args, 2, "count", -1, name)));
}

Value find(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 1, {});
  const std::string sub = required_string(args, 0, "sub", name);
  if (name == "count") return Value::integer(str_count(self.str(), sub));
  const int64_t i = str_find(self.str(), sub, name[0] == 'r');
  if (i < 0 && (name == "index" || name == "rindex")) throw EvalError("substring not found");
  return Value::integer(i);
}

Value join(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 1, {});
  const Value* arg = args.get(0, "iterable");
  if (arg == nullptr) throw EvalError("join() takes exactly one argument (0 given)");
  std::string out;
  size_t i = 0;
  for (const auto& v : iterate(*arg)) {
    if (!v.is_string()) {
      throw EvalError("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(v) + " found");
    }
    if (i++ > 0) out += self.str();
    out += v.str();
    check_string_size(out.size());
  }
  return Value::string(std::move(out));
}

Value classify(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 0, {});
  const std::u32string cps = utf8_decode(self.str());
  bool any_cased = false, all = !cps.empty();
  for (char32_t c : cps) {
    if (name == "isalpha") all = all && is_alpha(c);
    if (name == "isdigit") all = all && is_digit(c);
    if (name == "isalnum") all = all && (is_alpha(c) || is_digit(c));
    if (name == "isspace") all = all && is_space(c);
    if (name == "islower") all = all && !is_upper(c) && !(is_cased(c) && !is_lower(c));
    if (name == "isupper") all = all && !is_lower(c) && !(is_cased(c) && !is_upper(c));
    any_cased = any_cased || is_cased(c);
  }
  if (name == "islower" || name == "isupper") return Value::boolean(all && any_cased);
  return Value::boolean(all);
}

Value format(const Value&, const CallArgs&, const std::string&) {
  throw EvalError("unsupported: str.format() is outside kvinfer's subset; use ~ to join strings");
}

Value dict_view(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 0, {});
  ValueList out;
  for (const auto& [k, v] : self.dict().entries()) {
    if (name == "keys") out.push_back(k);
    else if (name == "values") out.push_back(v);
    else out.push_back(Value::sequence(ValueList{k, v}, SeqKind::Tuple));
  }
  const SeqKind kind = name == "keys" ? SeqKind::KeysView : name == "values" ? SeqKind::ValuesView : SeqKind::ItemsView;
  return Value::sequence(std::move(out), kind);
}

Value dict_get(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 2, {});
  const Value* key = args.get(0, "key");
  if (key == nullptr) throw EvalError("get expected at least 1 argument, got 0");
  if (const Value* v = self.dict().find(*key)) return *v;
  const Value* dflt = args.get(1, "default");
  return dflt != nullptr ? *dflt : Value::none();
}

// list.count(x) / list.index(x) (the methods the sandbox allows on lists and tuples).
Value sequence_search(const Value& self, const CallArgs& args, const std::string& name) {
  args.check(name.c_str(), 1, {});
  const Value* x = args.get(0, "value");
  if (x == nullptr) throw EvalError(name + "() takes exactly one argument (0 given)");
  const ValueList& items = self.seq().items;
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!equals(items[i], *x)) continue;
    if (name == "index") return Value::integer(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") throw EvalError(repr(*x) + " is not in list");
  return Value::integer(count);
}

struct Entry {
  const char* name;
  Method method;
};

constexpr Entry kStringMethods[] = {
    {"strip", strip},         {"lstrip", strip},        {"rstrip", strip},
    {"split", split},         {"rsplit", split},        {"splitlines", splitlines},
    {"startswith", affix},    {"endswith", affix},      {"upper", change_case},
    {"lower", change_case},   {"title", change_case},   {"capitalize", change_case},
    {"replace", replace},     {"find", find},           {"rfind", find},
    {"index", find},          {"rindex", find},         {"count", find},
    {"join", join},           {"isalpha", classify},    {"isdigit", classify},
    {"isalnum", classify},    {"isspace", classify},    {"islower", classify},
    {"isupper", classify},    {"format", format},
};

constexpr Entry kDictMethods[] = {
    {"items", dict_view}, {"keys", dict_view}, {"values", dict_view}, {"get", dict_get},
};

constexpr Entry kSequenceMethods[] = {{"count", sequence_search}, {"index", sequence_search}};

template <size_t N>
std::optional<Value> bind(const Entry (&table)[N], const Value& obj, const std::string& name) {
  for (const auto& e : table) {
    if (name == e.name) {
      Method m = e.method;
      return Value::function(name, [obj, m, name](const CallArgs& args) { return m(obj, args, name); });
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> bound_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return bind(kStringMethods, obj, name);
  if (obj.kind() == Kind::Dict) return bind(kDictMethods, obj, name);
  if (obj.is_seq(SeqKind::List) || obj.is_seq(SeqKind::Tuple) || obj.is_seq(SeqKind::Range)) {
    return bind(kSequenceMethods, obj, name);
  }
  return std::nullopt;
}

}  // namespace kvinfer::jinja
