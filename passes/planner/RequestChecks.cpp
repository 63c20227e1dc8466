#include "passes/planner/RequestChecks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "ir/ScopeGlob.h"

namespace meshflow::passes {

void checkStagesFitLayers(const PlanRequest& request, int layers) {
  if (!request.stages || *request.stages <= layers) return;
  throw PlanningError(
      "stages",
      fmt::format("stages = {} needs at least {} layers, one per stage, and the model has {} "
                  "(its layer calls, docs/planning.md): ask for at most {} stages, or cut the "
                  "model into more layers with plan(..., layers = N)",
                  *request.stages, *request.stages, layers, layers));
}

void checkOpPinsMatch(const PlanRequest& request, const ir::Graph& forward) {
  if (request.opPins.empty()) return;
  std::set<std::string> scopes;
  for (const ir::Op& op : forward.ops())
    if (!op.scope.empty()) scopes.insert(op.scope);
  for (const OpShardingPin& pin : request.opPins) {
    bool matched = std::any_of(scopes.begin(), scopes.end(), [&](const std::string& scope) {
      return ir::scopeMatches(pin.pattern, scope);
    });
    if (matched) continue;
    std::vector<std::string> near =
        ir::nearestScopes(pin.pattern, std::vector<std::string>(scopes.begin(), scopes.end()));
    std::string hint = fmt::format("pin(op = \"{}\", sharding = \"{}\")", pin.pattern, pin.spec);
    std::string suggestion =
        near.empty() ? "" : fmt::format("; did you mean \"{}\"?", fmt::join(near, "\" or \""));
    throw PlanningError(hint, fmt::format("{} matches no op of the model{}", hint, suggestion));
  }
}

}  // namespace meshflow::passes
