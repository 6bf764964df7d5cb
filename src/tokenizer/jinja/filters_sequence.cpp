// Filters on sequences and dicts: length, first, last, join, list, items, reverse, map,
// select/reject(attr), unique, min, max, sum, dictsort. Like jinja2, map/select/reject/unique/
// items/reverse return iterators (Python generators) that a template can consume only once.
#include <algorithm>
#include <string>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/filter_table.h"
#include "tokenizer/jinja/strings.h"
#include "tokenizer/jinja/unicode.h"
#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {
namespace {

Value iterator(ValueList items) { return Value::sequence(std::move(items), SeqKind::Iterator); }

// A generator over `v`: `emit` runs per item; the first failure (of iterating `v` or of an
// item) ends the items and is kept for whoever iterates that far, as in Python.
template <typename Emit>
Value generator(const Value& v, Emit&& emit) {
  auto seq = std::make_shared<Sequence>();
  seq->kind = SeqKind::Iterator;
  std::string error;
  for (const auto& item : iterate(v, &error)) {
    try {
      emit(item, seq->items);
    } catch (const EvalError& e) {
      seq->error = e.what();
      return Value::sequence(std::move(seq));
    }
  }
  seq->error = std::move(error);
  return Value::sequence(std::move(seq));
}

Value one_char(const std::string& s, bool last) {
  const std::u32string cps = utf8_decode(s);
  std::string out;
  utf8_append(out, last ? cps.back() : cps.front());
  return Value::string(std::move(out));
}

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then index 0, each with getitem.
Value get_path(const Value& item, const Value& attribute, const Value* dflt) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    for (const auto& p : str_split(attribute.str(), std::string("."), -1, false)) {
      const bool digits = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
      parts.push_back(digits && p.size() < 18 ? Value::integer(std::stoll(p)) : Value::string(p));
    }
  } else {
    parts.push_back(attribute);
  }
  Value v = item;
  for (const auto& part : parts) {
    v = get_item(v, part);
    if (dflt != nullptr && !dflt->is_none() && v.is_undefined()) v = *dflt;
  }
  return v;
}

Value length_of(const Value& v, const CallArgs& a) {
  a.check("length", 0, {});
  return Value::integer(static_cast<int64_t>(length(v)));
}

Value first(const Value& v, const CallArgs& a) {
  a.check("first", 0, {});
  const Value empty = Value::undefined("No first item, sequence was empty.");
  if (v.is_string()) return v.str().empty() ? empty : one_char(v.str(), false);
  if (v.kind() == Kind::Sequence && v.seq().kind == SeqKind::Iterator) {
    Sequence& s = v.seq();
    if (s.cursor < s.items.size()) return s.items[s.cursor++];
    if (!s.error.empty()) throw EvalError(s.error);
    return empty;
  }
  const ValueList items = iterate(v);
  return items.empty() ? empty : items.front();
}

Value last(const Value& v, const CallArgs& a) {
  a.check("last", 0, {});
  const Value empty = Value::undefined("No last item, sequence was empty.");
  if (v.is_string()) return v.str().empty() ? empty : one_char(v.str(), true);
  if (v.is_undefined()) return empty;
  if ((v.kind() == Kind::Sequence && v.seq().kind != SeqKind::Iterator) || v.kind() == Kind::Dict) {
    const ValueList items = iterate(v);
    return items.empty() ? empty : items.back();
  }
  throw EvalError("'" + type_name(v) + "' object is not reversible");
}

Value join(const Value& v, const CallArgs& a) {
  a.check("join", 2, {"d", "attribute"});
  const Value* sep = arg_or_null(a, 0, "d");
  const Value* attribute = arg_or_null(a, 1, "attribute");
  const std::string separator = sep != nullptr ? to_str(*sep) : "";
  std::string out;
  bool first_item = true;
  for (const auto& item : iterate(v)) {
    if (!first_item) out += separator;
    first_item = false;
    out += to_str(attribute != nullptr && !attribute->is_none() ? get_path(item, *attribute, nullptr) : item);
    check_string_size(out.size());
  }
  return Value::string(std::move(out));
}

