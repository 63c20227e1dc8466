// The functions every script sees, and helpers for writing them.
#pragma once

#include <string>
#include <vector>

#include "interp/Callable.h"
#include "interp/Environment.h"

namespace meshflow::interp {

/// A new interpreter's builtin scope (the root scope of all its modules): the
/// builtins every interpreter shares, and its own copy of those a script can
/// change (the `math` record).
std::shared_ptr<Environment> makeBuiltinScope();
/// Defines every builtin in `env`.
void installBuiltins(Environment& env);

// One group of builtins each, defined in their own files.
void installCoreBuiltins(Environment& env);
void installMathBuiltins(Environment& env);
void installDeclarationBuiltins(Environment& env);
void installFileBuiltins(Environment& env);
void installModelBuiltins(Environment& env);
void installTrainingBuiltins(Environment& env);
void installPlanBuiltins(Environment& env);

/// Defines a builtin named `name` in `env`.
void defineBuiltin(Environment& env, const std::string& name, std::vector<ParamSpec> params,
                   Builtin::Body body, bool variadic = false);

// Typed access to bound arguments; a wrong type is a TypeMismatch at the argument.
std::int64_t intArg(const BoundArgs& args, std::size_t i, const char* what);
double numberArg(const BoundArgs& args, std::size_t i, const char* what);
const std::string& stringArg(const BoundArgs& args, std::size_t i, const char* what);
bool boolArg(const BoundArgs& args, std::size_t i, const char* what);
/// A quantity of dimension `d` (UnitMismatch otherwise), in base units.
double quantityArg(const BoundArgs& args, std::size_t i, Dimension d, const char* what);
[[noreturn]] void argumentError(const BoundArgs& args, std::size_t i, DiagnosticKind kind,
                                std::string message);

/// Argument `i` as a host object of type Handle (a cluster, a plan …), or null.
template <typename Handle>
const Handle* handleArg(const BoundArgs& a, std::size_t i) {
  return a[i].kind() == ValueKind::Object ? dynamic_cast<const Handle*>(a[i].object().get()) : nullptr;
}

}  // namespace meshflow::interp
