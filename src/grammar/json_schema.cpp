// The JSON-schema compiler: one grammar expression per subschema, written as grammar text. Every
// keyword is either compiled exactly, an annotation (no constraint: title, description, ...), or
// refused by name; a schema is never compiled to a grammar that accepts a value it rejects or
// rejects a value it accepts (in the canonical spelling of json_schema.h).
#include "grammar/json_schema.h"

#include <cctype>
#include <functional>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "grammar/gbnf.h"
#include "grammar/regex.h"
#include "kvinfer/error.h"
#include "tokenizer/utf8.h"

namespace kvinfer {

namespace grammar {

namespace {

using Json = nlohmann::ordered_json;
using Expr = std::optional<std::string>;  // nullopt: matches nothing

constexpr size_t kMaxSchemaBytes = 1u << 20;
constexpr int kMaxSchemaDepth = 64;
constexpr size_t kMaxProperties = 256;
constexpr size_t kMaxPrefixItems = 64;

const std::set<std::string> kAnnotations = {"$schema", "$comment", "title", "description", "default", "examples",
                                            "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
                                            "contentMediaType", "contentEncoding", "contentSchema"};
// Keywords with semantics kvinfer does not compile: refused by name.
const std::set<std::string> kRefused = {
    "not", "if", "then", "else", "patternProperties", "propertyNames", "minProperties", "maxProperties",
    "dependencies", "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
    "contains", "minContains", "maxContains", "multipleOf", "$anchor", "$dynamicRef", "$dynamicAnchor",
    "$recursiveRef", "$recursiveAnchor", "$vocabulary", "divisibleBy", "disallow", "extends"};
const std::set<std::string> kNumberKeys = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string> kStringKeys = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kArrayKeys = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems"};
const std::set<std::string> kObjectKeys = {"properties", "required", "additionalProperties"};
const std::set<std::string> kOtherKeys = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$id"};

enum TypeBit : unsigned {
  kNull = 1, kBool = 2, kInteger = 4, kFraction = 8, kString = 16, kArray = 32, kObject = 64, kAll = 127
};

// The fixed rules the schema grammars use, written only when used.
const std::map<std::string, std::string> kHelpers = {
    {"hex", "[0-9a-fA-F]"},
    // Any spelling of one character of a JSON string (a surrogate pair is one character).
    {"char",
     "[^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] hex{3} | [dD] [0-7] hex{2} ) | "
     "\"u\" [dD] [89abAB] hex{2} \"\\\\u\" [dD] [c-fC-F] hex{2} )"},
    // One character in the canonical spelling (json_schema.h).
    {"cchar",
     "[^\"\\\\\\x00-\\x1f] | \"\\\\\\\"\" | \"\\\\\\\\\" | \"\\\\b\" | \"\\\\f\" | \"\\\\n\" | \"\\\\r\" | \"\\\\t\" | "
     "\"\\\\u000\" [0-7bef] | \"\\\\u001\" [0-9a-f]"},
    {"string", "\"\\\"\" char* \"\\\"\""},
    {"integer", "\"-\"? ( \"0\" | [1-9] [0-9]* )"},
    {"number", "\"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?"},
    {"boolean", "\"true\" | \"false\""},
    {"null", "\"null\""},
    {"value",
     "\"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\" | "
     "\"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\" | string | number | \"true\" | \"false\" | \"null\""},
    // RFC 3339 full-date with the days of each month (29 February in leap years only).
    {"date",
     "[0-9]{4} \"-\" ( ( \"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | "
     "\"3\" [01] ) | ( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | \"02-\" ( \"0\" "
     "[1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | ( [0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( [02468] [048] | "
     "[13579] [26] ) \"00\" ) \"-02-29\""},
    {"uuid", "hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}"},
};
// Which helpers each helper uses.
const std::map<std::string, std::vector<std::string>> kHelperUses = {
    {"char", {"hex"}}, {"string", {"char"}}, {"value", {"ws", "string", "number"}}, {"uuid", {"hex"}}};

[[noreturn]] void unsupported(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::Unsupported, fmt::format("JSON schema {}: {}", path.empty() ? "(root)" : path, what));
}
[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::InvalidArgument, fmt::format("JSON schema {}: {}", path.empty() ? "(root)" : path, what));
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// A rule name: `prefix` and the path's letters and digits, other runs of characters as one '-'.
std::string name_from(const std::string& prefix, const std::string& path) {
  std::string out = prefix;
  for (const char c : path) {
    const char d = std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (d != '-' || out.back() != '-') out.push_back(d);
    if (out.size() >= 60) break;
  }
  return out;
}

std::string alt(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " | ") + p;
  return parts.size() > 1 ? "( " + out + " )" : out;
}

// A number in its canonical form.
std::string canonical_number(const Json& v) {
  if (v.is_number_integer()) return v.is_number_unsigned() ? std::to_string(v.get<uint64_t>()) : std::to_string(v.get<int64_t>());
  const double d = v.get<double>();
  if (!std::isfinite(d)) return "null";
  char buf[512];
  if (d == std::floor(d)) {
    if (d == 0) return "0";
    const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
    return std::string(buf, r.ptr);
  }
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, r.ptr);
}

