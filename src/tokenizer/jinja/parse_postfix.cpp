// Postfix expressions: x.attr, x[key], x[a:b:c], calls f(a, k=v), filters x|f(...) and tests
// x is [not] t(...), with jinja2's rule that a test takes one bare argument without parentheses.
#include <string>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser.h"

namespace kvinfer::jinja {

ExprPtr Parser::parse_call(ExprPtr callee) {
  std::vector<ExprPtr> args;
  const int line = cur().line;
  args.push_back(std::move(callee));
  ExprPtr call = node(ExprKind::Call, line, std::move(args));
  parse_call_args(*call);
  return call;
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      e = parse_filter(std::move(e), false);
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr e) {
  const Token& t = next();
  const int line = t.line;
  std::vector<ExprPtr> args;
  args.push_back(std::move(e));
  if (t.text == ".") {
    if (cur().type == TokenType::Name) {
      ExprPtr attr = node(ExprKind::Attr, line, std::move(args));
      attr->name = next().text;
      return attr;
    }
    if (cur().type != TokenType::Integer) fail("expected name or number");
    ExprPtr index = node(ExprKind::Literal, line);
    index->value = Value::integer(next().integer);
    args.push_back(std::move(index));
    return node(ExprKind::Item, line, std::move(args));
  }
  std::vector<ExprPtr> keys;
  while (!is_op("]")) {
    if (!keys.empty()) expect_op(",");
    keys.push_back(parse_subscribed());
  }
  expect_op("]");
  if (keys.size() == 1 && keys[0]->kind == ExprKind::Slice) {
    ExprPtr slice = std::move(keys[0]);
    args.insert(args.end(), std::make_move_iterator(slice->args.begin()), std::make_move_iterator(slice->args.end()));
    return node(ExprKind::Slice, line, std::move(args));
  }
  for (const auto& k : keys) {
    if (k->kind == ExprKind::Slice) fail("unsupported: a slice inside a tuple subscript");
  }
  args.push_back(keys.size() == 1 ? std::move(keys[0]) : node(ExprKind::Tuple, line, std::move(keys)));
  return node(ExprKind::Item, line, std::move(args));
}

// One subscript: an expression or a slice start:stop:step (a Slice node holding the three).
ExprPtr Parser::parse_subscribed() {
  const int line = cur().line;
  std::vector<ExprPtr> parts;
  if (skip_op(":")) {
    parts.push_back(nullptr);
  } else {
    ExprPtr e = parse_expression();
    if (!skip_op(":")) return e;
    parts.push_back(std::move(e));
  }
  const bool at_end = is_op("]") || is_op(",");
  parts.push_back(is_op(":") || at_end ? nullptr : parse_expression());
  if (skip_op(":")) {
    parts.push_back(is_op("]") || is_op(",") ? nullptr : parse_expression());
  } else {
    parts.push_back(nullptr);
  }
  return node(ExprKind::Slice, line, std::move(parts));
}

void Parser::parse_call_args(Expr& call) {
  expect_op("(");
  bool require_comma = false;
  while (!is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) fail("unsupported: *args / **kwargs in calls");
    if (cur().type == TokenType::Name && look().type == TokenType::Operator && look().text == "=") {
      std::string key = next().text;
      next();  // =
      call.kwargs.emplace_back(std::move(key), parse_expression());
      call.depth = std::max(call.depth, call.kwargs.back().second->depth + 1);
    } else {
      if (!call.kwargs.empty()) fail("invalid syntax for function call expression (positional after keyword)");
      call.args.push_back(parse_expression());
      call.depth = std::max(call.depth, call.args.back()->depth + 1);
    }
    require_comma = true;
  }
  expect_op(")");
  if (call.depth > kMaxNesting) fail_at(call.line, "expression nested deeper than " + std::to_string(kMaxNesting) + " levels");
}

ExprPtr Parser::parse_filter(ExprPtr e, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const int line = cur().line;
    std::string name = expect_identifier();
    while (skip_op(".")) name = cat({name, ".", expect_identifier()});
    if (!is_filter(name)) fail_at(line, "unsupported filter '" + name + "' (not in kvinfer's chat template subset)");
    std::vector<ExprPtr> args;
    args.push_back(std::move(e));
    e = node(ExprKind::Filter, line, std::move(args));
    e->name = name;
    if (is_op("(")) parse_call_args(*e);
  }
  return e;
}

ExprPtr Parser::parse_test(ExprPtr e) {
  const int line = next().line;  // is
  const bool negated = skip_name("not");
  std::string name = expect_identifier();
  while (skip_op(".")) name = cat({name, ".", expect_identifier()});
  if (!is_test(name)) fail_at(line, "unsupported test '" + name + "' (not in kvinfer's chat template subset)");
  std::vector<ExprPtr> args;
  args.push_back(std::move(e));
  ExprPtr test = node(ExprKind::Test, line, std::move(args));
  test->name = name;
  test->negated = negated;
  const Token& t = cur();
  const bool arg_start = t.type == TokenType::Name || t.type == TokenType::String || t.type == TokenType::Integer ||
                         t.type == TokenType::Float || is_op("[") || is_op("{");
  if (is_op("(")) {
    parse_call_args(*test);
  } else if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail("You cannot chain multiple tests with is");
    ExprPtr arg = parse_postfix(parse_primary());
    test->depth = std::max(test->depth, arg->depth + 1);
    test->args.push_back(std::move(arg));
  }
  return test;
}

}  // namespace kvinfer::jinja
