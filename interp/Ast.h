// meshflow's own syntax tree. grammar/Transformer builds it from the ANTLR parse
// tree; nothing outside grammar/ ever sees an ANTLR type. Every node carries the
// span of the source it came from.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interp/SourceFile.h"
#include "meshflow/Value.h"

namespace meshflow::ast {

using interp::SourceSpan;

// ---- Expressions -----------------------------------------------------------

enum class ExprKind : std::uint8_t {
  Int, Float, Quantity, String, Bool, None, Auto,
  Name, List, Record, Unary, Binary, Call, Index, Field,
};

struct Expr {
  Expr(ExprKind kind, SourceSpan span) : kind(kind), span(span) {}
  virtual ~Expr() = default;
  const ExprKind kind;
  SourceSpan span;
  std::uint32_t height = 1;  // of this subtree; the transformer bounds it
};
using ExprPtr = std::unique_ptr<Expr>;

struct IntLiteral : Expr {
  IntLiteral(SourceSpan s, std::int64_t v) : Expr(ExprKind::Int, s), value(v) {}
  std::int64_t value;
};

struct FloatLiteral : Expr {
  FloatLiteral(SourceSpan s, double v) : Expr(ExprKind::Float, s), value(v) {}
  double value;
};

struct QuantityLiteral : Expr {
  QuantityLiteral(SourceSpan s, double v, Dimension d)
      : Expr(ExprKind::Quantity, s), value(v), dimension(d) {}
  double value;  // in base units (bytes, seconds, FLOP)
  Dimension dimension;
};

struct StringLiteral : Expr {
  StringLiteral(SourceSpan s, std::string v) : Expr(ExprKind::String, s), value(std::move(v)) {}
  std::string value;
};

struct BoolLiteral : Expr {
  BoolLiteral(SourceSpan s, bool v) : Expr(ExprKind::Bool, s), value(v) {}
  bool value;
};

struct NoneLiteral : Expr {
  explicit NoneLiteral(SourceSpan s) : Expr(ExprKind::None, s) {}
};

struct AutoLiteral : Expr {
  explicit AutoLiteral(SourceSpan s) : Expr(ExprKind::Auto, s) {}
};

struct NameRef : Expr {
  NameRef(SourceSpan s, std::string n) : Expr(ExprKind::Name, s), name(std::move(n)) {}
  std::string name;
};

struct ListExpr : Expr {
  explicit ListExpr(SourceSpan s) : Expr(ExprKind::List, s) {}
  std::vector<ExprPtr> items;
};

struct RecordField {
  std::string name;
  SourceSpan nameSpan;
  ExprPtr value;
};

struct RecordExpr : Expr {
  explicit RecordExpr(SourceSpan s) : Expr(ExprKind::Record, s) {}
  std::vector<RecordField> fields;
};

enum class UnaryOp : std::uint8_t { Negate, Plus, Not };

struct UnaryExpr : Expr {
  UnaryExpr(SourceSpan s, UnaryOp o, ExprPtr e)
      : Expr(ExprKind::Unary, s), op(o), operand(std::move(e)) {}
  UnaryOp op;
  ExprPtr operand;
};

enum class BinaryOp : std::uint8_t {
  Add, Sub, Mul, Div, FloorDiv, Mod, Pow,
  Eq, Ne, Lt, Le, Gt, Ge,
  And, Or, Range,
};

/// The operator as written in source (`//`, `and`, `..`).
const char* spelling(BinaryOp op);

struct BinaryExpr : Expr {
  BinaryExpr(SourceSpan s, BinaryOp o, ExprPtr l, ExprPtr r)
      : Expr(ExprKind::Binary, s), op(o), lhs(std::move(l)), rhs(std::move(r)) {}
  BinaryOp op;
  SourceSpan opSpan;  // where the operator itself is, for diagnostics
  ExprPtr lhs, rhs;
};

struct Argument {
  std::optional<std::string> name;  // set for keyword arguments
  SourceSpan span;
  ExprPtr value;
};

struct CallExpr : Expr {
  CallExpr(SourceSpan s, ExprPtr c) : Expr(ExprKind::Call, s), callee(std::move(c)) {}
  ExprPtr callee;
  std::vector<Argument> args;
};

struct IndexExpr : Expr {
  IndexExpr(SourceSpan s, ExprPtr o) : Expr(ExprKind::Index, s), object(std::move(o)) {}
  ExprPtr object;
  std::vector<ExprPtr> indices;
};

struct FieldExpr : Expr {
  FieldExpr(SourceSpan s, ExprPtr o, std::string n)
      : Expr(ExprKind::Field, s), object(std::move(o)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};

// ---- Statements ------------------------------------------------------------

enum class StmtKind : std::uint8_t {
  Import, Let, Function, Schedule, If, For, While, Return, Break, Continue, Assign, Expr,
};

struct Stmt {
  Stmt(StmtKind kind, SourceSpan span) : kind(kind), span(span) {}
  virtual ~Stmt() = default;
  const StmtKind kind;
  SourceSpan span;
};
using StmtPtr = std::unique_ptr<Stmt>;

struct Block {
  SourceSpan span;
  std::vector<StmtPtr> statements;
};

struct ImportStmt : Stmt {
  explicit ImportStmt(SourceSpan s) : Stmt(StmtKind::Import, s) {}
  bool isPath = false;      // `import "file.mesh"` rather than `import std.layers`
  std::string target;       // the path, or the dotted name
  std::optional<std::string> alias;
};

struct LetStmt : Stmt {
  LetStmt(SourceSpan s, bool m, std::string n, ExprPtr v)
      : Stmt(StmtKind::Let, s), isMutable(m), name(std::move(n)), value(std::move(v)) {}
  bool isMutable;
  std::string name;
  SourceSpan nameSpan;
  ExprPtr value;
};

struct Param {
  std::string name;
  SourceSpan span;
  ExprPtr defaultValue;  // null when the parameter is required
};

/// What a callable declaration makes: `fn`, `layer`, `model` and `cluster` all
/// bind a name to something called with arguments.
enum class CallableKind : std::uint8_t { Function, Layer, Model, Cluster };
const char* keyword(CallableKind kind);

struct FunctionDecl : Stmt {
  FunctionDecl(SourceSpan s, CallableKind k) : Stmt(StmtKind::Function, s), callable(k) {}
  CallableKind callable;
  std::string name;
  SourceSpan nameSpan;
  std::vector<Param> params;
  ExprPtr exprBody;  // `fn f(x) = expr`; otherwise `body` holds the statements
  Block body;
};

struct ScheduleDecl : Stmt {
  explicit ScheduleDecl(SourceSpan s) : Stmt(StmtKind::Schedule, s) {}
  std::string name;
  SourceSpan nameSpan;
  Block body;
};

struct IfStmt : Stmt {
  explicit IfStmt(SourceSpan s) : Stmt(StmtKind::If, s) {}
  ExprPtr condition;
  Block thenBlock;
  std::optional<Block> elseBlock;  // `else if` is an else block holding one IfStmt
};

struct ForStmt : Stmt {
  explicit ForStmt(SourceSpan s) : Stmt(StmtKind::For, s) {}
  std::string variable;
  SourceSpan variableSpan;
  ExprPtr iterable;
  Block body;
};

struct WhileStmt : Stmt {
  explicit WhileStmt(SourceSpan s) : Stmt(StmtKind::While, s) {}
  ExprPtr condition;
  Block body;
};

struct ReturnStmt : Stmt {
  ReturnStmt(SourceSpan s, ExprPtr v) : Stmt(StmtKind::Return, s), value(std::move(v)) {}
  ExprPtr value;  // null for a bare `return`
};

struct BreakStmt : Stmt {
  explicit BreakStmt(SourceSpan s) : Stmt(StmtKind::Break, s) {}
};

struct ContinueStmt : Stmt {
  explicit ContinueStmt(SourceSpan s) : Stmt(StmtKind::Continue, s) {}
};

struct AssignStmt : Stmt {
  AssignStmt(SourceSpan s, ExprPtr t, std::optional<BinaryOp> o, ExprPtr v)
      : Stmt(StmtKind::Assign, s), target(std::move(t)), op(o), value(std::move(v)) {}
  ExprPtr target;              // a NameRef, FieldExpr or IndexExpr
  std::optional<BinaryOp> op;  // set for `+=` and friends
  ExprPtr value;
};

struct ExprStmt : Stmt {
  ExprStmt(SourceSpan s, ExprPtr e) : Stmt(StmtKind::Expr, s), expr(std::move(e)) {}
  ExprPtr expr;
};

/// A whole source file. It owns the SourceFile its spans point into.
struct Program {
  std::shared_ptr<const interp::SourceFile> file;
  std::vector<StmtPtr> statements;
};

}  // namespace meshflow::ast
