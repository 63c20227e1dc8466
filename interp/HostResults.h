// Reading the typed results of include/meshflow/Results.h out of values.
#pragma once

#include <optional>

#include "meshflow/meshflow.h"

namespace meshflow::interp {

/// A plan value's structs; nullopt when `value` is not a plan.
std::optional<PlanResult> planResultOf(const Value& value);
/// simulate(p)'s record; nullopt when `record` lacks its fields.
std::optional<SimulationResult> simulationResultOf(const Value& record);
/// train(...)'s record; nullopt when `record` lacks its fields.
std::optional<TrainResult> trainResultOf(const Value& record);

}  // namespace meshflow::interp
