// Expressions, with jinja2's precedence (lowest first): x if c else y, or, and, not, comparisons
// and in, + -, ~, * / // %, **, unary - +, then primary with . [] () and | filters / is tests.
#include <string>

#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/value_ops.h"

namespace kvinfer::jinja {

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

bool Parser::is_tuple_end(const char* extra_end) const {
  const TokenType t = cur().type;
  if (t == TokenType::VariableEnd || t == TokenType::BlockEnd || is_op(")")) return true;
  return extra_end != nullptr && is_name(extra_end);
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr, const char* extra_end, bool explicit_parentheses) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) fail("Expected an expression, got '" + describe(cur()) + "'");
  }
  return node(ExprKind::Tuple, line, std::move(items));
}

ExprPtr Parser::parse_condexpr() {
  const int line = cur().line;
  ExprPtr expr1 = parse_or();
  while (skip_name("if")) {
    ExprPtr cond = parse_or();
    ExprPtr otherwise;
    if (skip_name("else")) {
      DepthGuard guard(*this);
      otherwise = parse_condexpr();
    }
    std::vector<ExprPtr> args;
    args.push_back(std::move(cond));
    args.push_back(std::move(expr1));
    args.push_back(std::move(otherwise));
    expr1 = node(ExprKind::CondExpr, line, std::move(args));
  }
  return expr1;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const int line = next().line;
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_and());
    left = node(ExprKind::Or, line, std::move(args));
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const int line = next().line;
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_not());
    left = node(ExprKind::And, line, std::move(args));
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    const int line = next().line;
    DepthGuard guard(*this);
    std::vector<ExprPtr> args;
    args.push_back(parse_not());
    return node(ExprKind::Not, line, std::move(args));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  std::vector<ExprPtr> operands;
  std::vector<CompareOp> ops;
  static constexpr std::pair<const char*, CompareOp> kOps[] = {
      {"==", CompareOp::Eq}, {"!=", CompareOp::Ne}, {"<", CompareOp::Lt},
      {"<=", CompareOp::Le}, {">", CompareOp::Gt},  {">=", CompareOp::Ge},
  };
  while (true) {
    bool matched = false;
    for (const auto& [text, op] : kOps) {
      if (is_op(text)) {
        next();
        ops.push_back(op);
        matched = true;
        break;
      }
    }
    if (!matched) {
      if (skip_name("in")) {
        ops.push_back(CompareOp::In);
      } else if (is_name("not") && look().type == TokenType::Name && look().text == "in") {
        next();
        next();
        ops.push_back(CompareOp::NotIn);
      } else {
        break;
      }
    }
    operands.push_back(parse_math1());
  }
  if (ops.empty()) return first;
  operands.insert(operands.begin(), std::move(first));
  ExprPtr e = node(ExprKind::Compare, line, std::move(operands));
  e->ops = std::move(ops);
  return e;
}

namespace {

ExprPtr binary_node(ExprPtr e, BinOp op) {
  e->op = static_cast<int>(op);
  return e;
}

}  // namespace

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const BinOp op = cur().text == "+" ? BinOp::Add : BinOp::Sub;
    const int line = next().line;
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_concat());
    left = binary_node(node(ExprKind::Binary, line, std::move(args)), op);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const int line = cur().line;
  std::vector<ExprPtr> args;
  args.push_back(parse_math2());
  while (skip_op("~")) args.push_back(parse_math2());
  if (args.size() == 1) return std::move(args[0]);
  return node(ExprKind::Concat, line, std::move(args));
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const std::string text = cur().text;
    const BinOp op = text == "*" ? BinOp::Mul : text == "/" ? BinOp::Div : text == "//" ? BinOp::FloorDiv : BinOp::Mod;
    const int line = next().line;
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_pow());
    left = binary_node(node(ExprKind::Binary, line, std::move(args)), op);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary();
  while (is_op("**")) {  // left-associative in jinja2: 2 ** 3 ** 2 is 64
    const int line = next().line;
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_unary());
    left = binary_node(node(ExprKind::Binary, line, std::move(args)), BinOp::Pow);
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const ExprKind kind = cur().text == "-" ? ExprKind::Neg : ExprKind::Pos;
    const int line = next().line;
    DepthGuard guard(*this);
    std::vector<ExprPtr> args;
    args.push_back(parse_unary(false));
    e = node(kind, line, std::move(args));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  const int line = t.line;
  ExprPtr e;
  switch (t.type) {
    case TokenType::Name: {
      const std::string name = next().text;
      e = node(ExprKind::Literal, line);
      if (name == "true" || name == "True" || name == "false" || name == "False") {
        e->value = Value::boolean(name == "true" || name == "True");
      } else if (name == "none" || name == "None") {
        e->value = Value::none();
      } else {
        e->kind = ExprKind::Name;
        e->name = name;
      }
      return e;
    }
    case TokenType::String: {
      std::string text;
      while (cur().type == TokenType::String) text += next().text;  // "a" "b" is "ab"
      e = node(ExprKind::Literal, line);
      try {
        e->value = Value::string(std::move(text));
      } catch (const EvalError& err) {  // a literal past the string size limit
        fail_at(line, err.what());
      }
      return e;
    }
    case TokenType::Integer:
    case TokenType::Float: {
      const Token& n = next();
      e = node(ExprKind::Literal, line);
      e->value = n.type == TokenType::Integer ? Value::integer(n.integer) : Value::number(n.number);
      return e;
    }
    default: break;
  }
  if (skip_op("(")) {
    e = parse_tuple(false, true, nullptr, true);
    expect_op(")");
    return e;
  }
  if (is_op("[")) return parse_list();
  if (is_op("{")) return parse_dict();
  fail("unexpected '" + describe(t) + "'");
}

ExprPtr Parser::parse_list() {
  const int line = next().line;  // [
  std::vector<ExprPtr> items;
  while (!is_op("]")) {
    if (!items.empty()) expect_op(",");
    if (is_op("]")) break;
    items.push_back(parse_expression());
  }
  expect_op("]");
  return node(ExprKind::List, line, std::move(items));
}

ExprPtr Parser::parse_dict() {
  const int line = next().line;  // {
  std::vector<ExprPtr> items;
  while (!is_op("}")) {
    if (!items.empty()) expect_op(",");
    if (is_op("}")) break;
    items.push_back(parse_expression());
    expect_op(":");
    items.push_back(parse_expression());
  }
  expect_op("}");
  return node(ExprKind::Dict, line, std::move(items));
}

}  // namespace kvinfer::jinja
