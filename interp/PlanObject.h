// What plan(...) returns: an ir::Plan with the cluster it was made for, its
// fields and methods (docs/planning.md, "Planning from a script").
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "interp/Members.h"
#include "interp/Object.h"
#include "ir/Cluster.h"
#include "ir/Plan.h"
#include "ir/Program.h"
#include "passes/PipelineDescription.h"
#include "runtime/sim/Simulator.h"
#include "runtime/sim/TimelineText.h"

namespace meshflow::interp {

/// One training step of a plan, lowered (passes/PlanPipeline.h) and simulated
/// with its timeline recorded.
struct PlanSimulation {
  passes::PipelineDescription description;
  ir::Program program;
  runtime::sim::SimulationResult result;
  std::vector<std::string> notes;  // caveats of the lowering
};

class PlanObject final : public Object {
 public:
  PlanObject(ir::Plan plan, ir::Cluster cluster, std::string model)
      : plan_(std::move(plan)), cluster_(std::move(cluster)), model_(std::move(model)) {}
  std::string typeName() const override { return "plan"; }
  /// planTable at the top level; one line inside other values.
  std::string repr(int depth) const override;
  std::optional<Value> field(const std::string& name) const override;
  std::vector<std::string> fieldNames() const override;

  const ir::Plan& plan() const { return plan_; }
  const ir::Cluster& cluster() const { return cluster_; }
  /// The name of the model the plan trains.
  const std::string& model() const { return model_; }
  /// The simulated step, computed on first use. A plan that cannot be lowered
  /// or simulated is a PlanningError ScriptError.
  const PlanSimulation& simulation() const;
  /// The simulated step's seconds, or the reason it cannot be simulated.
  std::variant<double, std::string> trySimulatedStep() const;
  /// p.alternatives[i] as plans of their own (made on first use).
  const std::vector<std::shared_ptr<PlanObject>>& alternatives() const;

 private:
  ir::Plan plan_;
  ir::Cluster cluster_;
  std::string model_;
  mutable std::shared_ptr<const PlanSimulation> simulation_;
  mutable std::optional<std::vector<std::shared_ptr<PlanObject>>> alternatives_;
};

/// The bytes a plan value is charged on the heap: its strategies and its
/// alternatives' (interp/Heap.h).
std::size_t planHeapBytes(const ir::Plan& plan);

/// A plan value for `plan`, charged on the evaluator's heap.
Value planValue(Evaluator& evaluator, ir::Plan plan, ir::Cluster cluster, std::string model);

/// The methods of a plan: explain, memory, time_to_train, save, timeline,
/// save_trace, and the exports megatron, deepspeed, pytorch, jax_specs and
/// alpa_specs.
MethodTable planMethods();

/// The text of compare(p, q) and the REPL's :compare: both plans side by side
/// (stages, meshes, what each axis carries, recomputation, step time estimated
/// and simulated, throughput, memory, communication by link), rows that
/// differ marked `*`, then what differs and which is faster.
std::string comparePlans(const PlanObject& a, const PlanObject& b, const std::string& nameA,
                         const std::string& nameB);

/// The text of the alternatives' list (:alts, print(p.alternatives) aside):
/// one line per alternative with its index, estimated (and simulated) step.
std::string alternativesText(const ir::Plan& plan);

/// simulate(p): the record of the simulated step.
Value simulationRecord(Evaluator& evaluator, const PlanObject& plan);

/// The text of p.explain(scope): for every op whose scope is `scope`, lies
/// under it (`block3` covers `block3.mlp.fc1`) or matches it as a glob (`*`
/// any run of characters), its stage, mesh and shardings, then every strategy
/// it could use with its cost, the chosen one marked `*`. Empty when no op matches.
std::string explainPlan(const ir::Plan& plan, const std::string& scope);

/// The text of p.timeline(width): one row per pipeline rank of the simulated
/// step (its first device), `columns` columns across the step (72 by default).
std::string planTimeline(const ir::Plan& plan, const PlanSimulation& simulation,
                         int columns = runtime::sim::kTimelineColumns);

}  // namespace meshflow::interp
