#include "tokenizer/jinja/value.h"

#include <cmath>
#include <string>

#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.data_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.data_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.data_ = i;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.data_ = d;
  return v;
}
Value Value::string(std::string s) {
  check_string_size(s.size());
  Value v;
  v.kind_ = Kind::String;
  v.data_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::sequence(ValueList items, SeqKind kind) {
  auto seq = std::make_shared<Sequence>();
  seq->kind = kind;
  seq->items = std::move(items);
  return sequence(std::move(seq));
}
Value Value::sequence(std::shared_ptr<Sequence> seq) {
  check_sequence_size(seq->items.size());
  Value v;
  v.kind_ = Kind::Sequence;
  v.data_ = std::move(seq);
  return v;
}
Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.data_ = std::make_shared<const Dict>(std::move(d));
  return v;
}
Value Value::object(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = Kind::Object;
  v.data_ = std::move(object);
  return v;
}
Value Value::function(std::string name, std::function<Value(const CallArgs&)> call) {
  Value v;
  v.kind_ = Kind::Function;
  v.data_ = std::make_shared<const Function>(Function{std::move(name), std::move(call)});
  return v;
}

bool Value::is_seq(SeqKind k) const { return kind_ == Kind::Sequence && seq().kind == k; }

int64_t Value::as_int() const {
  if (kind_ == Kind::Bool) return std::get<bool>(data_) ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_float() const {
  if (kind_ == Kind::Float) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const std::string& Value::str() const {
  static const std::string kEmpty;
  if (kind_ == Kind::Undefined && std::holds_alternative<std::monostate>(data_)) return kEmpty;
  return *std::get<std::shared_ptr<const std::string>>(data_);
}

const void* Value::identity() const {
  return std::visit(
      [](const auto& d) -> const void* {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, std::monostate> || std::is_same_v<T, bool> ||
                      std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          return nullptr;
        } else {
          return d.get();
        }
      },
      data_);
}

std::optional<std::string> hash_key(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return std::string("U");  // every Undefined is equal, with one hash
    case Kind::None: return std::string("N");
    case Kind::Bool:
    case Kind::Int: return cat({"n", std::to_string(v.as_int())});
    case Kind::Float: {
      const double d = v.as_float();
      // Integral floats hash like the int of the same value, as in Python.
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
        return cat({"n", std::to_string(static_cast<int64_t>(d))});
      }
      return cat({"f", format_float(d)});
    }
    case Kind::String: return "s" + v.str();
    case Kind::Object:
    case Kind::Function: return cat({"p", std::to_string(reinterpret_cast<uintptr_t>(v.identity()))});
    case Kind::Sequence: {
      // Generators hash by identity in Python; lists and dict views are unhashable.
      if (v.seq().kind == SeqKind::Iterator) return cat({"p", std::to_string(reinterpret_cast<uintptr_t>(v.identity()))});
      if (v.seq().kind == SeqKind::Range) {  // by value, as Python: (len, start, step)
        const Sequence& r = v.seq();
        const size_t n = r.items.size();
        return cat({"r", std::to_string(n), ":", n > 0 ? std::to_string(r.range_start) : "", ":",
                    n > 1 ? std::to_string(r.range_step) : ""});
      }
      if (v.seq().kind != SeqKind::Tuple) return std::nullopt;
      std::string key = cat({"t", std::to_string(v.seq().items.size())});
      for (const auto& item : v.seq().items) {
        auto k = hash_key(item);
        if (!k) return std::nullopt;
        key += cat({":", std::to_string(k->size()), ":", *k});
      }
      return key;
    }
    default: return std::nullopt;
  }
}

const Value* Dict::find(const Value& key) const {
  auto k = hash_key(key);
  if (!k) throw EvalError("unhashable type: '" + type_name(key) + "'");
  auto it = index_.find(*k);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Dict::set(const Value& key, Value value) {
  auto k = hash_key(key);
  if (!k) throw EvalError("unhashable type: '" + type_name(key) + "'");
  auto [it, inserted] = index_.emplace(*k, entries_.size());
  if (inserted) {
    check_sequence_size(entries_.size() + 1);
    entries_.emplace_back(key, std::move(value));
  } else {
    entries_[it->second].second = std::move(value);  // Python keeps the first key, takes the new value
  }
}

const Value* CallArgs::get(size_t position, const char* name) const {
  if (position < positional.size()) return &positional[position];
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

void CallArgs::check(const char* function, size_t max_positional,
                     std::initializer_list<const char*> names) const {
  if (positional.size() > max_positional) {
    throw EvalError(std::string(function) + "() takes at most " + std::to_string(max_positional) +
                    " positional arguments (" + std::to_string(positional.size()) + " given)");
  }
  for (const auto& [k, v] : keyword) {
    bool known = false;
    size_t i = 0;
    for (const char* n : names) {
      if (k == n) {
        known = true;
        if (i < positional.size()) throw EvalError(std::string(function) + "() got multiple values for argument '" + k + "'");
      }
      ++i;
    }
    if (!known) throw EvalError(std::string(function) + "() got an unexpected keyword argument '" + k + "'");
  }
}

}  // namespace kvinfer::jinja
