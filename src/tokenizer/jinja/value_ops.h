#pragma once
// Python semantics for template values: printing (str/repr), truthiness, equality and ordering,
// arithmetic, membership, attribute and item access, iteration. Every failure is an EvalError
// whose message follows Python's.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/jinja/value.h"

namespace kvinfer::jinja {

// Size limits that keep hostile templates from exhausting memory (see docs/chat-templates.md).
constexpr size_t kMaxStringBytes = size_t{32} << 20;
constexpr size_t kMaxSequenceItems = size_t{1} << 22;
constexpr int kMaxValueDepth = 200;  // nesting that printing, tojson and == walk

std::string type_name(const Value& v);  // Python's type name: 'int', 'str', 'list', ...
[[noreturn]] void fail_undefined(const Value& v);
void check_string_size(size_t bytes);
void check_sequence_size(size_t items);

bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(v): what {{ v }} prints
std::string repr(const Value& v);    // repr(v): how v prints inside a list or dict
std::string format_float(double d);  // repr(float)
std::string string_repr(std::string_view s);

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // set: pretty-print with this per level
  // json.dumps' defaults when unset: ", " (or "," with an indent) and ": ".
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options);  // json.dumps

// The canonical form of a hashable key (1, 1.0 and True agree); nullopt when unhashable.
std::optional<std::string> hash_key(const Value& v);

bool equals(const Value& a, const Value& b);
enum class CmpOp { Eq, Ne, Lt, Le, Gt, Ge };
bool compare(const Value& a, CmpOp op, const Value& b);
bool contains(const Value& container, const Value& item);  // `item in container`

enum class BinOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
Value binary(BinOp op, const Value& a, const Value& b);
Value concat(const Value& a, const Value& b);  // ~
Value negate(const Value& v);
Value unary_plus(const Value& v);

// jinja2's sandboxed getattr/getitem: a missing attribute, key or index gives Undefined, never
// an error; only access on Undefined itself fails.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

ValueList iterate(const Value& v);  // list(v); consumes an iterator
// The same, but a failure (not iterable, or an iterator that raises) goes to *error after the
// items that came before it, as a generator consuming `v` would see it.
ValueList iterate(const Value& v, std::string* error);
size_t length(const Value& v);      // len(v)

// Methods of str and dict (split, startswith, items, get, ...); nullopt when `name` is none.
std::optional<Value> bound_method(const Value& obj, const std::string& name);

}  // namespace kvinfer::jinja
