// The tests (x is defined, ...) and global functions, and the lookup of filters by name.
#include "tokenizer/jinja/builtins.h"

#include <ctime>
#include <string>

#include "tokenizer/jinja/filter_table.h"
#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {
namespace {

// jinja2's sandbox refuses larger ranges (MAX_RANGE); kvinfer keeps the same bound.
constexpr int64_t kMaxRange = 100000;

using TestFn = bool (*)(const Value& v, const CallArgs& a);

const Value& one_arg(const CallArgs& a, const char* test) {
  if (a.positional.size() + a.keyword.size() != 1) throw EvalError(std::string("test '") + test + "' takes one argument");
  return a.positional.empty() ? a.keyword[0].second : a.positional[0];
}

bool string_method(const Value& v, const char* method) {
  return truthy(bound_method(Value::string(to_str(v)), method)->function().call(CallArgs{}));
}

bool remainder_is(const Value& v, const Value& divisor, int64_t r) {
  return equals(binary(BinOp::Mod, v, divisor), Value::integer(r));
}

bool sameas(const Value& v, const Value& other) {
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Kind::Undefined: return false;
    case Kind::None:
    case Kind::Bool:
    case Kind::Int:
    case Kind::Float:
    case Kind::String: return equals(v, other);  // Python shares small ints, constants and None
    default: return v.identity() == other.identity();
  }
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

#define KVI_TEST(expr) [](const Value& v, const CallArgs& a) -> bool { (void)a; return expr; }

constexpr TestEntry kTests[] = {
    {"defined", KVI_TEST(!v.is_undefined())},
    {"undefined", KVI_TEST(v.is_undefined())},
    {"none", KVI_TEST(v.is_none())},
    {"boolean", KVI_TEST(v.kind() == Kind::Bool)},
    {"true", KVI_TEST(v.kind() == Kind::Bool && v.as_bool())},
    {"false", KVI_TEST(v.kind() == Kind::Bool && !v.as_bool())},
    {"integer", KVI_TEST(v.kind() == Kind::Int)},
    {"float", KVI_TEST(v.kind() == Kind::Float)},
    {"number", KVI_TEST(v.is_number())},
    {"string", KVI_TEST(v.is_string())},
    {"mapping", KVI_TEST(v.kind() == Kind::Dict)},
    {"iterable", KVI_TEST(v.is_undefined() || v.is_string() || v.kind() == Kind::Sequence || v.kind() == Kind::Dict ||
                          (v.kind() == Kind::Object && v.object().type == Object::Type::Loop))},
    {"sequence", KVI_TEST(v.is_undefined() || v.is_string() || v.kind() == Kind::Dict || v.is_seq(SeqKind::List) ||
                          v.is_seq(SeqKind::Tuple) || v.is_seq(SeqKind::Range))},
    {"callable", KVI_TEST(v.kind() == Kind::Function || v.is_undefined())},
    {"lower", KVI_TEST(string_method(v, "islower"))},
    {"upper", KVI_TEST(string_method(v, "isupper"))},
    {"even", KVI_TEST(remainder_is(v, Value::integer(2), 0))},
    {"odd", KVI_TEST(remainder_is(v, Value::integer(2), 1))},
    {"divisibleby", KVI_TEST(remainder_is(v, one_arg(a, "divisibleby"), 0))},
    {"sameas", KVI_TEST(sameas(v, one_arg(a, "sameas")))},
    {"in", KVI_TEST(contains(one_arg(a, "in"), v))},
    {"eq", KVI_TEST(compare(v, CmpOp::Eq, one_arg(a, "eq")))},
    {"equalto", KVI_TEST(compare(v, CmpOp::Eq, one_arg(a, "equalto")))},
    {"==", KVI_TEST(compare(v, CmpOp::Eq, one_arg(a, "==")))},
    {"ne", KVI_TEST(compare(v, CmpOp::Ne, one_arg(a, "ne")))},
    {"!=", KVI_TEST(compare(v, CmpOp::Ne, one_arg(a, "!=")))},
    {"lt", KVI_TEST(compare(v, CmpOp::Lt, one_arg(a, "lt")))},
    {"lessthan", KVI_TEST(compare(v, CmpOp::Lt, one_arg(a, "lessthan")))},
    {"<", KVI_TEST(compare(v, CmpOp::Lt, one_arg(a, "<")))},
    {"le", KVI_TEST(compare(v, CmpOp::Le, one_arg(a, "le")))},
    {"<=", KVI_TEST(compare(v, CmpOp::Le, one_arg(a, "<=")))},
    {"gt", KVI_TEST(compare(v, CmpOp::Gt, one_arg(a, "gt")))},
    {"greaterthan", KVI_TEST(compare(v, CmpOp::Gt, one_arg(a, "greaterthan")))},
    {">", KVI_TEST(compare(v, CmpOp::Gt, one_arg(a, ">")))},
    {"ge", KVI_TEST(compare(v, CmpOp::Ge, one_arg(a, "ge")))},
    {">=", KVI_TEST(compare(v, CmpOp::Ge, one_arg(a, ">=")))},
};

#undef KVI_TEST

const TestEntry* find_test(std::string_view name) {
  for (const auto& e : kTests) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

int64_t int_arg(const Value& v) {
  if (!v.is_int()) throw EvalError("'" + type_name(v) + "' object cannot be interpreted as an integer");
  return v.as_int();
}

Value range(const CallArgs& a) {
  if (!a.keyword.empty()) throw EvalError("range() takes no keyword arguments");
  const size_t n = a.positional.size();
  if (n < 1 || n > 3) throw EvalError("range expected 1 to 3 arguments, got " + std::to_string(n));
  const int64_t start = n == 1 ? 0 : int_arg(a.positional[0]);
  const int64_t stop = int_arg(a.positional[n == 1 ? 0 : 1]);
  const int64_t step = n == 3 ? int_arg(a.positional[2]) : 1;
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  // The item count, in unsigned arithmetic so that no int64 span can overflow.
  uint64_t count = 0;
  if (step > 0 && stop > start) {
    count = (static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1) / static_cast<uint64_t>(step) + 1;
  } else if (step < 0 && start > stop) {
    const uint64_t abs_step = static_cast<uint64_t>(-(step + 1)) + 1;
    count = (static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1) / abs_step + 1;
  }
  if (count > static_cast<uint64_t>(kMaxRange)) {
    throw EvalError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" + std::to_string(kMaxRange) + ").");
  }
  auto seq = std::make_shared<Sequence>();
  seq->kind = SeqKind::Range;
  seq->range_start = start;
  seq->range_stop = stop;
  seq->range_step = step;
  int64_t value = start;
  for (uint64_t i = 0; i < count; ++i) {
    seq->items.push_back(Value::integer(value));
    if (i + 1 < count) value += step;  // stays between start and stop
  }
  return Value::sequence(std::move(seq));
}

// dict(*args, **kwargs) as namespace() and dict() take them: one optional mapping, then keywords.
Dict dict_from(const CallArgs& a, const char* function) {
  if (a.positional.size() > 1) throw EvalError(std::string(function) + "() expected at most 1 positional argument");
  Dict d;
  if (!a.positional.empty()) {
    const Value& src = a.positional[0];
    if (src.kind() == Kind::Dict) {
      for (const auto& [k, v] : src.dict().entries()) d.set(k, v);
    } else {
      for (const auto& pair : iterate(src)) {
        const ValueList kv = iterate(pair);
        if (kv.size() != 2) throw EvalError("dictionary update sequence element has the wrong length");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.keyword) d.set(Value::string(k), v);
  return d;
}

Value make_namespace(const CallArgs& a) {
  auto ns = std::make_shared<Object>();
  ns->type = Object::Type::Namespace;
  ns->attrs = dict_from(a, "namespace");
  for (const auto& [k, v] : ns->attrs.entries()) {
    if (k.is_string() && !k.str().empty() && k.str()[0] == '_') {
      throw EvalError("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" + k.str() + "'");
    }
  }
  return Value::object(std::move(ns));
}

Value raise_exception(const CallArgs& a) {
  if (a.positional.size() != 1 || !a.keyword.empty()) throw EvalError("raise_exception() takes exactly one argument");
  throw EvalError("raise_exception: " + to_str(a.positional[0]));
}

Value strftime_now(const CallArgs& a) {
  if (a.positional.size() != 1 || !a.keyword.empty()) throw EvalError("strftime_now() takes exactly one argument");
  const std::string format = to_str(a.positional[0]);
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  // strftime returns 0 both for "too small" and for an empty result: grow, then give up.
  for (size_t size = 256; size <= (size_t{1} << 20); size *= 4) {
    std::string buf(size, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &local);
    if (n > 0 || format.empty()) return Value::string(buf.substr(0, n));
  }
  return Value::string("");
}

}  // namespace

bool is_filter(std::string_view name) { return find_text_filter(name) != nullptr || find_sequence_filter(name) != nullptr; }

bool is_test(std::string_view name) { return find_test(name) != nullptr; }

Value apply_filter(const std::string& name, const Value& value, const CallArgs& args) {
  FilterFn fn = find_text_filter(name);
  if (fn == nullptr) fn = find_sequence_filter(name);
  if (fn == nullptr) throw EvalError("unsupported filter '" + name + "'");
  return fn(value, args);
}

bool apply_test(const std::string& name, const Value& value, const CallArgs& args) {
  const TestEntry* t = find_test(name);
  if (t == nullptr) throw EvalError("unsupported test '" + name + "'");
  return t->fn(value, args);
}

std::optional<Value> global_function(const std::string& name) {
  if (name == "range") return Value::function(name, range);
  if (name == "namespace") return Value::function(name, make_namespace);
  if (name == "dict") return Value::function(name, [](const CallArgs& a) { return Value::dict(dict_from(a, "dict")); });
  if (name == "raise_exception") return Value::function(name, raise_exception);
  if (name == "strftime_now") return Value::function(name, strftime_now);
  return std::nullopt;
}

}  // namespace kvinfer::jinja