bool is_integral(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d);
}

unsigned type_of_value(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_number()) return is_integral(v) ? kInteger : kFraction;
  if (v.is_string()) return kString;
  if (v.is_array()) return kArray;
  return kObject;
}

unsigned type_bits(const std::string& name, const std::string& path) {
  if (name == "null") return kNull;
  if (name == "boolean") return kBool;
  if (name == "integer") return kInteger;
  if (name == "number") return kInteger | kFraction;
  if (name == "string") return kString;
  if (name == "array") return kArray;
  if (name == "object") return kObject;
  invalid(path + "/type", fmt::format("unknown type {:?}", name));
}

// A grammar character class of the set (surrogate-free, non-empty).
std::string class_text(const CodeSet& set) {
  const auto one = [](char32_t c) -> std::string {
    if (c == '\\' || c == ']' || c == '[' || c == '-' || c == '^' || c == '"') return std::string("\\") + static_cast<char>(c);
    if (c < 0x20 || c == 0x7f) return fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    if (c >= 0x80 && c <= 0x9f) return fmt::format("\\u{:04X}", static_cast<uint32_t>(c));
    std::string s;
    utf8::append(s, c);
    return s;
  };
  std::string out = "[";
  for (auto [lo, hi] : set) {
    out += one(lo);
    if (hi != lo) out += (hi == lo + 1 ? "" : "-") + one(hi);
  }
  return out + "]";
}

std::string canonical_escape(char32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
  }
}

// One character of the set inside a JSON string, canonically spelled.
std::string json_chars(const CodeSet& set) {
  CodeSet raw;
  std::vector<std::string> parts;
  for (auto [lo, hi] : set) {
    for (char32_t c = lo; c <= std::min<char32_t>(hi, 0x1f); ++c) parts.push_back(quote(canonical_escape(c)));
    char32_t a = std::max<char32_t>(lo, 0x20);
    while (a <= hi) {
      const char32_t special = a <= '"' ? '"' : a <= '\\' ? '\\' : 0x110000;
      const char32_t b = std::min<char32_t>(hi, special - 1);
      if (a <= b) raw.emplace_back(a, b);
      if (special <= hi) {
        parts.push_back(quote(canonical_escape(special)));
        a = special + 1;
      } else {
        break;
      }
    }
  }
  if (!raw.empty()) parts.insert(parts.begin(), class_text(raw));
  if (parts.empty()) return "";
  return alt(parts);
}

class Compiler {
 public:
  explicit Compiler(const JsonSchemaOptions& o) : options_(o) {}

  // The expression of `schema`'s values; its rules join the grammar's.
  std::string add(const Json& schema) {
    root_ = &schema;
    refs_.clear();
    in_progress_.clear();
    pending_.clear();
    const Expr e = value(schema, "", 0, true);
    if (!e) throw Error(ErrorKind::InvalidArgument, "JSON schema: it matches no value (false, or contradictory keywords)");
    return *e;
  }

  // A name no rule has yet (from `base`), reserved.
  std::string fresh_name(const std::string& base) {
    std::string name = base;
    for (int k = 2; names_.contains(name); ++k) name = fmt::format("{}-{}", base, k);
    names_.insert(name);
    return name;
  }
  void add_rule(const std::string& name, const std::string& body) { rules_.emplace_back(name, body); }

  // The grammar: root ::= `root`, the schemas' rules and the helpers they use.
  std::string finish(const std::string& root) {
    std::string out = "root ::= " + root + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    std::set<std::string> emitted;
    std::vector<std::string> todo(used_.begin(), used_.end());
    while (!todo.empty()) {
      const std::string h = todo.back();
      todo.pop_back();
      if (!emitted.insert(h).second) continue;
      if (h == "ws")
        out += std::string("ws ::= ") + (options_.whitespace ? "( \" \" | \"\\n\" [ \\t]{0,20} )?" : "\"\"") + "\n";
      else
        out += h + " ::= " + kHelpers.at(h) + "\n";
      if (const auto it = kHelperUses.find(h); it != kHelperUses.end())
        for (const auto& u : it->second) todo.push_back(u);
    }
    return out;
  }

 private:
  std::string use(const std::string& helper) {
    used_.insert(helper);
    return helper;
  }

  // A named rule for `body` (rules keep the grammar readable and let the compiler decide what
  // to inline); names come from the schema path.
  std::string rule(const std::string& path, const std::string& body) {
    std::string base = name_from("s", path);
    std::string name = base;
    for (int k = 2; names_.contains(name); ++k) name = fmt::format("{}-{}", base, k);
    names_.insert(name);
    rules_.emplace_back(name, body);
    return name;
  }