Value list(const Value& v, const CallArgs& a) {
  a.check("list", 0, {});
  return Value::sequence(iterate(v));
}

Value items(const Value& v, const CallArgs& a) {
  a.check("items", 0, {});
  if (v.is_undefined()) return iterator({});
  if (v.kind() != Kind::Dict) {  // raised by the generator, so only when it is iterated
    auto seq = std::make_shared<Sequence>();
    seq->kind = SeqKind::Iterator;
    seq->error = "Can only get item pairs from a mapping.";
    return Value::sequence(std::move(seq));
  }
  ValueList out;
  for (const auto& [k, val] : v.dict().entries()) out.push_back(Value::sequence(ValueList{k, val}, SeqKind::Tuple));
  return iterator(std::move(out));
}

Value reverse(const Value& v, const CallArgs& a) {
  a.check("reverse", 0, {});
  if (v.is_string()) {
    std::u32string cps = utf8_decode(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8_encode(cps));
  }
  if (v.is_undefined() || v.kind() == Kind::Dict || v.kind() == Kind::Sequence) {
    const bool is_generator = v.kind() == Kind::Sequence && v.seq().kind == SeqKind::Iterator;
    ValueList out = iterate(v);
    std::reverse(out.begin(), out.end());
    // reversed() of a sequence is an iterator; a generator is not reversible, so jinja2 makes a list.
    return is_generator ? Value::sequence(std::move(out)) : iterator(std::move(out));
  }
  throw EvalError("argument to reverse is not iterable");
}

Value failed_generator(const std::string& error) {
  auto seq = std::make_shared<Sequence>();
  seq->kind = SeqKind::Iterator;
  seq->error = error;
  return Value::sequence(std::move(seq));
}

// jinja2's map/select/reject bodies are generators: even argument errors surface on iteration.
Value map(const Value& v, const CallArgs& a) {
  if (!truthy(v)) return iterator({});
  if (a.positional.empty()) {
    const Value* attribute = nullptr;
    const Value* dflt = nullptr;
    for (const auto& [k, val] : a.keyword) {
      if (k == "attribute") attribute = &val;
      else if (k == "default") dflt = &val;
      else return failed_generator("Unexpected keyword argument '" + k + "'");
    }
    if (attribute == nullptr) return failed_generator("map requires a filter argument");
    return generator(v, [&](const Value& item, ValueList& out) { out.push_back(get_path(item, *attribute, dflt)); });
  }
  const std::string name = to_str(a.positional[0]);
  if (!is_filter(name)) return failed_generator("unsupported filter '" + name + "' in map()");
  CallArgs rest{ValueList(a.positional.begin() + 1, a.positional.end()), a.keyword};
  return generator(v, [&](const Value& item, ValueList& out) { out.push_back(apply_filter(name, item, rest)); });
}

// select/reject/selectattr/rejectattr: keep the items whose test (or truthiness) is `keep`.
Value select_items(const Value& v, const CallArgs& a, bool by_attribute, bool keep) {
  if (!truthy(v)) return iterator({});
  size_t next_arg = 0;
  const Value* attribute = nullptr;
  if (by_attribute) {
    if (a.positional.empty()) return failed_generator("Missing parameter for attribute name");
    attribute = &a.positional[next_arg++];
  }
  std::string test;
  if (next_arg < a.positional.size()) {
    test = to_str(a.positional[next_arg++]);
    if (!is_test(test)) return failed_generator("unsupported test '" + test + "' in select/reject");
  }
  CallArgs rest{ValueList(a.positional.begin() + static_cast<std::ptrdiff_t>(next_arg), a.positional.end()), a.keyword};
  return generator(v, [&](const Value& item, ValueList& out) {
    const Value subject = attribute != nullptr ? get_path(item, *attribute, nullptr) : item;
    const bool pass = test.empty() ? truthy(subject) : apply_test(test, subject, rest);
    if (pass == keep) out.push_back(item);
  });
}

Value select(const Value& v, const CallArgs& a) { return select_items(v, a, false, true); }
Value reject(const Value& v, const CallArgs& a) { return select_items(v, a, false, false); }
Value selectattr(const Value& v, const CallArgs& a) { return select_items(v, a, true, true); }
Value rejectattr(const Value& v, const CallArgs& a) { return select_items(v, a, true, false); }

