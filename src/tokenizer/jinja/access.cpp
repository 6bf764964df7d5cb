// jinja2's sandboxed attribute and item access, slicing, iteration and len().
#include <algorithm>
#include <string>

#include "tokenizer/jinja/unicode.h"
#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {
namespace {

// jinja2's object_type_repr, used in its "has no attribute" messages.
std::string object_type(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

Value missing_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(cat({"'", object_type(obj), "' has no attribute '", name, "'"}));
}

Value loop_attribute(const Object& loop, const std::string& name) {
  const ValueList& items = loop.items->items;
  const size_t n = items.size(), i = loop.index0;
  auto integer = [](size_t x) { return Value::integer(static_cast<int64_t>(x)); };
  if (name == "index") return integer(i + 1);
  if (name == "index0") return integer(i);
  if (name == "revindex") return integer(n - i);
  if (name == "revindex0") return integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i + 1 == n);
  if (name == "length") return integer(n);
  if (name == "depth") return integer(1);
  if (name == "depth0") return integer(0);
  if (name == "previtem") return i > 0 ? items[i - 1] : Value::undefined("there is no previous item");
  if (name == "nextitem") return i + 1 < n ? items[i + 1] : Value::undefined("there is no next item");
  if (name == "cycle") {
    return Value::function("loop.cycle", [i](const CallArgs& args) {
      if (!args.keyword.empty()) throw EvalError("loop.cycle() takes no keyword arguments");
      if (args.positional.empty()) throw EvalError("no items for cycling given");
      return args.positional[i % args.positional.size()];
    });
  }
  if (name == "changed") throw EvalError("unsupported: loop.changed() is outside kvinfer's subset");
  return Value::undefined("'LoopContext object' has no attribute '" + name + "'");
}

// Python's index normalisation; nullopt when out of range.
std::optional<size_t> normalise_index(int64_t index, size_t size) {
  const auto n = static_cast<int64_t>(size);
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  return static_cast<size_t>(index);
}