  const Json& resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#')
      unsupported(path + "/$ref", fmt::format("$ref {:?} (only references within the schema, \"#...\")", ref));
    const Json* at = root_;
    size_t i = 1;
    if (i < ref.size() && ref[i] != '/') unsupported(path + "/$ref", fmt::format("$ref {:?} (anchors)", ref));
    while (i < ref.size()) {
      size_t j = ref.find('/', i + 1);
      if (j == std::string::npos) j = ref.size();
      std::string token;
      for (size_t k = i + 1; k < j; ++k) {
        if (ref[k] == '~' && k + 1 < j && (ref[k + 1] == '0' || ref[k + 1] == '1')) {
          token += ref[++k] == '0' ? '~' : '/';
        } else if (ref[k] == '%' && k + 2 < j && std::isxdigit(static_cast<unsigned char>(ref[k + 1])) &&
                   std::isxdigit(static_cast<unsigned char>(ref[k + 2]))) {
          token += static_cast<char>(std::stoi(ref.substr(k + 1, 2), nullptr, 16));
          k += 2;
        } else {
          token += ref[k];
        }
      }
      if (at->is_object() && at->contains(token)) {
        at = &(*at)[token];
      } else if (at->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoull(token) < at->size()) {
        at = &(*at)[std::stoull(token)];
      } else {
        invalid(path + "/$ref", fmt::format("$ref {:?} points to nothing in the schema", ref));
      }
      i = j;
    }
    return *at;
  }

  Expr ref(const std::string& target, const std::string& path, int depth) {
    if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (in_progress_.contains(target)) return pending_.at(target);
    const Json& schema = resolve(target, path);
    std::string name = name_from("ref", target.substr(1));
    const std::string base = name;
    for (int k = 2; names_.contains(name); ++k) name = fmt::format("{}-{}", base, k);
    names_.insert(name);
    in_progress_.insert(target);
    pending_[target] = name;
    const Expr body = value(schema, target.substr(1), depth + 1, false);
    in_progress_.erase(target);
    if (body) {
      rules_.emplace_back(name, *body);
      refs_[target] = name;
    } else {
      // Referenced while being compiled, and empty after all: a rule that never ends, which the
      // automaton's analysis removes with every use of it.
      rules_.emplace_back(name, "\"\\x01\" " + name);
      refs_[target] = std::nullopt;
    }
    return refs_[target];
  }

  void check_keys(const Json& s, const std::string& path, bool root) {
    for (const auto& [key, v] : s.items()) {
      if (kAnnotations.contains(key) || kNumberKeys.contains(key) || kStringKeys.contains(key) ||
          kArrayKeys.contains(key) || kObjectKeys.contains(key) || kOtherKeys.contains(key))
        continue;
      if (kRefused.contains(key)) unsupported(path, fmt::format("'{}' is not supported", key));
      unsupported(path, fmt::format("'{}' is not a keyword kvinfer knows (it is refused rather than ignored)", key));
    }
    if (s.contains("$id") && !root) unsupported(path, "'$id' is supported only at the root");
  }

  static bool only_annotations_besides(const Json& s, const std::set<std::string>& allowed, std::string& other) {
    for (const auto& [key, v] : s.items())
      if (!kAnnotations.contains(key) && !allowed.contains(key) && key != "$id") {
        other = key;
        return false;
      }
    return true;
  }

  Expr value(const Json& s, const std::string& path, int depth, bool root = false) {
    if (depth > kMaxSchemaDepth) unsupported(path, fmt::format("nesting deeper than {} subschemas", kMaxSchemaDepth));
    if (s.is_boolean()) return s.get<bool>() ? Expr(use("value")) : std::nullopt;
    if (!s.is_object()) invalid(path, fmt::format("a schema must be an object or a boolean, got {}", s.dump()));
    check_keys(s, path, root);
    std::string other;
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) invalid(path + "/$ref", "'$ref' must be a string");
      if (!only_annotations_besides(s, {"$ref"}, other))
        unsupported(path, fmt::format("'$ref' next to '{}' is not supported", other));
      return ref(s["$ref"].get<std::string>(), path, depth);
    }
    unsigned types = kAll;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types = type_bits(t.get<std::string>(), path);
      } else if (t.is_array()) {
        types = 0;
        for (const Json& n : t) {
          if (!n.is_string()) invalid(path + "/type", "'type' must be a string or a list of strings");
          types |= type_bits(n.get<std::string>(), path);
        }
      } else {
        invalid(path + "/type", "'type' must be a string or a list of strings");
      }
    }
    if (s.contains("enum") || s.contains("const")) {
      if (!only_annotations_besides(s, {"enum", "const", "type"}, other))
        unsupported(path, fmt::format("'{}' together with '{}' is not supported", s.contains("enum") ? "enum" : "const", other));
      std::vector<Json> values;
      if (s.contains("enum")) {
        if (!s["enum"].is_array()) invalid(path + "/enum", "'enum' must be a list");
        for (const Json& v : s["enum"]) values.push_back(v);
      }
      if (s.contains("const")) {
        const std::string c = canonical_json(s["const"]);
        if (s.contains("enum"))
          std::erase_if(values, [&](const Json& v) { return canonical_json(v) != c; });
        else
          values.push_back(s["const"]);
      }
      std::vector<std::string> parts;
      std::set<std::string> seen;
      for (const Json& v : values) {
        if ((type_of_value(v) & types) == 0) continue;
        const std::string lit = quote(canonical_json(v));
        if (seen.insert(lit).second) parts.push_back(lit);
      }
      if (parts.empty()) return std::nullopt;
      return alt(parts);
    }
    for (const char* comb : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(comb)) continue;
      if (!only_annotations_besides(s, {comb}, other))
        unsupported(path, fmt::format("'{}' together with '{}' is not supported", comb, other));
      const Json& list = s[comb];
      if (!list.is_array() || list.empty()) invalid(path + "/" + comb, fmt::format("'{}' must be a non-empty list", comb));
      if (std::string(comb) == "allOf") {
        if (list.size() != 1) unsupported(path, "'allOf' with more than one schema is not supported");
        return value(list[0], path + "/allOf/0", depth + 1);
      }
      if (std::string(comb) == "oneOf") check_disjoint(list, path);
      std::vector<std::string> parts;
      for (size_t i = 0; i < list.size(); ++i)
        if (const Expr e = value(list[i], fmt::format("{}/{}/{}", path, comb, i), depth + 1)) parts.push_back(*e);
      if (parts.empty()) return std::nullopt;
      return alt(parts);
    }
    std::vector<std::string> parts;
    if (types & kNull) parts.push_back(use("null"));
    if (types & kBool) parts.push_back(use("boolean"));
    if (types & (kInteger | kFraction))
      if (const Expr e = number(s, path, (types & kFraction) == 0)) parts.push_back(*e);
    if (types & kString)
      if (const Expr e = string(s, path)) parts.push_back(*e);
    if (types & kArray)
      if (const Expr e = array(s, path, depth)) parts.push_back(*e);
    if (types & kObject)
      if (const Expr e = object(s, path, depth)) parts.push_back(*e);
    if (parts.empty()) return std::nullopt;
    return alt(parts);
  }

  // ---- numbers ----

  Expr number(const Json& s, const std::string& path, bool integer) {
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    bool lo_open = false, hi_open = false, bounded = false;
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (!s.contains(k)) continue;
      const Json& v = s[k];
      const std::string key = k;
      if (v.is_boolean() && (key == "exclusiveMinimum" || key == "exclusiveMaximum")) {  // draft 4
        (key == "exclusiveMinimum" ? lo_open : hi_open) |= v.get<bool>();
        continue;
      }
      if (!v.is_number()) invalid(path + "/" + key, fmt::format("'{}' must be a number", key));
      bounded = true;
      const double d = v.get<double>();
      if (key == "minimum" && d > lo) lo = d;
      if (key == "maximum" && d < hi) hi = d;
      if (key == "exclusiveMinimum" && d >= lo) {
        lo = d;
        lo_open = true;
      }
      if (key == "exclusiveMaximum" && d <= hi) {
        hi = d;
        hi_open = true;
      }
    }
    if (!bounded) return use(integer ? "integer" : "number");
    if (!integer)
      unsupported(path, "'minimum'/'maximum' on a number that may have a fraction is not supported (only on type integer)");
    // Integers in [lo, hi], the bounds rounded inwards.
    constexpr double kLimit = 9.0e15;
    if ((std::isfinite(lo) && std::fabs(lo) > kLimit) || (std::isfinite(hi) && std::fabs(hi) > kLimit))
      unsupported(path, "integer bounds beyond ±9e15 are not supported");
    std::optional<int64_t> a, b;
    if (std::isfinite(lo)) a = static_cast<int64_t>(lo_open && lo == std::floor(lo) ? lo + 1 : std::ceil(lo));
    if (std::isfinite(hi)) b = static_cast<int64_t>(hi_open && hi == std::floor(hi) ? hi - 1 : std::floor(hi));
    if (a && b && *a > *b) return std::nullopt;
    return "( " + integer_range(a, b) + " )";
  }

  // Decimal integers (no leading zeros, no "-0") in [a, b]; nullopt: unbounded.
  static std::string integer_range(std::optional<int64_t> a, std::optional<int64_t> b) {
    std::vector<std::string> parts;
    // Negatives: -x for x in [max(1, -b), -a].
    if (!a || *a < 0) {
      const uint64_t nlo = b && *b < 0 ? static_cast<uint64_t>(-*b) : 1;
      parts.push_back("\"-\" " + positive_range(nlo, a.has_value(), a ? static_cast<uint64_t>(-*a) : 0));
    }
    if (!b || *b >= 0) {
      const uint64_t plo = a && *a > 0 ? static_cast<uint64_t>(*a) : 0;
      const uint64_t phi = b ? static_cast<uint64_t>(*b) : 0;
      if (plo == 0) {
        parts.push_back("\"0\"");
        if (!b || phi >= 1) parts.push_back(positive_range(1, b.has_value(), phi));
      } else {
        parts.push_back(positive_range(plo, b.has_value(), phi));
      }
    }
    return alt(parts);
  }

  // x in [lo, hi] with lo >= 1, no leading zeros; no hi: unbounded.
  static std::string positive_range(uint64_t lo, bool bounded, uint64_t hi) {
    std::vector<std::string> parts;
    const std::string slo = std::to_string(lo);
    if (!bounded) {
      const uint64_t top = pow10(slo.size()) - 1;  // lo's length, then any longer number
      parts.push_back(same_length(slo, std::to_string(top)));
      parts.push_back(fmt::format("[1-9] [0-9]{{{},}}", slo.size()));
      return alt(parts);
    }
    const std::string shi = std::to_string(hi);
    for (size_t len = slo.size(); len <= shi.size(); ++len) {
      const std::string from = len == slo.size() ? slo : std::to_string(pow10(len - 1));
      const std::string to = len == shi.size() ? shi : std::to_string(pow10(len) - 1);
      parts.push_back(same_length(from, to));
    }
    return alt(parts);
  }

  static uint64_t pow10(size_t n) {
    uint64_t v = 1;
    for (size_t i = 0; i < n; ++i) v *= 10;
    return v;
  }

  // Digit strings of one length between x and y (x <= y).
  static std::string same_length(const std::string& x, const std::string& y) {
    if (x.empty()) return "\"\"";
    const auto digit = [](char lo, char hi) {
      return lo == hi ? fmt::format("\"{}\"", lo) : fmt::format("[{}-{}]", lo, hi);
    };
    if (x.size() == 1) return digit(x[0], y[0]);
    if (x[0] == y[0]) return fmt::format("\"{}\" ", x[0]) + wrap(same_length(x.substr(1), y.substr(1)));
    const size_t rest = x.size() - 1;
    const bool x_zeros = x.find_first_not_of('0', 1) == std::string::npos;
    const bool y_nines = y.find_first_not_of('9', 1) == std::string::npos;
    std::vector<std::string> parts;
    char lo = x[0], hi = y[0];
    if (!x_zeros) {
      parts.push_back(fmt::format("\"{}\" ", x[0]) + wrap(same_length(x.substr(1), std::string(rest, '9'))));
      ++lo;
    }
    if (!y_nines) --hi;
    if (lo <= hi) parts.push_back(digit(lo, hi) + fmt::format(" [0-9]{{{}}}", rest));
    if (!y_nines) parts.push_back(fmt::format("\"{}\" ", y[0]) + wrap(same_length(std::string(rest, '0'), y.substr(1))));
    return alt(parts);
  }

  static std::string wrap(const std::string& e) { return e.front() == '(' || e.find(' ') == std::string::npos ? e : "( " + e + " )"; }

  // ---- strings ----

  Expr string(const Json& s, const std::string& path) {
    const bool has_min = s.contains("minLength"), has_max = s.contains("maxLength");
    const bool has_pattern = s.contains("pattern"), has_format = s.contains("format");
    if (int(has_pattern) + int(has_format) + int(has_min || has_max) > 1)
      unsupported(path, "'pattern', 'format' and 'minLength'/'maxLength' together are not supported (one of them at a time)");
    if (has_format) {
      if (!s["format"].is_string()) invalid(path + "/format", "'format' must be a string");
      const std::string f = s["format"].get<std::string>();
      if (f != "date" && f != "uuid") unsupported(path, fmt::format("format {:?} is not supported (date and uuid are)", f));
      return "\"\\\"\" " + use(f) + " \"\\\"\"";
    }
    if (has_pattern) {
      if (!s["pattern"].is_string()) invalid(path + "/pattern", "'pattern' must be a string");
      return "\"\\\"\" ( " + pattern_to_gbnf(s["pattern"].get<std::string>(), json_chars, use("cchar")) + " ) \"\\\"\"";
    }
    if (has_min || has_max) {
      const auto count = [&](const char* k) -> uint64_t {
        const Json& v = s[k];
        if (!is_integral(v) || v.get<double>() < 0) invalid(path + "/" + k, fmt::format("'{}' must be a non-negative integer", k));
        const double d = v.get<double>();
        if (d > kMaxRepeat) unsupported(path, fmt::format("'{}' above {} is not supported", k, kMaxRepeat));
        return static_cast<uint64_t>(d);
      };
      const uint64_t lo = has_min ? count("minLength") : 0;
      if (has_max) {
        const uint64_t hi = count("maxLength");
        if (hi < lo) return std::nullopt;
        return fmt::format("\"\\\"\" {}{{{},{}}} \"\\\"\"", use("char"), lo, hi);
      }
      return fmt::format("\"\\\"\" {}{{{},}} \"\\\"\"", use("char"), lo);
    }
    return use("string");
  }

  // ---- arrays ----

  Expr array(const Json& s, const std::string& path, int depth) {
    if (s.contains("uniqueItems")) {
      if (!s["uniqueItems"].is_boolean()) invalid(path + "/uniqueItems", "'uniqueItems' must be true or false");
      if (s["uniqueItems"].get<bool>()) unsupported(path, "'uniqueItems': true is not supported");
    }
    const auto count = [&](const char* k) -> std::optional<uint64_t> {
      if (!s.contains(k)) return std::nullopt;
      const Json& v = s[k];
      if (!is_integral(v) || v.get<double>() < 0) invalid(path + "/" + k, fmt::format("'{}' must be a non-negative integer", k));
      return static_cast<uint64_t>(std::min<double>(v.get<double>(), 1e18));
    };
    const uint64_t min = count("minItems").value_or(0);
    const std::optional<uint64_t> max = count("maxItems");
    if (max && *max < min) return std::nullopt;
    if (min > kMaxRepeat || (max && *max > kMaxRepeat))
      unsupported(path, fmt::format("'minItems'/'maxItems' above {} are not supported", kMaxRepeat));

    std::vector<Expr> prefix;  // tuple positions
    Json rest = true;
    std::string rest_path = path + "/items";
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) invalid(path + "/prefixItems", "'prefixItems' must be a list");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) prefix.push_back(item(s["prefixItems"][i], fmt::format("{}/prefixItems/{}", path, i), depth));
      if (s.contains("items")) rest = s["items"];
      if (s.contains("additionalItems")) unsupported(path, "'additionalItems' next to 'prefixItems' is not supported");
    } else if (s.contains("items") && s["items"].is_array()) {
      for (size_t i = 0; i < s["items"].size(); ++i) prefix.push_back(item(s["items"][i], fmt::format("{}/items/{}", path, i), depth));
      if (s.contains("additionalItems")) {
        rest = s["additionalItems"];
        rest_path = path + "/additionalItems";
      }
    } else if (s.contains("items")) {
      rest = s["items"];
    }
    if (prefix.size() > kMaxPrefixItems) unsupported(path, fmt::format("more than {} tuple items are not supported", kMaxPrefixItems));
    const Expr more = item(rest, rest_path, depth);

    // The items after the tuple's k: between `need` and `most`, each after a comma but a first
    // item of the array.
    const auto sep = [&](size_t i) { return i == 0 ? std::string() : "\",\" " + use("ws") + " "; };
    const size_t k = prefix.size();
    const bool extras = more.has_value() && (!max || *max > k);
    std::string tail;
    if (extras) {
      const uint64_t need = min > k ? min - k : 0;
      const uint64_t most = max ? *max - k : 0;  // with max: at least 1 here
      const std::string one = *more + " " + use("ws");
      const std::string next = "\",\" " + use("ws") + " " + one;
      const std::string upto = max ? std::to_string(most - 1) : "";
      if (k == 0 && need == 0)
        tail = fmt::format("( {} ( {} ){{0,{}}} )?", one, next, upto);
      else if (k == 0)
        tail = fmt::format("{} ( {} ){{{},{}}}", one, next, need - 1, upto);
      else
        tail = fmt::format("( {} ){{{},{}}}", next, need, max ? std::to_string(most) : "");
    }
    const bool tail_possible = extras || min <= k;
    // Tuple positions, innermost first: after i items, either stop (if i >= min) or go on.
    std::string inner = tail_possible ? tail : std::string();
    bool inner_possible = tail_possible;
    for (size_t i = k; i-- > 0;) {
      // At position i: item i present, then `inner` (after i + 1 items).
      std::string with;
      const bool can_take = prefix[i].has_value() && (!max || i < *max) && inner_possible;
      if (can_take) with = sep(i) + *prefix[i] + " " + use("ws") + (inner.empty() ? "" : " " + inner);
      const bool can_stop = i >= min;
      if (can_take && can_stop)
        inner = "( " + with + " )?";
      else if (can_take)
        inner = with;
      else if (can_stop)
        inner = "";
      inner_possible = can_take || can_stop;
    }
    if (!inner_possible) return std::nullopt;
    return "\"[\" " + use("ws") + " " + (inner.empty() ? "" : inner + " ") + "\"]\"";
  }

  Expr item(const Json& schema, const std::string& path, int depth) {
    const Expr e = value(schema, path, depth + 1);
    if (!e) return e;
    return rule(path, *e);
  }

  // ---- objects ----

  Expr object(const Json& s, const std::string& path, int depth) {
    std::vector<std::pair<std::string, Expr>> props;  // declared, in order, then required-only keys
    std::set<std::string> declared;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) invalid(path + "/properties", "'properties' must be an object");
      for (const auto& [key, sub] : s["properties"].items()) {
        declared.insert(key);
        props.emplace_back(key, item(sub, path + "/properties/" + pointer_token(key), depth));
      }
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) invalid(path + "/required", "'required' must be a list of strings");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) invalid(path + "/required", "'required' must be a list of strings");
        required.insert(r.get<std::string>());
      }
    }
    Json extra_schema = true;
    if (s.contains("additionalProperties")) extra_schema = s["additionalProperties"];
    const Expr extra_value = item(extra_schema, path + "/additionalProperties", depth);
    for (const std::string& r : required)
      if (!declared.contains(r)) {  // required but not in properties: an extra that must be there
        declared.insert(r);
        props.emplace_back(r, extra_value);
      }
    if (props.size() > kMaxProperties) unsupported(path, fmt::format("more than {} properties are not supported", kMaxProperties));
    for (const auto& [key, e] : props)
      if (!e && required.contains(key)) return std::nullopt;  // a required property no value can fill
    std::vector<std::string> members;  // (props) "key": value, or "" when it cannot appear
    std::vector<bool> must;
    for (const auto& [key, e] : props) {
      must.push_back(required.contains(key));
      members.push_back(e ? quote(canonical_json(Json(key))) + " " + use("ws") + " \":\" " + use("ws") + " " + *e + " " + use("ws") : "");
    }
    std::string extra;
    if (extra_value) extra = other_key(declared, path) + " " + use("ws") + " \":\" " + use("ws") + " " + *extra_value + " " + use("ws");
    const std::string comma = "\",\" " + use("ws") + " ";
    const size_t n = props.size();
    // after[i]: a rule for the members from i on once something is written (each after a
    // comma), "" when nothing can follow.
    std::vector<std::string> after(n + 1);
    if (!extra.empty()) after[n] = rule(fmt::format("{}/after{}", path, n), "( " + comma + extra + " )*");
    for (size_t i = n; i-- > 1;) {  // after[0] is never used: the first member is written without a comma
      std::string body;
      if (!members[i].empty()) body = must[i] ? comma + members[i] : "( " + comma + members[i] + " )?";
      if (!after[i + 1].empty()) body += (body.empty() ? "" : " ") + after[i + 1];
      if (!body.empty()) after[i] = rule(fmt::format("{}/after{}", path, i), body);
    }
    // Nothing written yet: the first member is one of the optional ones before the first
    // required one, or the first required one; with none required, also an extra or nothing.
    std::vector<std::string> firsts;
    bool any_required = false;
    for (size_t i = 0; i < n; ++i) {
      if (!members[i].empty()) firsts.push_back(members[i] + (after[i + 1].empty() ? "" : " " + after[i + 1]));
      if (must[i]) {
        any_required = true;
        break;
      }
    }
    if (!any_required) {
      if (!extra.empty()) firsts.push_back(extra + (after[n].empty() ? "" : " " + after[n]));
    }
    std::string body = firsts.empty() ? "" : alt(firsts);
    if (!any_required && !body.empty()) body = (firsts.size() > 1 ? body : "( " + body + " )") + "?";
    return "\"{\" " + use("ws") + " " + (body.empty() ? "" : body + " ") + "\"}\"";
  }

  // A key (canonically spelled, quoted) other than those declared: a trie of the declared keys,
  // leaving it at any character that no declared key continues with.
  std::string other_key(const std::set<std::string>& declared, const std::string& path) {
    struct Node {
      std::map<char32_t, size_t> children;
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& key : declared) {
      size_t at = 0;
      for (size_t i = 0; i < key.size();) {
        const size_t len = utf8::char_length(key, i);
        const char32_t c = utf8::decode(key, i, len);
        i += len;
        auto it = trie[at].children.find(c);
        if (it == trie[at].children.end()) {
          trie.emplace_back();
          it = trie[at].children.emplace(c, trie.size() - 1).first;
        }
        at = it->second;
      }
      trie[at].terminal = true;
    }
    const std::string any = use("cchar");
    const std::string close = "\"\\\"\"";
    std::vector<std::string> names(trie.size());
    for (size_t i = trie.size(); i-- > 0;) {
      const Node& node = trie[i];
      std::vector<std::string> parts;
      if (!node.terminal) parts.push_back(close);
      CodeSet next;
      for (const auto& [c, child] : node.children) {
        parts.push_back(json_chars({{c, c}}) + " " + names[child]);
        next.emplace_back(c, c);
      }
      const std::string leave = json_chars(complement_set(next));
      if (!leave.empty()) parts.push_back(leave + " " + any + "* " + close);
      names[i] = rule(fmt::format("{}/key{}", path, i), alt(parts));
    }
    return "\"\\\"\" " + names[0];
  }

  // oneOf compiles as anyOf only where no value can match two branches.
  void check_disjoint(const Json& list, const std::string& path) {
    std::vector<unsigned> types;
    for (const Json& b : list) types.push_back(possible_types(b, 0));
    bool disjoint = true;
    for (size_t i = 0; i < types.size() && disjoint; ++i)
      for (size_t j = i + 1; j < types.size() && disjoint; ++j) disjoint = (types[i] & types[j]) == 0;
    if (disjoint || discriminated(list)) return;
    unsupported(path, "'oneOf' whose branches may match the same value is not supported (only branches of different "
                      "types, or objects told apart by a required property with distinct 'const' values)");
  }

  const Json& deref(const Json& s, int hops) {
    if (hops < 16 && s.is_object() && s.contains("$ref") && s["$ref"].is_string()) {
      const std::string r = s["$ref"].get<std::string>();
      if (!r.empty() && r[0] == '#') return deref(resolve(r, ""), hops + 1);
    }
    return s;
  }

  // The JSON types a schema may match (a safe over-estimate).
  unsigned possible_types(const Json& raw, int hops) {
    const Json& s = deref(raw, 0);
    if (hops > 16) return kAll;
    if (s.is_boolean()) return s.get<bool>() ? static_cast<unsigned>(kAll) : 0u;
    if (!s.is_object()) return kAll;
    unsigned t = kAll;
    if (s.contains("type")) {
      t = 0;
      if (s["type"].is_string())
        t = type_bits(s["type"].get<std::string>(), "");
      else if (s["type"].is_array())
        for (const Json& n : s["type"])
          if (n.is_string()) t |= type_bits(n.get<std::string>(), "");
    }
    if (s.contains("enum") && s["enum"].is_array()) {
      unsigned e = 0;
      for (const Json& v : s["enum"]) e |= type_of_value(v);
      t &= e;
    }
    if (s.contains("const")) t &= type_of_value(s["const"]);
    for (const char* comb : {"anyOf", "oneOf"})
      if (s.contains(comb) && s[comb].is_array()) {
        unsigned u = 0;
        for (const Json& b : s[comb]) u |= possible_types(b, hops + 1);
        t &= u;
      }
    if (s.contains("allOf") && s["allOf"].is_array())
      for (const Json& b : s["allOf"]) t &= possible_types(b, hops + 1);
    return t;
  }

  // Every branch an object that requires one property whose const (or enum) values differ.
  bool discriminated(const Json& list) {
    std::vector<const Json*> branches;
    for (const Json& b : list) {
      const Json& s = deref(b, 0);
      if (!s.is_object() || possible_types(s, 0) != kObject || !s.contains("properties") || !s.contains("required"))
        return false;
      branches.push_back(&s);
    }
    for (const auto& [key, v] : (*branches[0])["properties"].items()) {
      std::vector<std::set<std::string>> values;
      bool ok = true;
      for (const Json* s : branches) {
        const Json& req = (*s)["required"];
        const Json& props = (*s)["properties"];
        if (!req.is_array() || std::find(req.begin(), req.end(), Json(key)) == req.end() || !props.is_object() ||
            !props.contains(key)) {
          ok = false;
          break;
        }
        const Json& p = deref(props[key], 0);
        std::set<std::string> vals;
        if (p.is_object() && p.contains("const"))
          vals.insert(canonical_json(p["const"]));
        else if (p.is_object() && p.contains("enum") && p["enum"].is_array())
          for (const Json& e : p["enum"]) vals.insert(canonical_json(e));
        else
          ok = false;
        if (!ok) break;
        values.push_back(std::move(vals));
      }
      if (!ok) continue;
      bool disjoint = true;
      for (size_t i = 0; i < values.size() && disjoint; ++i)
        for (size_t j = i + 1; j < values.size() && disjoint; ++j)
          for (const auto& val : values[i]) disjoint &= !values[j].contains(val);
      if (disjoint) return true;
    }
    return false;
  }

  const Json* root_ = nullptr;
  JsonSchemaOptions options_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_ = {"root", "ws", "hex", "char", "cchar", "string", "integer", "number", "boolean",
                                  "null", "value", "date", "uuid"};
  std::set<std::string> used_;
  std::map<std::string, Expr> refs_;
  std::set<std::string> in_progress_;
  std::map<std::string, std::string> pending_;
};

