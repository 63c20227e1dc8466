// The file `p.save(path)` writes and `load_plan(path)` reads: the plan with
// the model's name and the cluster it was made for, so that a loaded plan
// prints, simulates and trains as the planned one did (docs/planning.md,
// "Saving and loading a plan").
//
//   {"format": "meshflow-plan", "version": 2, "model": "gpt",
//    "cluster": {...}, "plan": {...planToJson...}}
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ir/Cluster.h"
#include "ir/Plan.h"

namespace meshflow::ir {

/// The version this build writes and the only one it reads.
constexpr int kPlanFileVersion = 2;

struct PlanFile {
  std::string model;
  Cluster cluster;
  Plan plan;
};

nlohmann::json planFileToJson(const PlanFile& file);
/// Throws PlanError naming the field at fault (`version: ...`,
/// `cluster.device.memory_bytes: expected a number`, `plan.stages[0]...`).
PlanFile planFileFromJson(const nlohmann::json& json);

}  // namespace meshflow::ir
