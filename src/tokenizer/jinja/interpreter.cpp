#include "tokenizer/jinja/interpreter.h"

#include <unordered_map>

#include "kvinfer/error.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {
namespace {

Error located(int line, const std::string& message) {
  return Error(message.starts_with("unsupported") ? ErrorKind::Unsupported : ErrorKind::InvalidArgument, "chat template line " + std::to_string(line) + ": " + message);
}

// What a value weighs in the work budget: the bytes or items an operation produced or read.
uint64_t size_of(const Value& v) {
  switch (v.kind()) {
    case Kind::String: return v.str().size();
    case Kind::Sequence: return v.seq().items.size();
    case Kind::Dict: return v.dict().size();
    default: return 0;
  }
}

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits) : limits_(limits) {
    for (const char* name : {"range", "namespace", "dict", "raise_exception", "strftime_now"}) {
      globals_.emplace(name, *global_function(name));
    }
  }

  std::string run(const Body& body, const Variables& variables) {
    scopes_.emplace_back();
    for (const auto& [name, value] : variables) scopes_.back()[name] = value;
    std::string out;
    out_ = &out;
    exec_body(body);
    return out;
  }

 private:
  enum class Flow { Normal, Break, Continue };
  using Scope = std::unordered_map<std::string, Value>;

  void charge(uint64_t units) {
    work_ += units;
    if (work_ > limits_.max_work) {
      throw EvalError("the template exceeded its work budget (" + std::to_string(limits_.max_work) + " steps)");
    }
  }

  void write(const std::string& text) {
    if (out_->size() + text.size() > limits_.max_output_bytes) {
      throw EvalError("the rendered output exceeds the limit of " + std::to_string(limits_.max_output_bytes) + " bytes");
    }
    charge(text.size());
    out_->append(text);
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (auto found = it->find(name); found != it->end()) return found->second;
    }
    if (auto g = globals_.find(name); g != globals_.end()) return g->second;
    return Value::undefined("'" + name + "' is undefined");
  }

  void assign(const Stmt& s, Value value) {
    if (!s.attr.empty()) {
      const Value target = lookup(s.targets[0]);
      if (target.kind() != Kind::Object || target.object().type != Object::Type::Namespace) {
        throw EvalError("cannot assign attribute on non-namespace object");
      }
      if (s.attr[0] == '_') {
        throw EvalError("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" + s.attr + "'");
      }
      target.object().attrs.set(Value::string(s.attr), std::move(value));
      return;
    }
    bind(s.targets, s.unpack, std::move(value), scopes_.back());
  }

  static void bind(const std::vector<std::string>& names, bool unpack, Value value, Scope& scope) {
    if (!unpack) {
      scope[names[0]] = std::move(value);
      return;
    }
    ValueList parts = iterate(value);
    if (parts.size() != names.size()) {
      throw EvalError(parts.size() > names.size()
                          ? "too many values to unpack (expected " + std::to_string(names.size()) + ")"
                          : "not enough values to unpack (expected " + std::to_string(names.size()) + ", got " +
                                std::to_string(parts.size()) + ")");
    }
    for (size_t i = 0; i < names.size(); ++i) scope[names[i]] = std::move(parts[i]);
  }

  Flow exec_body(const Body& body) {
    for (const auto& s : body) {
      if (Flow f = exec(*s); f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s) {
    try {
      return exec_statement(s);
    } catch (const EvalError& e) {
      throw located(s.line, e.what());
    }
  }

  Flow exec_statement(const Stmt& s) {
    charge(1);
    switch (s.kind) {
      case StmtKind::Output: write(s.text); return Flow::Normal;
      case StmtKind::Print:
        for (const auto& e : s.exprs) write(to_str(eval(*e)));
        return Flow::Normal;
      case StmtKind::If:
        for (size_t i = 0; i < s.exprs.size(); ++i) {
          if (truthy(eval(*s.exprs[i]))) return exec_body(s.bodies[i]);
        }
        return exec_body(s.bodies.back());
      case StmtKind::For: return exec_for(s);
      case StmtKind::Set: assign(s, eval(*s.exprs[0])); return Flow::Normal;
      case StmtKind::SetBlock: {
        std::string captured;
        std::string* outer = out_;
        out_ = &captured;
        const Flow f = exec_body(s.bodies[0]);
        out_ = outer;
        Value value = Value::string(std::move(captured));
        for (const auto& filter : s.exprs) value = apply_filter(filter->name, value, call_args(*filter, 1));
        assign(s, std::move(value));
        return f;
      }
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
      case StmtKind::Block: return exec_body(s.bodies[0]);
    }
    return Flow::Normal;
  }

  void count_iteration() {
    if (++iterations_ > limits_.max_loop_iterations) {
      throw EvalError("loops ran more than " + std::to_string(limits_.max_loop_iterations) + " iterations");
    }
  }

  Flow exec_for(const Stmt& s) {
    ValueList items = iterate(eval(*s.exprs[0]));
    charge(items.size());
    if (s.exprs[1]) {  // for x in xs if cond: the condition sees the loop variables, not `loop`
      ValueList kept;
      for (auto& item : items) {
        count_iteration();
        scopes_.emplace_back();
        bind(s.targets, s.unpack, item, scopes_.back());
        const bool keep = truthy(eval(*s.exprs[1]));
        scopes_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    auto loop = std::make_shared<Object>();
    loop->type = Object::Type::Loop;
    auto seq = std::make_shared<Sequence>();
    seq->items = std::move(items);
    loop->items = seq;
    const Value loop_value = Value::object(loop);
    // jinja2 clears its "no iteration" flag at the end of an iteration's body, so the else body
    // also runs when every iteration ended in break or continue.
    bool completed_any = false;
    for (size_t i = 0; i < seq->items.size(); ++i) {
      count_iteration();
      loop->index0 = i;
      // Each iteration gets a fresh scope: a {% set %} inside the body never outlives it.
      scopes_.emplace_back();
      bind(s.targets, s.unpack, seq->items[i], scopes_.back());
      scopes_.back()["loop"] = loop_value;
      const Flow f = exec_body(s.bodies[0]);
      scopes_.pop_back();
      if (f == Flow::Break) break;
      completed_any = completed_any || f == Flow::Normal;
    }
    if (completed_any) return Flow::Normal;
    scopes_.emplace_back();  // the else body, in its own scope as well
    const Flow f = exec_body(s.bodies[1]);
    scopes_.pop_back();
    return f;
  }

  CallArgs call_args(const Expr& e, size_t first) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
    for (const auto& [name, value] : e.kwargs) args.keyword.emplace_back(name, eval(*value));
    return args;
  }

  Value eval(const Expr& e) {
    try {
      charge(1);
      return eval_expr(e);
    } catch (const EvalError& err) {
      throw located(e.line, err.what());
    }
  }

  Value eval_expr(const Expr& e) {
    switch (e.kind) {
      case ExprKind::Literal: return e.value;
      case ExprKind::Name: return lookup(e.name);
      case ExprKind::List:
      case ExprKind::Tuple: {
        ValueList items;
        for (const auto& a : e.args) items.push_back(eval(*a));
        return Value::sequence(std::move(items), e.kind == ExprKind::List ? SeqKind::List : SeqKind::Tuple);
      }
      case ExprKind::Dict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value key = eval(*e.args[i]);
          d.set(key, eval(*e.args[i + 1]));
        }
        return Value::dict(std::move(d));
      }
      case ExprKind::Attr: {
        const Value obj = eval(*e.args[0]);
        Value v = get_attr(obj, e.name);
        if (v.kind() == Kind::Function) charge(size_of(obj));  // a bound method will read its receiver
        return v;
      }
      case ExprKind::Item: {
        const Value obj = eval(*e.args[0]);
        return get_item(obj, eval(*e.args[1]));
      }
      case ExprKind::Slice: {
        const Value obj = eval(*e.args[0]);
        auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i]) : Value::none(); };
        const Value start = part(1), stop = part(2), step = part(3);
        return charged(get_slice(obj, start, stop, step));
      }
      case ExprKind::Call: return charged(call(e));
      case ExprKind::Filter: {
        const Value v = eval(*e.args[0]);
        charge(size_of(v));
        return charged(apply_filter(e.name, v, call_args(e, 1)));
      }
      case ExprKind::Test: {
        const Value v = eval(*e.args[0]);
        return Value::boolean(apply_test(e.name, v, call_args(e, 1)) != e.negated);
      }
      case ExprKind::Neg: return negate(eval(*e.args[0]));
      case ExprKind::Pos: return unary_plus(eval(*e.args[0]));
      case ExprKind::Not: return Value::boolean(!truthy(eval(*e.args[0])));
      case ExprKind::And: {
        Value left = eval(*e.args[0]);
        return truthy(left) ? eval(*e.args[1]) : left;
      }
      case ExprKind::Or: {
        Value left = eval(*e.args[0]);
        return truthy(left) ? left : eval(*e.args[1]);
      }
      case ExprKind::Binary: {
        const Value left = eval(*e.args[0]);
        const Value right = eval(*e.args[1]);
        return charged(binary(static_cast<BinOp>(e.op), left, right));
      }
      case ExprKind::Concat: {
        std::string out;
        for (const auto& a : e.args) {
          out += to_str(eval(*a));
          check_string_size(out.size());
        }
        return charged(Value::string(std::move(out)));
      }
      case ExprKind::Compare: return compare_chain(e);
      case ExprKind::CondExpr:
        if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
        if (e.args[2]) return eval(*e.args[2]);
        return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
    }
    return Value();
  }

  Value charged(Value v) {
    charge(size_of(v));
    return v;
  }

  Value call(const Expr& e) {
    const Value callee = eval(*e.args[0]);
    CallArgs args = call_args(e, 1);
    for (const auto& a : args.positional) charge(size_of(a));
    if (callee.is_undefined()) fail_undefined(callee);
    if (callee.kind() != Kind::Function) throw EvalError("'" + type_name(callee) + "' object is not callable");
    return callee.function().call(args);
  }

  Value compare_chain(const Expr& e) {
    Value left = eval(*e.args[0]);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.args[i + 1]);
      charge(size_of(left) + size_of(right));
      bool ok = false;
      switch (e.ops[i]) {
        case CompareOp::Eq: ok = compare(left, CmpOp::Eq, right); break;
        case CompareOp::Ne: ok = compare(left, CmpOp::Ne, right); break;
        case CompareOp::Lt: ok = compare(left, CmpOp::Lt, right); break;
        case CompareOp::Le: ok = compare(left, CmpOp::Le, right); break;
        case CompareOp::Gt: ok = compare(left, CmpOp::Gt, right); break;
        case CompareOp::Ge: ok = compare(left, CmpOp::Ge, right); break;
        case CompareOp::In: ok = contains(right, left); break;
        case CompareOp::NotIn: ok = !contains(right, left); break;
      }
      if (!ok) return Value::boolean(false);
      left = std::move(right);
    }
    return Value::boolean(true);
  }

  const RenderLimits& limits_;
  std::unordered_map<std::string, Value> globals_;
  std::vector<Scope> scopes_;
  std::string* out_ = nullptr;
  uint64_t iterations_ = 0;
  uint64_t work_ = 0;
};

}  // namespace

std::string render(const Body& body, const Variables& variables, const RenderLimits& limits) {
  return Interpreter(limits).run(body, variables);
}

}  // namespace kvinfer::jinja
