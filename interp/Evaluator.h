// The tree-walking evaluator of statements and expressions.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interp/Ast.h"
#include "interp/Callable.h"
#include "interp/Environment.h"
#include "interp/InterpreterState.h"

namespace meshflow::interp {

using EnvPtr = std::shared_ptr<Environment>;

class Evaluator {
 public:
  explicit Evaluator(InterpreterState& state) : state_(state) {}

  /// Runs a program's statements in `env`. Returns the value of the last
  /// statement when it is an expression statement.
  std::optional<Value> run(const std::shared_ptr<const ast::Program>& program, const EnvPtr& env);
  Value eval(const ast::Expr& expr, const EnvPtr& env);
  /// Calls any callable value; counts towards the call-depth limit.
  Value call(const Value& callee, const Arguments& args);
  /// The body of a script `fn`/`layer`/`model`/`cluster` (ScriptFunction::call lands here).
  Value callScript(ScriptFunction& function, const Arguments& args);

  /// Runs the statements (or the expression) of a function body in `env`.
  Value runBody(const ast::FunctionDecl& decl, const EnvPtr& env);

  /// Counts one evaluation step and checks the step budget and the native stack.
  void step();
  /// Whether the host asked the run to stop (Interpreter::interrupt).
  bool interruptRequested() const;

  InterpreterState& state() { return state_; }
  Heap& heap() { return state_.heap; }
  void write(std::string_view text);

  // Values that hold memory are created through the heap so the limit applies.
  Value makeString(std::string text);
  Value makeList(std::vector<Value> items);
  Value makeRecord(std::vector<std::pair<std::string, Value>> fields);
  /// Throws MemoryLimit before a large allocation rather than after it.
  void ensureRoom(std::size_t bytes);

  /// Executes statements of a declaration body (cluster, schedule) one by one.
  enum class Flow { Normal, Return, Break, Continue };
  Flow exec(const ast::Stmt& stmt, const EnvPtr& env);
  /// Binds a script function's matched arguments in `env`, evaluating the defaults
  /// of the missing ones there.
  void bindParameters(const ast::FunctionDecl& decl,
                      const std::vector<std::optional<Value>>& matched, const EnvPtr& env);
  /// Defines `name` in `env`, or reports a Redefinition at `span`.
  /// With Config::allowRedefinition, a definition in the main scope replaces an
  /// earlier one instead, and a note saying so joins the current Status.
  void define(const EnvPtr& env, const std::string& name, Value value, bool isMutable,
              const SourceSpan& span, std::shared_ptr<const ImportOrigin> origin = nullptr);

 private:
  Value evalUnlocated(const ast::Expr& expr, const EnvPtr& env);
  Value evalName(const ast::NameRef& expr, const EnvPtr& env);
  Value evalBinary(const ast::BinaryExpr& expr, const EnvPtr& env);
  Value evalCall(const ast::CallExpr& expr, const EnvPtr& env);
  Value evalIndex(const ast::IndexExpr& expr, const EnvPtr& env);
  bool evalCondition(const ast::Expr& expr, const EnvPtr& env, const char* where);

  Flow execUnlocated(const ast::Stmt& stmt, const EnvPtr& env);
  Flow execBlock(const ast::Block& block, const EnvPtr& parent);
  Flow execFor(const ast::ForStmt& stmt, const EnvPtr& env);
  Flow execWhile(const ast::WhileStmt& stmt, const EnvPtr& env);
  void execAssign(const ast::AssignStmt& stmt, const EnvPtr& env);
  void execFunctionDecl(const ast::FunctionDecl& decl, const EnvPtr& env);

  InterpreterState& state_;
  const std::shared_ptr<const ast::Program>* program_ = nullptr;  // the program running now
  Value returnValue_;
};

/// Where in the source a value-level error should point.
[[noreturn]] void failAt(DiagnosticKind kind, std::string message, const SourceSpan& span);

}  // namespace meshflow::interp