// The comparison key of min/max/unique/dictsort: strings compare lower-cased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(str_lower(v.str())) : v;
}

Value unique(const Value& v, const CallArgs& a) {
  a.check("unique", 2, {"case_sensitive", "attribute"});
  const bool case_sensitive = arg_bool(a, 0, "case_sensitive", false);
  const Value* attribute = arg_or_null(a, 1, "attribute");
  Dict seen;
  return generator(v, [&](const Value& item, ValueList& out) {
    const Value key = sort_key(attribute != nullptr ? get_path(item, *attribute, nullptr) : item, case_sensitive);
    if (seen.find(key) == nullptr) {
      seen.set(key, Value::none());
      out.push_back(item);
    }
  });
}

Value min_or_max(const Value& v, const CallArgs& a, bool want_max) {
  a.check(want_max ? "max" : "min", 2, {"case_sensitive", "attribute"});
  const bool case_sensitive = arg_bool(a, 0, "case_sensitive", false);
  const Value* attribute = arg_or_null(a, 1, "attribute");
  const ValueList all = iterate(v);
  if (all.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& item) {
    return sort_key(attribute != nullptr ? get_path(item, *attribute, nullptr) : item, case_sensitive);
  };
  size_t best = 0;
  for (size_t i = 1; i < all.size(); ++i) {
    if (compare(key(all[i]), want_max ? CmpOp::Gt : CmpOp::Lt, key(all[best]))) best = i;
  }
  return all[best];
}

Value min(const Value& v, const CallArgs& a) { return min_or_max(v, a, false); }
Value max(const Value& v, const CallArgs& a) { return min_or_max(v, a, true); }

Value sum(const Value& v, const CallArgs& a) {
  a.check("sum", 2, {"attribute", "start"});
  const Value* attribute = arg_or_null(a, 0, "attribute");
  const Value* start = arg_or_null(a, 1, "start");
  Value total = start != nullptr ? *start : Value::integer(0);
  for (const auto& item : iterate(v)) {
    total = binary(BinOp::Add, total, attribute != nullptr && !attribute->is_none() ? get_path(item, *attribute, nullptr) : item);
  }
  return total;
}

Value dictsort(const Value& v, const CallArgs& a) {
  a.check("dictsort", 3, {"case_sensitive", "by", "reverse"});
  if (v.kind() != Kind::Dict) throw EvalError("dictsort expects a dict, not " + type_name(v));
  const bool case_sensitive = arg_bool(a, 0, "case_sensitive", false);
  const Value* by = arg_or_null(a, 1, "by");
  const std::string by_what = by != nullptr ? to_str(*by) : "key";
  if (by_what != "key" && by_what != "value") throw EvalError("You can only sort by either 'key' or 'value'");
  const bool reversed = arg_bool(a, 2, "reverse", false);
  std::vector<std::pair<Value, Value>> entries = v.dict().entries();
  auto key = [&](const std::pair<Value, Value>& e) { return sort_key(by_what == "key" ? e.first : e.second, case_sensitive); };
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    return reversed ? compare(key(y), CmpOp::Lt, key(x)) : compare(key(x), CmpOp::Lt, key(y));
  });
  ValueList out;
  for (auto& [k, val] : entries) out.push_back(Value::sequence(ValueList{k, val}, SeqKind::Tuple));
  return Value::sequence(std::move(out));
}

struct Entry {
  std::string_view name;
  FilterFn fn;
};

constexpr Entry kFilters[] = {
    {"length", length_of}, {"count", length_of}, {"first", first},   {"last", last},
    {"join", join},        {"list", list},       {"items", items},   {"reverse", reverse},
    {"map", map},          {"select", select},   {"reject", reject}, {"selectattr", selectattr},
    {"rejectattr", rejectattr}, {"unique", unique}, {"min", min},    {"max", max},
    {"sum", sum},          {"dictsort", dictsort},
};

}  // namespace

FilterFn find_sequence_filter(std::string_view name) {
  for (const auto& e : kFilters) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace kvinfer::jinja
