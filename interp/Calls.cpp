#include <fmt/format.h>

#include "interp/Callable.h"
#include "interp/Evaluator.h"
#include "passes/PlanControl.h"

namespace meshflow::interp {
namespace {

std::string plural(std::size_t n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// A planning stopped at a safe point (passes/PlanControl.h) as a diagnostic
// at the builtin's call: Ctrl-C is Interrupted, a spent budget TimeBudget.
ScriptError planStopped(const passes::PlanInterrupted& stopped) {
  if (stopped.reason() == passes::PlanInterrupted::Reason::kCancelled)
    return ScriptError(DiagnosticKind::Interrupted, fmt::format("interrupted (Ctrl-C): {}", stopped.what()));
  return ScriptError(DiagnosticKind::TimeBudget,
                     fmt::format("{} (raise it with --time-budget)", stopped.what()));
}

}  // namespace

std::vector<std::optional<Value>> matchArguments(const std::string& function,
                                                 const std::vector<std::string>& params,
                                                 const std::vector<bool>& required,
                                                 const Arguments& args, bool variadic,
                                                 std::vector<SourceSpan>* spans,
                                                 std::vector<Value>* rest,
                                                 std::vector<SourceSpan>* restSpans) {
  std::vector<std::optional<Value>> matched(params.size());
  std::vector<SourceSpan> from(params.size(), args.callSpan);
  std::size_t position = 0;
  for (const auto& entry : args.entries) {
    if (!entry.name) {
      if (position < params.size()) {
        matched[position] = entry.value;
        from[position++] = entry.span;
      } else if (variadic) {
        rest->push_back(entry.value);
        restSpans->push_back(entry.span);
      } else {
        failAt(DiagnosticKind::ArgumentCount,
               fmt::format("'{}' takes {} but was given more", function,
                           plural(params.size(), "argument")),
               entry.span);
      }
      continue;
    }
    auto it = std::find(params.begin(), params.end(), *entry.name);
    if (it == params.end()) {
      std::string names;
      for (const auto& p : params) names += (names.empty() ? "" : ", ") + p;
      failAt(DiagnosticKind::UnknownArgument,
             fmt::format("'{}' has no parameter '{}'{}", function, *entry.name,
                         names.empty() ? "" : " (its parameters: " + names + ")"),
             entry.span);
    }
    auto index = static_cast<std::size_t>(it - params.begin());
    if (matched[index])
      failAt(DiagnosticKind::DuplicateArgument,
             fmt::format("argument '{}' of '{}' is given twice", *entry.name, function), entry.span);
    matched[index] = entry.value;
    from[index] = entry.span;
  }
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!matched[i] && required[i])
      failAt(DiagnosticKind::ArgumentCount,
             fmt::format("'{}' is missing its argument '{}'", function, params[i]), args.callSpan);
  if (spans) *spans = std::move(from);
  return matched;
}

Value Builtin::call(Evaluator& evaluator, const Arguments& args) {
  std::vector<std::string> names;
  std::vector<bool> required;
  for (const auto& param : params_) {
    names.push_back(param.name);
    required.push_back(!param.defaultValue.has_value());
  }
  BoundArgs bound;
  bound.callSpan = args.callSpan;
  auto matched = matchArguments(name_, names, required, args, variadic_, &bound.spans, &bound.rest,
                                &bound.restSpans);
  for (std::size_t i = 0; i < params_.size(); ++i)
    bound.values.push_back(matched[i] ? *matched[i] : *params_[i].defaultValue);
  try {
    return body_(evaluator, bound);
  } catch (const passes::PlanInterrupted& stopped) {
    throw planStopped(stopped);
  }
}

std::string ScriptFunction::typeName() const {
  switch (decl_->callable) {
    case ast::CallableKind::Function: return "function";
    case ast::CallableKind::Layer: return "layer";
    case ast::CallableKind::Model: return "model declaration";
    case ast::CallableKind::Cluster: return "cluster declaration";
  }
  return "function";
}

Value ScriptFunction::call(Evaluator& evaluator, const Arguments& args) {
  return evaluator.callScript(*this, args);
}

std::string ScriptFunction::signature() const {
  std::string out = decl_->name + "(";
  for (std::size_t i = 0; i < decl_->params.size(); ++i) {
    out += (i ? ", " : "") + decl_->params[i].name;
    if (decl_->params[i].defaultValue) out += " = …";
  }
  return out + ")";
}

Value BoundMethod::call(Evaluator& evaluator, const Arguments& args) {
  Arguments withReceiver = args;
  withReceiver.entries.insert(withReceiver.entries.begin(),
                              Arguments::Entry{std::nullopt, receiver_, args.callSpan});
  return method_->call(evaluator, withReceiver);
}

}  // namespace meshflow::interp
