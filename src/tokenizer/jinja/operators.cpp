// Python's operators on template values: ==, ordering, `in`, arithmetic and ~.
#include <cmath>
#include <limits>
#include <string>

#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {
namespace {

constexpr long long kExactDoubleInt = 1LL << 53;

bool is_list_or_tuple(const Value& v) {
  return v.is_seq(SeqKind::List) || v.is_seq(SeqKind::Tuple);
}

// int == float exactly, as Python does (no rounding of the int).
bool number_equals(const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
  return static_cast<long double>(a.is_int() ? static_cast<long double>(a.as_int()) : a.as_float()) ==
         static_cast<long double>(b.is_int() ? static_cast<long double>(b.as_int()) : b.as_float());
}

long double as_long_double(const Value& v) {
  return v.is_int() ? static_cast<long double>(v.as_int()) : static_cast<long double>(v.as_float());
}

bool equals_at(const Value& a, const Value& b, int depth);

bool items_equal(const ValueList& x, const ValueList& y, int depth) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!equals_at(x[i], y[i], depth + 1)) return false;
  }
  return true;
}

bool equals_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) throw EvalError("value nested too deeply to compare");
  if (a.is_number() && b.is_number()) return number_equals(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.str() == b.str();
    case Kind::Dict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict().entries()) {
        const Value* other = b.dict().find(k);
        if (other == nullptr || !equals_at(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Kind::Sequence: {
      const SeqKind ka = a.seq().kind, kb = b.seq().kind;
      if (ka != kb || ka == SeqKind::Iterator || ka == SeqKind::ValuesView) return a.identity() == b.identity();
      if (ka == SeqKind::KeysView || ka == SeqKind::ItemsView) {  // set-like
        if (a.seq().items.size() != b.seq().items.size()) return false;
        for (const auto& x : a.seq().items) {
          if (!contains(b, x)) return false;
        }
        return true;
      }
      return items_equal(a.seq().items, b.seq().items, depth);
    }
    default: return a.identity() == b.identity();
  }
}

const char* op_text(CmpOp op) {
  switch (op) {
    case CmpOp::Eq: return "==";
    case CmpOp::Ne: return "!=";
    case CmpOp::Lt: return "<";
    case CmpOp::Le: return "<=";
    case CmpOp::Gt: return ">";
    case CmpOp::Ge: return ">=";
  }
  return "?";
}

template <typename T>
bool ordered(const T& x, CmpOp op, const T& y) {
  switch (op) {
    case CmpOp::Lt: return x < y;
    case CmpOp::Le: return x <= y;
    case CmpOp::Gt: return x > y;
    case CmpOp::Ge: return x >= y;
    case CmpOp::Eq: return x == y;
    case CmpOp::Ne: return x != y;
  }
  return false;
}

[[noreturn]] void unsupported_operands(const char* op, const Value& a, const Value& b) {
  throw EvalError(std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) +
                  "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() { throw EvalError("integer overflow (kvinfer's integers are 64-bit)"); }

int64_t add_int(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

int64_t sub_int(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}

int64_t mul_int(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

int64_t int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = mul_int(result, base);
    exp >>= 1;
    if (exp > 0) base = mul_int(base, base);
  }
  return result;
}

// CPython's float_divmod: the quotient and remainder that floor division and % return.
void float_divmod(double vx, double wx, double* floordiv, double* mod) {
  double m = std::fmod(vx, wx);
  double div = (vx - m) / wx;
  if (m != 0.0) {
    if ((wx < 0) != (m < 0)) {
      m += wx;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, wx);
  }
  double fd;
  if (div != 0.0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, vx / wx);
  }
  *floordiv = fd;
  *mod = m;
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    if (n <= 0 || seq.str().empty()) return Value::string("");
    check_string_size(seq.str().size() * static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 40)));
    std::string out;
    out.reserve(seq.str().size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::string(std::move(out));
  }
  const ValueList& items = seq.seq().items;
  if (n <= 0 || items.empty()) return Value::sequence(ValueList{}, seq.seq().kind);
  check_sequence_size(items.size() * static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 40)));
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::sequence(std::move(out), seq.seq().kind);
}

}  // namespace

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

