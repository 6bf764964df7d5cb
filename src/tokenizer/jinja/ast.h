#pragma once
// The parsed template: expression and statement nodes, mirroring jinja2's nodes for the subset
// kvinfer supports. Every node keeps its line for error messages.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace kvinfer::jinja {

// The deepest expression or block nesting the parser accepts; it bounds the interpreter's
// recursion too, so hostile templates cannot overflow the stack.
constexpr int kMaxNesting = 200;

enum class ExprKind {
  Literal,   // value
  Name,      // name
  List,      // args: items
  Tuple,     // args: items
  Dict,      // args: key, value, key, value, ...
  Attr,      // args[0].name
  Item,      // args[0][args[1]]
  Slice,     // args[0][args[1]:args[2]:args[3]] (null parts are absent)
  Call,      // args[0](args[1..], kwargs)
  Filter,    // args[0] | name(args[1..], kwargs); args[0] null in {% set x | f %}
  Test,      // args[0] is [not] name(args[1..], kwargs)
  Neg,       // -args[0]
  Pos,       // +args[0]
  Not,       // not args[0]
  And,       // args[0] and args[1]
  Or,        // args[0] or args[1]
  Binary,    // args[0] op args[1] (op: BinOp)
  Concat,    // args[0] ~ args[1] ~ ...
  Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...
  CondExpr,  // args[1] if args[0] else args[2] (args[2] null: undefined)
};

enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::Literal;
  int line = 0;
  int depth = 1;  // height of this subtree
  Value value;
  std::string name;
  int op = 0;     // BinOp for Binary
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<CompareOp> ops;
};

enum class StmtKind {
  Output,    // text
  Print,     // exprs (printed one after another)
  If,        // exprs: conditions; bodies: one per condition, then the else body
  For,       // targets; exprs: iterable, optional filter; bodies: body, else body
  Set,       // targets or (targets[0].attr); exprs[0]: value
  SetBlock,  // targets or (targets[0].attr); bodies[0]; exprs: filters (args[0] null)
  Break,
  Continue,
  Block,     // bodies[0] ({% generation %})
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  StmtKind kind = StmtKind::Output;
  int line = 0;
  std::string text;
  std::vector<std::string> targets;
  bool unpack = false;    // a tuple target: for a, b in ... / set a, b = ...
  std::string attr;       // set ns.attr = ...
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
};

// Parses jinja2 source into statements; throws kvinfer::Error naming the line and, for
// constructs outside the subset, "unsupported".
Body parse_template(std::string_view source);

}  // namespace kvinfer::jinja