// The deepest nesting of [ and { in JSON text (strings skipped), without parsing it.
size_t nesting(std::string_view text) {
  size_t depth = 0, most = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      most = std::max(most, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return most;
}

}  // namespace

std::string canonical_json(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return canonical_number(v);
    case Json::value_t::string: return v.dump();
    case Json::value_t::array: {
      std::string out = "[";
      for (const Json& e : v) out += (out.size() > 1 ? "," : "") + canonical_json(e);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      for (const auto& [k, e] : v.items()) out += (out.size() > 1 ? "," : "") + Json(k).dump() + ":" + canonical_json(e);
      return out + "}";
    }
    default: return v.dump();
  }
}

std::string any_json_gbnf(const JsonSchemaOptions& options) {
  Compiler c(options);
  const Json any = true;
  return c.finish(c.add(any));
}

std::string json_schemas_gbnf(const std::vector<std::pair<std::string, const nlohmann::ordered_json*>>& schemas,
                              const std::function<std::string(const std::vector<std::string>&)>& root,
                              const JsonSchemaOptions& options) {
  Compiler c(options);
  std::vector<std::string> names;
  for (const auto& [label, schema] : schemas) {
    const std::string name = c.fresh_name(fmt::format("schema{}", names.size()));
    try {
      c.add_rule(name, c.add(*schema));
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("{}: {}", label, e.what()));
    }
    names.push_back(name);
  }
  return c.finish(root(names));
}

}  // namespace grammar

std::string json_schema_to_gbnf(std::string_view schema, const JsonSchemaOptions& options) {
  using grammar::kMaxSchemaBytes;
  if (schema.size() > kMaxSchemaBytes)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("JSON schema: {} bytes is more than the limit of {}", schema.size(), kMaxSchemaBytes));
  if (grammar::nesting(schema) > 2 * static_cast<size_t>(grammar::kMaxSchemaDepth) + 8)
    throw Error(ErrorKind::Unsupported, fmt::format("JSON schema: nested deeper than {} subschemas", grammar::kMaxSchemaDepth));
  nlohmann::ordered_json root;
  try {
    root = nlohmann::ordered_json::parse(schema);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorKind::InvalidArgument, fmt::format("JSON schema: not valid JSON: {}", e.what()));
  }
  grammar::Compiler c(options);
  return c.finish(c.add(root));
}

}  // namespace kvinfer
