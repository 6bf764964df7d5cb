// Statements: text, {{ }}, {% if/for/set/print/break/continue/generation %}, and the error for
// every other tag.
#include <algorithm>
#include <string>

#include "kvinfer/error.h"
#include "tokenizer/jinja/parser.h"

namespace kvinfer::jinja {
namespace {

// Tags jinja2 knows that kvinfer leaves out: a clear "unsupported" rather than a wrong render.
constexpr const char* kUnsupportedTags[] = {
    "macro", "call", "filter", "with", "include", "import", "from", "extends", "block",
    "autoescape", "do", "trans", "pluralize", "endmacro", "endcall", "endfilter", "endwith",
};

std::string join_tags(std::initializer_list<const char*> tags) {
  std::string out;
  for (const char* t : tags) out += (out.empty() ? "'" : " or '") + std::string(t) + "'";
  return out;
}

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

Body Parser::parse() { return subparse({}); }

bool Parser::skip_op(const char* op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(const char* name) {
  if (!is_name(name)) return false;
  next();
  return true;
}

void Parser::expect_op(const char* op) {
  if (!skip_op(op)) fail(std::string("expected token '") + op + "', got '" + describe(cur()) + "'");
}

void Parser::expect_name(const char* name) {
  if (!skip_name(name)) fail(std::string("expected token '") + name + "', got '" + describe(cur()) + "'");
}

std::string Parser::expect_identifier() {
  if (cur().type != TokenType::Name) fail("expected token 'name', got '" + describe(cur()) + "'");
  return next().text;
}

void Parser::expect_block_end() {
  if (cur().type != TokenType::BlockEnd) fail("expected token 'end of statement block', got '" + describe(cur()) + "'");
  next();
}

void Parser::fail(const std::string& message) const { fail_at(cur().line, message); }

void Parser::fail_at(int line, const std::string& message) const {
  throw Error(message.starts_with("unsupported") ? ErrorKind::Unsupported : ErrorKind::BadFile, "chat template line " + std::to_string(line) + ": " + message);
}

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case TokenType::Data: return "template data";
    case TokenType::VariableBegin: return "begin of print statement";
    case TokenType::VariableEnd: return "end of print statement";
    case TokenType::BlockBegin: return "begin of statement block";
    case TokenType::BlockEnd: return "end of statement block";
    case TokenType::String: return "string";
    case TokenType::Integer: return "integer";
    case TokenType::Float: return "float";
    case TokenType::Eof: return "end of template";
    default: return t.text;
  }
}

ExprPtr Parser::node(ExprKind kind, int line, std::vector<ExprPtr> args) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  for (const auto& a : args) {
    if (a) e->depth = std::max(e->depth, a->depth + 1);
  }
  // Left-deep chains (a + b + c ...) grow the tree without parser recursion; bound them too.
  if (e->depth > kMaxNesting) fail_at(line, "expression nested deeper than " + std::to_string(kMaxNesting) + " levels");
  e->args = std::move(args);
  return e;
}

Body Parser::subparse(std::initializer_list<const char*> end_tags) {
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == TokenType::Eof) {
      if (end_tags.size() > 0) fail("unexpected end of template; jinja2 was looking for " + join_tags(end_tags));
      return body;
    }
    if (t.type == TokenType::Data) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::Output;
      s->line = t.line;
      s->text = next().text;
      body.push_back(std::move(s));
    } else if (t.type == TokenType::VariableBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::Print;
      s->line = next().line;
      s->exprs.push_back(parse_tuple(false, true, nullptr, false));
      if (cur().type != TokenType::VariableEnd) fail("expected token 'end of print statement', got '" + describe(cur()) + "'");
      next();
      body.push_back(std::move(s));
    } else if (t.type == TokenType::BlockBegin) {
      next();
      for (const char* tag : end_tags) {
        if (is_name(tag)) return body;  // the caller consumes the end tag
      }
      body.push_back(parse_statement());
      expect_block_end();
    } else {
      fail("unexpected '" + describe(t) + "'");
    }
  }
}

Body Parser::parse_statements(std::initializer_list<const char*> end_tags, bool drop_needle) {
  skip_op(":");
  expect_block_end();
  Body body = subparse(end_tags);
  if (drop_needle) next();
  return body;
}