// slice.indices(len): clamped start/stop for the step's direction.
void slice_indices(const Value& start, const Value& stop, int64_t step, int64_t len, int64_t* lo, int64_t* hi) {
  auto bound = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t x = v.as_int();
    if (x < 0) x = std::max<int64_t>(x + len, step < 0 ? -1 : 0);
    else x = std::min<int64_t>(x, step < 0 ? len - 1 : len);
    return x;
  };
  *lo = bound(start, step < 0 ? len - 1 : 0);
  *hi = bound(stop, step < 0 ? -1 : len);
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  // The sandbox hides Python internals (__class__, _private): they read as undefined.
  if (!name.empty() && name[0] == '_') {
    return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe");
  }
  if (auto method = bound_method(obj, name)) return *method;
  if (obj.kind() == Kind::Dict) {
    if (const Value* v = obj.dict().find(Value::string(name))) return *v;
  } else if (obj.kind() == Kind::Object) {
    const Object& o = obj.object();
    if (o.type == Object::Type::Loop) return loop_attribute(o, name);
    if (const Value* v = o.attrs.find(Value::string(name))) return *v;
    return Value::undefined("'Namespace object' has no attribute '" + name + "'");
  }
  return missing_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_string() && key.is_int()) {
    const std::u32string cps = utf8_decode(obj.str());
    if (auto i = normalise_index(key.as_int(), cps.size())) {
      std::string out;
      utf8_append(out, cps[*i]);
      return Value::string(std::move(out));
    }
    return Value::undefined("string index out of range");
  }
  if (obj.kind() == Kind::Sequence && key.is_int()) {
    const Sequence& s = obj.seq();
    if (s.kind == SeqKind::List || s.kind == SeqKind::Tuple || s.kind == SeqKind::Range) {
      if (auto i = normalise_index(key.as_int(), s.items.size())) return s.items[*i];
      return Value::undefined(cat({"'", object_type(obj), "' has no element ", std::to_string(key.as_int())}));
    }
  }
  if (obj.kind() == Kind::Dict && hash_key(key)) {
    if (const Value* v = obj.dict().find(key)) return *v;
  }
  // obj[key] failed: jinja2 then tries the attribute of that name.
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(cat({"'", object_type(obj), "' has no element ", repr(key)}));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step_value) {
  if (obj.is_undefined()) fail_undefined(obj);
  // jinja2 compiles x[a:b] to a plain Python subscript (not its forgiving getitem): every
  // failure here is an error.
  for (const Value* v : {&start, &stop, &step_value}) {
    if (!v->is_none() && !v->is_int()) {
      throw EvalError("slice indices must be integers or None or have an __index__ method");
    }
  }
  const int64_t step = step_value.is_int() ? step_value.as_int() : 1;
  if (step == 0) throw EvalError("slice step cannot be zero");
  auto pick = [&](auto size, auto&& emit) {
    int64_t lo = 0, hi = 0;
    slice_indices(start, stop, step, static_cast<int64_t>(size), &lo, &hi);
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) emit(static_cast<size_t>(i));
    return std::pair{lo, hi};
  };
  if (obj.is_string()) {
    const std::u32string cps = utf8_decode(obj.str());
    std::string out;
    pick(cps.size(), [&](size_t i) { utf8_append(out, cps[i]); });
    return Value::string(std::move(out));
  }
  if (obj.kind() == Kind::Sequence) {
    const Sequence& s = obj.seq();
    if (s.kind == SeqKind::List || s.kind == SeqKind::Tuple || s.kind == SeqKind::Range) {
      auto out = std::make_shared<Sequence>();
      out->kind = s.kind;
      auto [lo, hi] = pick(s.items.size(), [&](size_t i) { out->items.push_back(s.items[i]); });
      if (s.kind == SeqKind::Range) {  // range(10)[2:5] is range(2, 5)
        out->range_start = s.range_start + lo * s.range_step;
        out->range_stop = s.range_start + hi * s.range_step;
        out->range_step = s.range_step * step;
      }
      return Value::sequence(std::move(out));
    }
  }
  if (obj.kind() == Kind::Dict) throw EvalError("unhashable type: 'slice'");
  throw EvalError(cat({"'", type_name(obj), "' object is not subscriptable"}));
}

ValueList iterate(const Value& v, std::string* error) {
  if (v.kind() == Kind::Sequence && v.seq().kind == SeqKind::Iterator) {
    Sequence& s = v.seq();
    ValueList out(s.items.begin() + static_cast<std::ptrdiff_t>(s.cursor), s.items.end());
    s.cursor = s.items.size();
    *error = s.error;
    return out;
  }
  try {
    return iterate(v);
  } catch (const EvalError& e) {
    *error = e.what();
    return {};
  }
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return {};
    case Kind::String: {
      ValueList out;
      for (char32_t c : utf8_decode(v.str())) {
        std::string s;
        utf8_append(s, c);
        out.push_back(Value::string(std::move(s)));
      }
      return out;
    }
    case Kind::Dict: {
      ValueList out;
      for (const auto& e : v.dict().entries()) out.push_back(e.first);
      return out;
    }
    case Kind::Sequence: {
      Sequence& s = v.seq();
      if (s.kind != SeqKind::Iterator) return s.items;
      ValueList out(s.items.begin() + static_cast<std::ptrdiff_t>(s.cursor), s.items.end());
      s.cursor = s.items.size();
      if (!s.error.empty()) throw EvalError(s.error);
      return out;
    }
    default: throw EvalError("'" + type_name(v) + "' object is not iterable");
  }
}

size_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return 0;
    case Kind::String: return utf8_length(v.str());
    case Kind::Dict: return v.dict().size();
    case Kind::Sequence:
      if (v.seq().kind != SeqKind::Iterator) return v.seq().items.size();
      break;
    default: break;
  }
  throw EvalError("object of type '" + type_name(v) + "' has no len()");
}

}  // namespace kvinfer::jinja