bool compare(const Value& a, CmpOp op, const Value& b) {
  if (op == CmpOp::Eq) return equals(a, b);
  if (op == CmpOp::Ne) return !equals(a, b);
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return ordered(a.as_int(), op, b.as_int());
    return ordered(as_long_double(a), op, as_long_double(b));
  }
  if (a.is_string() && b.is_string()) return ordered(a.str(), op, b.str());  // UTF-8 order = code point order
  if (is_list_or_tuple(a) && is_list_or_tuple(b) && a.seq().kind == b.seq().kind) {
    // Lexicographic: the first unequal pair decides, else the lengths.
    const ValueList& x = a.seq().items;
    const ValueList& y = b.seq().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return compare(x[i], op, y[i]);
    }
    return ordered(x.size(), op, y.size());
  }
  throw EvalError(std::string("'") + op_text(op) + "' not supported between instances of '" +
                  type_name(a) + "' and '" + type_name(b) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined: return false;
    case Kind::String:
      if (!item.is_string()) {
        throw EvalError("'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::Dict: return container.dict().find(item) != nullptr;
    case Kind::Sequence: {
      Sequence& s = container.seq();
      if (s.kind == SeqKind::Iterator) {  // consumes up to and including the match
        while (s.cursor < s.items.size()) {
          if (equals(s.items[s.cursor++], item)) return true;
        }
        if (!s.error.empty()) throw EvalError(s.error);
        return false;
      }
      for (const auto& x : s.items) {
        if (equals(x, item)) return true;
      }
      return false;
    }
    default: throw EvalError("argument of type '" + type_name(container) + "' is not iterable");
  }
}

Value binary(BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool ints = a.is_int() && b.is_int();
  const bool numbers = a.is_number() && b.is_number();
  switch (op) {
    case BinOp::Add:
      if (ints) return Value::integer(add_int(a.as_int(), b.as_int()));
      if (numbers) return Value::number(a.as_float() + b.as_float());
      if (a.is_string() && b.is_string()) {
        check_string_size(a.str().size() + b.str().size());
        return Value::string(a.str() + b.str());
      }
      if (is_list_or_tuple(a) && is_list_or_tuple(b) && a.seq().kind == b.seq().kind) {
        ValueList items = a.seq().items;
        check_sequence_size(items.size() + b.seq().items.size());
        items.insert(items.end(), b.seq().items.begin(), b.seq().items.end());
        return Value::sequence(std::move(items), a.seq().kind);
      }
      unsupported_operands("+", a, b);
    case BinOp::Sub:
      if (ints) return Value::integer(sub_int(a.as_int(), b.as_int()));
      if (numbers) return Value::number(a.as_float() - b.as_float());
      unsupported_operands("-", a, b);
    case BinOp::Mul:
      if (ints) return Value::integer(mul_int(a.as_int(), b.as_int()));
      if (numbers) return Value::number(a.as_float() * b.as_float());
      if ((a.is_string() || is_list_or_tuple(a)) && b.is_int()) return repeat(a, b.as_int());
      if (a.is_int() && (b.is_string() || is_list_or_tuple(b))) return repeat(b, a.as_int());
      unsupported_operands("*", a, b);
    case BinOp::Div:
      if (!numbers) unsupported_operands("/", a, b);
      if (b.as_float() == 0.0) throw EvalError("division by zero");
      if (ints && std::llabs(a.as_int()) > kExactDoubleInt) {
        // Past 2^53 the int does not convert exactly; long double (64-bit mantissa) holds it.
        return Value::number(static_cast<double>(static_cast<long double>(a.as_int()) /
                                                 static_cast<long double>(b.as_int())));
      }
      return Value::number(a.as_float() / b.as_float());
    case BinOp::FloorDiv:
    case BinOp::Mod: {
      const char* text = op == BinOp::Mod ? "%" : "//";
      if (op == BinOp::Mod && a.is_string()) {
        throw EvalError("unsupported: string % formatting (printf-style) is outside kvinfer's subset");
      }
      if (!numbers) unsupported_operands(text, a, b);
      if (b.as_float() == 0.0) {
        throw EvalError(op == BinOp::Mod ? "integer modulo by zero" : "integer division or modulo by zero");
      }
      if (ints) {
        const int64_t x = a.as_int(), y = b.as_int();
        if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow();
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {  // Python rounds toward negative infinity
          q -= 1;
          m += y;
        }
        return Value::integer(op == BinOp::Mod ? m : q);
      }
      double fd = 0, m = 0;
      float_divmod(a.as_float(), b.as_float(), &fd, &m);
      return Value::number(op == BinOp::Mod ? m : fd);
    }
    case BinOp::Pow: {
      if (!numbers) unsupported_operands("** or pow()", a, b);
      if (ints && b.as_int() >= 0) return Value::integer(int_pow(a.as_int(), b.as_int()));
      const double x = a.as_float(), y = b.as_float();
      if (x == 0.0 && y < 0) throw EvalError("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) throw EvalError("unsupported: a negative number to a fractional power is complex");
      const double r = std::pow(x, y);
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) throw EvalError("(34, 'Numerical result out of range')");
      return Value::number(r);
    }
  }
  unsupported_operands("?", a, b);
}

Value concat(const Value& a, const Value& b) {
  std::string sa = to_str(a);
  const std::string sb = to_str(b);
  check_string_size(sa.size() + sb.size());
  return Value::string(sa + sb);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int()) return Value::integer(sub_int(0, v.as_int()));
  if (v.kind() == Kind::Float) return Value::number(-v.as_float());
  throw EvalError("bad operand type for unary -: '" + type_name(v) + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.kind() == Kind::Float) return v;
  throw EvalError("bad operand type for unary +: '" + type_name(v) + "'");
}

}  // namespace kvinfer::jinja
