#pragma once
// The values a template computes with, modelled on the Python objects jinja2 hands around: the
// interpreter must agree with Python on printing, truthiness, equality and errors, so each Python
// type the chat templates meet has its own kind here.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace kvinfer::jinja {

// A failure while evaluating; the interpreter adds the template line and rethrows kvinfer::Error.
class EvalError : public std::runtime_error {
 public:
  explicit EvalError(const std::string& message) : std::runtime_error(message) {}
};

// Joins pieces by appending. (GCC 12 warns falsely, -Wrestrict, on "x" + std::string at -O3:
// GCC bug 105651.)
inline std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out.append(p);
  return out;
}

class Value;
class Dict;
struct CallArgs;
struct Object;
struct Function;
using ValueList = std::vector<Value>;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, Sequence, Dict, Object, Function };

// Python's sequence-like types. They differ in printing ("[1]", "(1,)", "range(0, 3)",
// "dict_keys([...])"), in indexing, and in how often they can be iterated: an Iterator (what
// map/select/reverse return, a Python generator) is consumed by its first iteration.
enum class SeqKind : uint8_t { List, Tuple, Range, KeysView, ValuesView, ItemsView, Iterator };

struct Sequence {
  SeqKind kind = SeqKind::List;
  ValueList items;
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // a Range's arguments, for printing
  size_t cursor = 0;  // an Iterator's items before the cursor are consumed
  // An Iterator whose Python generator raises after its items: the error surfaces only when
  // iteration gets that far (so `xs|map(...)` stays truthy and printable-as-error until used).
  std::string error;
};

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value sequence(ValueList items, SeqKind kind = SeqKind::List);
  static Value sequence(std::shared_ptr<Sequence> seq);
  static Value dict(Dict d);
  static Value object(std::shared_ptr<Object> object);
  static Value function(std::string name, std::function<Value(const CallArgs&)> call);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_int() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }  // bool is an int
  bool is_number() const { return is_int() || kind_ == Kind::Float; }
  bool is_seq(SeqKind k) const;

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;    // Int or Bool
  double as_float() const;   // any number
  const std::string& str() const;  // String (or an Undefined's hint)
  Sequence& seq() const { return *std::get<std::shared_ptr<Sequence>>(data_); }
  const std::shared_ptr<Sequence>& seq_ptr() const { return std::get<std::shared_ptr<Sequence>>(data_); }
  const Dict& dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Object& object() const { return *std::get<std::shared_ptr<Object>>(data_); }
  const Function& function() const { return *std::get<std::shared_ptr<const Function>>(data_); }
  // Identity, for Python's `is` (sameas) and for comparing generators.
  const void* identity() const;

 private:
  Kind kind_ = Kind::Undefined;
  std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<Sequence>, std::shared_ptr<const Dict>, std::shared_ptr<Object>,
               std::shared_ptr<const Function>>
      data_;
};

// An insertion-ordered dict with Python's key rules: 1, 1.0 and True are the same key; lists and
// dicts are not hashable.
class Dict {
 public:
  const Value* find(const Value& key) const;
  void set(const Value& key, Value value);
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

// namespace() objects and a for loop's `loop`.
struct Object {
  enum class Type { Namespace, Loop };
  Type type = Type::Namespace;
  Dict attrs;                              // Namespace
  std::shared_ptr<const Sequence> items;   // Loop: what is iterated
  size_t index0 = 0;                       // Loop: the current position
};

struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument at `position` or named `name` (the Python signature's order), or nullptr.
  const Value* get(size_t position, const char* name) const;
  // Rejects positional arguments past `max_positional` and keywords not in `names`.
  void check(const char* function, size_t max_positional, std::initializer_list<const char*> names) const;
};

struct Function {
  std::string name;
  std::function<Value(const CallArgs&)> call;
};

}  // namespace kvinfer::jinja
