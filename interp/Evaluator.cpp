#include "interp/Evaluator.h"

#include <fmt/format.h>

#include <algorithm>

#include "interp/CallNotes.h"
#include "interp/Declarations.h"
#include "interp/Members.h"
#include "interp/Operators.h"
#include "interp/TensorOps.h"
#include "interp/Tracing.h"
#include "ir/EditDistance.h"

namespace meshflow::interp {
namespace {

// "; did you mean 'hidden'?" when a visible name is a likely typo of `name`.
std::string suggestion(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best = ir::nearestName(name, candidates);
  return best.empty() ? "" : fmt::format("; did you mean '{}'?", best);
}

std::vector<std::optional<Value>> matchParameters(const ast::FunctionDecl& decl,
                                                  const Arguments& args) {
  std::vector<std::string> names;
  std::vector<bool> required;
  for (const auto& param : decl.params) {
    names.push_back(param.name);
    required.push_back(param.defaultValue == nullptr);
  }
  return matchArguments(decl.name, names, required, args, false, nullptr, nullptr, nullptr);
}

}  // namespace

[[noreturn]] void failAt(DiagnosticKind kind, std::string message, const SourceSpan& span) {
  throw ScriptError(makeDiagnostic(kind, std::move(message), span));
}

// ---- running programs -------------------------------------------------------

std::optional<Value> Evaluator::run(const std::shared_ptr<const ast::Program>& program,
                                    const EnvPtr& env) {
  const auto* saved = program_;
  program_ = &program;
  std::optional<Value> last;
  try {
    for (const auto& statement : program->statements) {
      last.reset();
      if (statement->kind == ast::StmtKind::Expr) {
        last = eval(*static_cast<const ast::ExprStmt&>(*statement).expr, env);
        step();
      } else {
        exec(*statement, env);
      }
    }
  } catch (...) {
    program_ = saved;
    throw;
  }
  program_ = saved;
  return last;
}

bool Evaluator::interruptRequested() const {
  return state_.interrupted.load(std::memory_order_relaxed);
}

void Evaluator::step() {
  if (interruptRequested()) throw ScriptError(DiagnosticKind::Interrupted, "interrupted (Ctrl-C)");
  if (++state_.steps > state_.config.limits.maxSteps)
    throw ScriptError(DiagnosticKind::StepLimit,
                      fmt::format("the script ran for more than {} steps without finishing "
                                  "(raise the budget with --max-steps)",
                                  state_.config.limits.maxSteps));
  auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  if (here < state_.stackLimit)
    throw ScriptError(DiagnosticKind::CallDepthLimit,
                      "calls and expressions nest too deeply for the native stack");
}

void Evaluator::write(std::string_view text) {
  if (state_.config.write) state_.config.write(text);
}

Value Evaluator::makeString(std::string text) {
  std::size_t bytes = stringBytes(text);
  auto object = std::make_shared<StringObject>(std::move(text));
  heap().adopt(object, bytes);
  return Value::object(ValueKind::String, std::move(object));
}

Value Evaluator::makeList(std::vector<Value> items) {
  std::size_t bytes = listBytes(items.size());
  auto object = std::make_shared<ListObject>(std::move(items));
  heap().adopt(object, bytes);
  return Value::object(ValueKind::List, std::move(object));
}

Value Evaluator::makeRecord(std::vector<std::pair<std::string, Value>> fields) {
  std::size_t bytes = recordBytes(fields);
  auto object = std::make_shared<RecordObject>(std::move(fields));
  heap().adopt(object, bytes);
  return Value::object(ValueKind::Record, std::move(object));
}

void Evaluator::ensureRoom(std::size_t bytes) {
  const auto& account = *heap().account();
  if (bytes > account.limit() || account.used() > account.limit() - bytes)
    throw ScriptError(DiagnosticKind::MemoryLimit,
                      fmt::format("this needs {} bytes, beyond the memory limit of {} bytes "
                                  "(raise it with --max-memory)",
                                  account.used() + bytes, account.limit()));
}

void Evaluator::define(const EnvPtr& env, const std::string& name, Value value, bool isMutable,
                       const SourceSpan& span, std::shared_ptr<const ImportOrigin> origin) {
  Binding binding{std::move(value), isMutable, span, std::move(origin)};
  if (env->define(name, binding)) return;
  Binding* previous = env->findLocal(name);
  if (state_.config.allowRedefinition && env == state_.globals && previous) {
    Diagnostic note = makeDiagnostic(DiagnosticKind::Redefinition,
                                     fmt::format("'{}' replaces its earlier definition", name),
                                     span, Severity::Note);
    if (previous->definedAt.valid())
      note.notes.push_back(makeDiagnostic(DiagnosticKind::Redefinition,
                                          "the replaced definition was here", previous->definedAt,
                                          Severity::Note));
    state_.notes.push_back(std::move(note));
    *previous = std::move(binding);
    return;
  }
  Diagnostic d = makeDiagnostic(DiagnosticKind::Redefinition,
                                fmt::format("'{}' is already defined in this scope", name), span);
  if (previous && previous->definedAt.valid())
    d.notes.push_back(makeDiagnostic(DiagnosticKind::Redefinition, "previous definition is here",
                                     previous->definedAt, Severity::Note));
  throw ScriptError(std::move(d));
}

// ---- statements -------------------------------------------------------------

Evaluator::Flow Evaluator::exec(const ast::Stmt& stmt, const EnvPtr& env) {
  try {
    return execUnlocated(stmt, env);
  } catch (ScriptError& error) {
    if (!error.located())
      error.locate(makeDiagnostic(error.kind(), error.diagnostic().message, stmt.span));
    throw;
  }
}

Evaluator::Flow Evaluator::execUnlocated(const ast::Stmt& stmt, const EnvPtr& env) {
  step();
  switch (stmt.kind) {
    case ast::StmtKind::Import:
      state_.modules.import(*this, static_cast<const ast::ImportStmt&>(stmt), *(*program_)->file,
                            env);
      return Flow::Normal;
    case ast::StmtKind::Let: {
      const auto& let = static_cast<const ast::LetStmt&>(stmt);
      define(env, let.name, eval(*let.value, env), let.isMutable, let.nameSpan);
      return Flow::Normal;
    }
    case ast::StmtKind::Function:
      execFunctionDecl(static_cast<const ast::FunctionDecl&>(stmt), env);
      return Flow::Normal;
    case ast::StmtKind::Schedule: {
      const auto& decl = static_cast<const ast::ScheduleDecl&>(stmt);
      define(env, decl.name, evalSchedule(*this, decl, env), false, decl.nameSpan);
      return Flow::Normal;
    }
    case ast::StmtKind::If: {
      const auto& s = static_cast<const ast::IfStmt&>(stmt);
      if (evalCondition(*s.condition, env, "if")) return execBlock(s.thenBlock, env);
      return s.elseBlock ? execBlock(*s.elseBlock, env) : Flow::Normal;
    }
    case ast::StmtKind::For: return execFor(static_cast<const ast::ForStmt&>(stmt), env);
    case ast::StmtKind::While: return execWhile(static_cast<const ast::WhileStmt&>(stmt), env);
    case ast::StmtKind::Return: {
      const auto& s = static_cast<const ast::ReturnStmt&>(stmt);
      returnValue_ = s.value ? eval(*s.value, env) : Value();
      return Flow::Return;
    }
    case ast::StmtKind::Break: return Flow::Break;
    case ast::StmtKind::Continue: return Flow::Continue;
    case ast::StmtKind::Assign:
      execAssign(static_cast<const ast::AssignStmt&>(stmt), env);
      return Flow::Normal;
    case ast::StmtKind::Expr:
      eval(*static_cast<const ast::ExprStmt&>(stmt).expr, env);
      return Flow::Normal;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::execBlock(const ast::Block& block, const EnvPtr& parent) {
  auto env = std::make_shared<Environment>(parent);
  for (const auto& statement : block.statements) {
    Flow flow = exec(*statement, env);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

void Evaluator::execFunctionDecl(const ast::FunctionDecl& decl, const EnvPtr& env) {
  auto function = std::make_shared<ScriptFunction>(*program_, &decl, env);
  heap().adopt(function, kObjectOverhead);
  define(env, decl.name, Value::object(ValueKind::Callable, std::move(function)), false,
         decl.nameSpan);
}

Evaluator::Flow Evaluator::execFor(const ast::ForStmt& stmt, const EnvPtr& env) {
  Value iterable = eval(*stmt.iterable, env);
  // Each iteration has its own scope, so closures capture that iteration's value.
  auto body = [&](Value item) {
    auto scope = std::make_shared<Environment>(env);
    scope->define(stmt.variable, Binding{std::move(item), false, stmt.variableSpan});
    step();
    return execBlock(stmt.body, scope);
  };
  auto handle = [&](Flow flow, bool& stop) {
    if (flow == Flow::Break || flow == Flow::Return) stop = true;
    return flow == Flow::Return ? Flow::Return : Flow::Normal;
  };
  bool stop = false;
  Flow result = Flow::Normal;
  if (iterable.kind() == ValueKind::Range) {
    const auto& range = static_cast<const RangeObject&>(*iterable.object());
    for (std::int64_t i = 0, n = range.size(); i < n && !stop; ++i)
      result = handle(body(Value::integer(range.at(i))), stop);
  } else if (iterable.kind() == ValueKind::List) {
    // Iterate over a snapshot: the body may append to the list.
    std::vector<Value> items = iterable.items();
    for (std::size_t i = 0; i < items.size() && !stop; ++i) result = handle(body(items[i]), stop);
  } else if (iterable.kind() == ValueKind::String) {
    for (const auto& character : codePointsOf(iterable.asString())) {
      if (stop) break;
      result = handle(body(makeString(character)), stop);
    }
  } else if (iterable.kind() == ValueKind::Record) {
    for (const auto& name : iterable.object()->fieldNames()) {
      if (stop) break;
      result = handle(body(makeString(name)), stop);
    }
  } else {
    failAt(DiagnosticKind::TypeMismatch,
           fmt::format("cannot iterate over {}; expected a list, range, string or record",
                       iterable.aTypeName()),
           stmt.iterable->span);
  }
  return result;
}

Evaluator::Flow Evaluator::execWhile(const ast::WhileStmt& stmt, const EnvPtr& env) {
  while (evalCondition(*stmt.condition, env, "while")) {
    step();
    Flow flow = execBlock(stmt.body, env);
    if (flow == Flow::Break) break;
    if (flow == Flow::Return) return flow;
  }
  return Flow::Normal;
}

void Evaluator::execAssign(const ast::AssignStmt& stmt, const EnvPtr& env) {
  auto combine = [&](const Value& current) {
    Value value = eval(*stmt.value, env);
    if (!stmt.op) return value;
    try {
      return binaryOp(*this, *stmt.op, current, value);
    } catch (ScriptError& error) {
      if (!error.located())
        error.locate(makeDiagnostic(error.kind(), error.diagnostic().message, stmt.span));
      throw;
    }
  };
  const ast::Expr& target = *stmt.target;
  if (target.kind == ast::ExprKind::Name) {
    const auto& name = static_cast<const ast::NameRef&>(target).name;
    Binding* binding = env->find(name);
    if (!binding) {
      failAt(DiagnosticKind::UnknownName,
             fmt::format("cannot assign to '{}': it is not defined (declare it with `var {} = ...`)",
                         name, name),
             target.span);
    }
    if (!binding->isMutable) {
      Diagnostic d = makeDiagnostic(
          DiagnosticKind::AssignToImmutable,
          fmt::format("cannot assign to '{}': it is not a `var`", name), target.span);
      if (binding->definedAt.valid())
        d.notes.push_back(makeDiagnostic(DiagnosticKind::AssignToImmutable,
                                         fmt::format("'{}' is defined here", name),
                                         binding->definedAt, Severity::Note));
      throw ScriptError(std::move(d));
    }
    binding->value = combine(binding->value);
    return;
  }
  if (target.kind == ast::ExprKind::Field) {
    const auto& field = static_cast<const ast::FieldExpr&>(target);
    Value object = eval(*field.object, env);
    if (object.kind() != ValueKind::Record)
      failAt(DiagnosticKind::TypeMismatch,
             fmt::format("cannot set field '{}' of {}; only records have assignable fields",
                         field.name, object.aTypeName()),
             target.span);
    auto& record = static_cast<RecordObject&>(*object.object());
    Value current = record.field(field.name).value_or(Value());
    if (stmt.op && !record.field(field.name))
      failAt(DiagnosticKind::UnknownField, fmt::format("record has no field '{}'", field.name),
             target.span);
    record.set(field.name, combine(current));
    return;
  }
  const auto& index = static_cast<const ast::IndexExpr&>(target);
  Value object = eval(*index.object, env);
  std::vector<Value> indices;
  for (const auto& i : index.indices) indices.push_back(eval(*i, env));
  Value current = stmt.op ? indexValue(*this, object, indices) : Value();
  try {
    setIndex(*this, object, indices, combine(current));
  } catch (ScriptError& error) {
    if (!error.located())
      error.locate(makeDiagnostic(error.kind(), error.diagnostic().message, target.span));
    throw;
  }
}

// ---- expressions ------------------------------------------------------------

Value Evaluator::eval(const ast::Expr& expr, const EnvPtr& env) {
  try {
    return evalUnlocated(expr, env);
  } catch (ScriptError& error) {
    if (!error.located())
      error.locate(makeDiagnostic(error.kind(), error.diagnostic().message, expr.span));
    throw;
  }
}

bool Evaluator::evalCondition(const ast::Expr& expr, const EnvPtr& env, const char* where) {
  Value value = eval(expr, env);
  if (!value.isBool())
    failAt(DiagnosticKind::TypeMismatch,
           fmt::format("the condition of `{}` must be a bool, not {}", where, value.aTypeName()),
           expr.span);
  return value.asBool();
}

Value Evaluator::evalUnlocated(const ast::Expr& expr, const EnvPtr& env) {
  switch (expr.kind) {
    case ast::ExprKind::Int: return Value::integer(static_cast<const ast::IntLiteral&>(expr).value);
    case ast::ExprKind::Float:
      return Value::number(static_cast<const ast::FloatLiteral&>(expr).value);
    case ast::ExprKind::Quantity: {
      const auto& q = static_cast<const ast::QuantityLiteral&>(expr);
      return Value::quantity(q.value, q.dimension);
    }
    case ast::ExprKind::String:
      return makeString(static_cast<const ast::StringLiteral&>(expr).value);
    case ast::ExprKind::Bool: return Value::boolean(static_cast<const ast::BoolLiteral&>(expr).value);
    case ast::ExprKind::None: return Value();
    case ast::ExprKind::Auto: return Value::autoValue();
    case ast::ExprKind::Name: return evalName(static_cast<const ast::NameRef&>(expr), env);
    case ast::ExprKind::List: {
      std::vector<Value> items;
      for (const auto& item : static_cast<const ast::ListExpr&>(expr).items)
        items.push_back(eval(*item, env));
      return makeList(std::move(items));
    }
    case ast::ExprKind::Record: {
      std::vector<std::pair<std::string, Value>> fields;
      for (const auto& field : static_cast<const ast::RecordExpr&>(expr).fields)
        fields.emplace_back(field.name, eval(*field.value, env));
      return makeRecord(std::move(fields));
    }
    case ast::ExprKind::Unary: {
      const auto& unary = static_cast<const ast::UnaryExpr&>(expr);
      Value operand = eval(*unary.operand, env);
      if (asTensor(operand)) return tensorUnary(*this, unary.op, operand, expr.span);
      return unaryOp(unary.op, operand);
    }
    case ast::ExprKind::Binary: return evalBinary(static_cast<const ast::BinaryExpr&>(expr), env);
    case ast::ExprKind::Call: return evalCall(static_cast<const ast::CallExpr&>(expr), env);
    case ast::ExprKind::Index: return evalIndex(static_cast<const ast::IndexExpr&>(expr), env);
    case ast::ExprKind::Field: {
      const auto& field = static_cast<const ast::FieldExpr&>(expr);
      return member(*this, eval(*field.object, env), field.name);
    }
  }
  return Value();
}

Value Evaluator::evalName(const ast::NameRef& expr, const EnvPtr& env) {
  if (Binding* binding = env->find(expr.name)) return binding->value;
  failAt(DiagnosticKind::UnknownName,
         fmt::format("unknown name '{}'{}", expr.name, suggestion(expr.name, env->visibleNames())),
         expr.span);
}

Value Evaluator::evalBinary(const ast::BinaryExpr& expr, const EnvPtr& env) {
  if (expr.op == ast::BinaryOp::And || expr.op == ast::BinaryOp::Or) {
    const char* word = ast::spelling(expr.op);
    auto operand = [&](const ast::Expr& e) {
      Value v = eval(e, env);
      if (!v.isBool())
        failAt(DiagnosticKind::TypeMismatch,
               fmt::format("the operands of `{}` must be bools, not {}", word, v.aTypeName()),
               e.span);
      return v.asBool();
    };
    bool lhs = operand(*expr.lhs);
    if (expr.op == ast::BinaryOp::And ? !lhs : lhs) return Value::boolean(lhs);
    return Value::boolean(operand(*expr.rhs));
  }
  Value lhs = eval(*expr.lhs, env);
  Value rhs = eval(*expr.rhs, env);
  // `==` and `!=` compare tensors as handles; arithmetic records ops.
  bool comparison = expr.op == ast::BinaryOp::Eq || expr.op == ast::BinaryOp::Ne;
  if (!comparison && (asTensor(lhs) || asTensor(rhs)))
    return tensorBinary(*this, expr.op, lhs, rhs, expr.span);
  return binaryOp(*this, expr.op, lhs, rhs);
}

Value Evaluator::evalCall(const ast::CallExpr& expr, const EnvPtr& env) {
  Value callee = eval(*expr.callee, env);
  Arguments args;
  args.callSpan = expr.span;
  for (const auto& arg : expr.args)
    args.entries.push_back({arg.name, eval(*arg.value, env), arg.span});
  if (callee.kind() != ValueKind::Callable)
    failAt(DiagnosticKind::NotCallable,
           fmt::format("{} cannot be called", callee.aTypeName()), expr.callee->span);
  return call(callee, args);
}

Value Evaluator::evalIndex(const ast::IndexExpr& expr, const EnvPtr& env) {
  Value object = eval(*expr.object, env);
  std::vector<Value> indices;
  for (const auto& index : expr.indices) indices.push_back(eval(*index, env));
  return indexValue(*this, object, indices);
}

// ---- calls ------------------------------------------------------------------

Value Evaluator::call(const Value& callee, const Arguments& args) {
  if (callee.kind() != ValueKind::Callable)
    throw ScriptError(DiagnosticKind::NotCallable,
                      fmt::format("{} cannot be called", callee.aTypeName()));
  if (state_.callDepth >= state_.config.limits.maxCallDepth)
    throw ScriptError(DiagnosticKind::CallDepthLimit,
                      fmt::format("calls nest deeper than {} (unbounded recursion?); raise the "
                                  "limit with --max-call-depth",
                                  state_.config.limits.maxCallDepth));
  step();
  ++state_.callDepth;
  struct Leave {
    std::uint32_t& depth;
    ~Leave() { --depth; }
  } leave{state_.callDepth};
  // Keep the callee alive for the whole call even if the call rebinds its name.
  auto function = std::static_pointer_cast<Callable>(callee.object());
  return function->call(*this, args);
}

void Evaluator::bindParameters(const ast::FunctionDecl& decl,
                               const std::vector<std::optional<Value>>& matched,
                               const EnvPtr& env) {
  // Defaults are evaluated in the call's scope, so they can use earlier parameters.
  for (std::size_t i = 0; i < decl.params.size(); ++i) {
    Value value = matched[i] ? *matched[i] : eval(*decl.params[i].defaultValue, env);
    env->define(decl.params[i].name, Binding{std::move(value), false, decl.params[i].span});
  }
}

Value Evaluator::runBody(const ast::FunctionDecl& decl, const EnvPtr& env) {
  if (decl.exprBody) return eval(*decl.exprBody, env);
  for (const auto& statement : decl.body.statements)
    if (exec(*statement, env) == Flow::Return) {
      Value result = std::move(returnValue_);
      returnValue_ = Value();
      return result;
    }
  return Value();
}

namespace {

// A layer call may be given `name = "..."` (unless the layer has a parameter
// of that name): it names the call's scope in the traced graph.
std::string takeScopeName(const ast::FunctionDecl& decl, Arguments& args) {
  bool declared = std::any_of(decl.params.begin(), decl.params.end(),
                              [](const ast::Param& p) { return p.name == "name"; });
  std::string scope = decl.name;
  if (declared) return scope;
  for (auto it = args.entries.begin(); it != args.entries.end(); ++it) {
    if (!it->name || *it->name != "name") continue;
    if (!it->value.isString())
      failAt(DiagnosticKind::TypeMismatch,
             fmt::format("a layer's name must be a string, not {}", it->value.aTypeName()), it->span);
    scope = it->value.asString();
    args.entries.erase(it);
    break;
  }
  return scope;
}

}  // namespace

Value Evaluator::callScript(ScriptFunction& function, const Arguments& given) {
  const ast::FunctionDecl& decl = function.decl();
  auto env = std::make_shared<Environment>(function.closure());
  Arguments args = given;
  std::string scope;
  if (decl.callable == ast::CallableKind::Layer) scope = takeScopeName(decl, args);
  // A wrong argument is an error at the call itself: it gets no "called here" note.
  auto matched = matchParameters(decl, args);
  try {
    bindParameters(decl, matched, env);
    switch (decl.callable) {
      case ast::CallableKind::Model: return makeModel(*this, function, env);
      case ast::CallableKind::Cluster: return evalCluster(*this, function, env);
      case ast::CallableKind::Function: return runBody(decl, env);
      case ast::CallableKind::Layer: break;
    }
    if (!state_.tracer) return runBody(decl, env);
    std::shared_ptr<Tracer> tracer = state_.tracer;
    tracer->enter(scope);
    struct Leave {
      Tracer& tracer;
      ~Leave() { tracer.leave(); }
    } leave{*tracer};
    return runBody(decl, env);
  } catch (ScriptError& error) {
    // A short trace of calls, innermost first, as notes (CallNotes.h).
    noteCall(error, fmt::format("in '{}' called here", decl.name), args.callSpan);
    throw;
  }
}

}  // namespace meshflow::interp
