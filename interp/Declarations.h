// What `model`, `cluster` and `schedule` declarations evaluate to.
#pragma once

#include "interp/Callable.h"
#include "interp/Environment.h"

namespace meshflow::interp {

class Evaluator;

/// Calling a `model` declaration binds its arguments; the body is traced later
/// (by planning or training), so the result is a model handle.
Value makeModel(Evaluator& evaluator, ScriptFunction& model, const std::shared_ptr<Environment>& env);

/// Calling a `cluster` declaration runs its body; `name = value` entries at the
/// top of the body become the cluster's fields, which are then validated.
Value evalCluster(Evaluator& evaluator, ScriptFunction& cluster,
                  const std::shared_ptr<Environment>& env);

/// Whether `name` is a hint or a bound a schedule block takes.
bool isScheduleHint(const std::string& name);

/// A `schedule` block: hints (`name = value`), bounds (`name <= value`) and pins.
Value evalSchedule(Evaluator& evaluator, const ast::ScheduleDecl& decl,
                   const std::shared_ptr<Environment>& env);

}  // namespace meshflow::interp
