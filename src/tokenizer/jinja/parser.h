#pragma once
// Recursive-descent parser over lexer tokens, following jinja2's parser.py rule for rule (the
// same precedence, the same implicit tuples, the same quirks such as `-x|f` being (-x)|f).
#include <initializer_list>
#include <string>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace kvinfer::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}
  Body parse();

 private:
  friend class DepthGuard;

  // Tokens.
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::Name && cur().text == name; }
  bool skip_op(const char* op);
  bool skip_name(const char* name);
  void expect_op(const char* op);
  void expect_name(const char* name);
  std::string expect_identifier();
  void expect_block_end();
  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void fail_at(int line, const std::string& message) const;
  static std::string describe(const Token& t);
  ExprPtr node(ExprKind kind, int line, std::vector<ExprPtr> args = {});

  // Statements (parse_stmt.cpp).
  Body subparse(std::initializer_list<const char*> end_tags);
  Body parse_statements(std::initializer_list<const char*> end_tags, bool drop_needle);
  std::unique_ptr<Stmt> parse_statement();
  std::unique_ptr<Stmt> parse_if(int line);
  std::unique_ptr<Stmt> parse_for(int line);
  std::unique_ptr<Stmt> parse_set(int line);
  void parse_assign_target(Stmt& stmt, bool with_namespace, const char* end_name);

  // Expressions (parse_expr.cpp).
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const char* extra_end, bool explicit_parentheses);
  bool is_tuple_end(const char* extra_end) const;
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_call(ExprPtr callee);  // callee(args...): a Call node, arguments parsed
  void parse_call_args(Expr& call);
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

// Counts one level of parser recursion; past kMaxNesting the template is rejected.
class DepthGuard {
 public:
  explicit DepthGuard(Parser& p) : p_(p) {
    if (++p_.depth_ > kMaxNesting) p_.fail("nesting deeper than " + std::to_string(kMaxNesting) + " levels");
  }
  ~DepthGuard() { --p_.depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  Parser& p_;
};

}  // namespace kvinfer::jinja
