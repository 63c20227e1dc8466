#include "interp/Builtins.h"

#include <fmt/format.h>

#include "interp/Evaluator.h"
#include "interp/Object.h"
#include "interp/TensorOps.h"

namespace meshflow::interp {

namespace {

// Every builtin, made once per process and shared by every interpreter: a
// builtin holds no state and its binding is not mutable (nothing writes it),
// so sharing them changes nothing a script can see, and a new interpreter
// costs a scope instead of ~300 builtins (a fifth of a short eval in the fuzzer).
// It is never destroyed: at exit its destructor would run after the
// thread-local parking of releaseWithoutRecursion is gone.
const std::shared_ptr<Environment>& sharedBuiltins() {
  static const auto* env = [] {
    auto* built = new std::shared_ptr<Environment>(std::make_shared<Environment>());
    installBuiltins(**built);
    return built;
  }();
  return *env;
}

// The builtin values a script can change (records, lists: `math.pi = 3`),
// copied into each interpreter's own scope. (A shallow copy: `math` holds
// numbers and builtins.)
const std::vector<std::string>& changeableBuiltins() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> found;
    Environment& env = *sharedBuiltins();
    for (const std::string& name : env.localNames()) {
      ValueKind kind = env.findLocal(name)->value.kind();
      if (kind == ValueKind::Record || kind == ValueKind::List) found.push_back(name);
    }
    return found;
  }();
  return names;
}

Value shallowCopy(const Value& value) {
  if (value.kind() == ValueKind::Record)
    return Value::record(static_cast<const RecordObject&>(*value.object()).fields);
  return Value::list(static_cast<const ListObject&>(*value.object()).items);
}

}  // namespace

std::shared_ptr<Environment> makeBuiltinScope() {
  auto scope = std::make_shared<Environment>(sharedBuiltins());
  for (const std::string& name : changeableBuiltins())
    scope->define(name, Binding{shallowCopy(sharedBuiltins()->findLocal(name)->value), false, {}});
  return scope;
}

void installBuiltins(Environment& env) {
  installCoreBuiltins(env);
  installMathBuiltins(env);
  installDeclarationBuiltins(env);
  installFileBuiltins(env);
  // After the math builtins: tanh, exp and sum gain tensor overloads.
  installTensorBuiltins(env);
  installModelBuiltins(env);
  installTrainingBuiltins(env);
  installPlanBuiltins(env);
}

void defineBuiltin(Environment& env, const std::string& name, std::vector<ParamSpec> params,
                   Builtin::Body body, bool variadic) {
  auto builtin = std::make_shared<Builtin>(name, std::move(params), std::move(body), variadic);
  env.define(name, Binding{Value::object(ValueKind::Callable, std::move(builtin)), false, {}});
}

void argumentError(const BoundArgs& args, std::size_t i, DiagnosticKind kind, std::string message) {
  const SourceSpan& span = i < args.spans.size() ? args.spans[i] : args.callSpan;
  if (span.valid()) failAt(kind, std::move(message), span);
  throw ScriptError(kind, std::move(message));
}

std::int64_t intArg(const BoundArgs& args, std::size_t i, const char* what) {
  if (!args[i].isInt())
    argumentError(args, i, DiagnosticKind::TypeMismatch,
                  fmt::format("{} must be an int, not {}", what, args[i].aTypeName()));
  return args[i].asInt();
}

double numberArg(const BoundArgs& args, std::size_t i, const char* what) {
  if (!args[i].isNumber())
    argumentError(args, i, DiagnosticKind::TypeMismatch,
                  fmt::format("{} must be a number, not {}", what, args[i].aTypeName()));
  return args[i].asNumber();
}

const std::string& stringArg(const BoundArgs& args, std::size_t i, const char* what) {
  if (!args[i].isString())
    argumentError(args, i, DiagnosticKind::TypeMismatch,
                  fmt::format("{} must be a string, not {}", what, args[i].aTypeName()));
  return args[i].asString();
}

bool boolArg(const BoundArgs& args, std::size_t i, const char* what) {
  if (!args[i].isBool())
    argumentError(args, i, DiagnosticKind::TypeMismatch,
                  fmt::format("{} must be true or false, not {}", what, args[i].aTypeName()));
  return args[i].asBool();
}

double quantityArg(const BoundArgs& args, std::size_t i, Dimension d, const char* what) {
  const Value& v = args[i];
  if (v.kind() != ValueKind::Quantity || v.dimension() != d)
    argumentError(args, i, DiagnosticKind::UnitMismatch,
                  fmt::format("{} must be a quantity in {}, not {}", what, unitName(d), v.repr()));
  return v.quantityValue();
}

}  // namespace meshflow::interp