std::unique_ptr<Stmt> Parser::parse_statement() {
  DepthGuard guard(*this);
  if (cur().type != TokenType::Name) fail("tag name expected");
  const std::string tag = cur().text;
  const int line = cur().line;
  for (const char* u : kUnsupportedTags) {
    if (tag == u) fail("unsupported tag '{% " + tag + " %}' (outside kvinfer's chat template subset)");
  }
  if (tag == "if") return parse_if(line);
  if (tag == "for") return parse_for(line);
  if (tag == "set") return parse_set(line);
  next();
  auto s = std::make_unique<Stmt>();
  s->line = line;
  if (tag == "print") {
    s->kind = StmtKind::Print;
    while (cur().type != TokenType::BlockEnd) {
      if (!s->exprs.empty()) expect_op(",");
      s->exprs.push_back(parse_expression());
    }
    return s;
  }
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) fail_at(line, "'" + tag + "' outside loop");
    s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
    return s;
  }
  if (tag == "generation") {  // transformers' assistant-mask tag: renders its body unchanged
    s->kind = StmtKind::Block;
    s->bodies.push_back(parse_statements({"endgeneration"}, true));
    return s;
  }
  if (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif") {
    fail_at(line, "unexpected '{% " + tag + " %}': no open block here for it to close or continue");
  }
  fail_at(line, "unsupported tag '" + tag + "' (unknown to kvinfer's chat template subset)");
}

std::unique_ptr<Stmt> Parser::parse_if(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::If;
  s->line = line;
  next();  // if
  while (true) {
    s->exprs.push_back(parse_tuple(false, false, nullptr, false));
    s->bodies.push_back(parse_statements({"elif", "else", "endif"}, false));
    const std::string tag = next().text;
    if (tag == "elif") continue;
    s->bodies.push_back(tag == "else" ? parse_statements({"endif"}, true) : Body{});
    return s;
  }
}

std::unique_ptr<Stmt> Parser::parse_for(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::For;
  s->line = line;
  next();  // for
  parse_assign_target(*s, false, "in");
  expect_name("in");
  s->exprs.push_back(parse_tuple(false, false, "recursive", false));
  s->exprs.push_back(skip_name("if") ? parse_expression() : nullptr);
  if (is_name("recursive")) fail("unsupported: recursive for loops (outside kvinfer's chat template subset)");
  ++loop_depth_;
  s->bodies.push_back(parse_statements({"endfor", "else"}, false));
  --loop_depth_;
  const std::string tag = next().text;
  // The else body runs only when nothing was iterated: break/continue there leave no loop.
  s->bodies.push_back(tag == "else" ? parse_statements({"endfor"}, true) : Body{});
  return s;
}

std::unique_ptr<Stmt> Parser::parse_set(int line) {
  auto s = std::make_unique<Stmt>();
  s->line = line;
  next();  // set
  parse_assign_target(*s, true, nullptr);
  if (skip_op("=")) {
    s->kind = StmtKind::Set;
    s->exprs.push_back(parse_tuple(false, true, nullptr, false));
    return s;
  }
  s->kind = StmtKind::SetBlock;
  if (is_op("|")) {
    // Each filter of the chain is kept with a null input; the interpreter feeds the body in.
    ExprPtr chain = parse_filter(nullptr, false);
    std::vector<ExprPtr> filters;
    while (chain) {
      ExprPtr input = std::move(chain->args[0]);
      filters.push_back(std::move(chain));
      chain = std::move(input);
    }
    std::reverse(filters.begin(), filters.end());
    s->exprs = std::move(filters);
  }
  s->bodies.push_back(parse_statements({"endset"}, true));
  return s;
}

// A name, names separated by commas (optionally in parentheses), or with_namespace's ns.attr.
void Parser::parse_assign_target(Stmt& stmt, bool with_namespace, const char* end_name) {
  if (with_namespace && cur().type == TokenType::Name && look().type == TokenType::Operator && look().text == ".") {
    stmt.targets.push_back(next().text);
    next();  // .
    stmt.attr = expect_identifier();
    return;
  }
  const bool parens = skip_op("(");
  while (true) {
    if (cur().type != TokenType::Name) {
      if (!stmt.targets.empty() && (parens ? is_op(")") : (is_op("=") || is_op("|") || cur().type == TokenType::BlockEnd ||
                                                           (end_name != nullptr && is_name(end_name))))) {
        break;  // a trailing comma
      }
      if (is_op("(")) fail("unsupported: nested tuple unpacking (outside kvinfer's chat template subset)");
      fail("can't assign to " + describe(cur()));
    }
    static constexpr const char* kConstants[] = {"true", "false", "True", "False", "none", "None"};
    for (const char* c : kConstants) {
      if (cur().text == c) fail("can't assign to const");
    }
    stmt.targets.push_back(next().text);
    if (!skip_op(",")) break;
    stmt.unpack = true;
  }
  if (parens) expect_op(")");  // (a) is a plain name; (a,) and (a, b) unpack
}

}  // namespace kvinfer::jinja
