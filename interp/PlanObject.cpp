#include "interp/PlanObject.h"

#include <fmt/format.h>

#include <numeric>

#include "interp/Evaluator.h"
#include "ir/Counted.h"
#include "ir/PlanAxes.h"
#include "passes/Lowering.h"
#include "passes/PlanPipeline.h"

namespace meshflow::interp {
namespace {

constexpr Dimension kBytes{1, 0, 0};
constexpr Dimension kSeconds{0, 1, 0};

Value seconds(double value) { return Value::quantity(value, kSeconds); }
Value bytes(double value) { return Value::quantity(value, kBytes); }

Value pair(const std::array<std::int64_t, 2>& values) {
  return Value::list({Value::integer(values[0]), Value::integer(values[1])});
}

// What each mesh axis carries: ["data", "tensor+sequence"].
Value axesValue(const ir::PlanStage& stage) {
  std::array<ir::AxisRoles, 2> roles = ir::axisRoles(stage);
  return Value::list({Value::string(roles[0].text()), Value::string(roles[1].text())});
}

Value stageRecord(const ir::PlanStage& stage, std::size_t index) {
  std::vector<Value> devices;
  for (int d : stage.devices) devices.push_back(Value::integer(d));
  return Value::record({{"index", Value::integer(static_cast<std::int64_t>(index))},
                        {"layers", Value::range(stage.firstLayer, stage.endLayer)},
                        {"submesh", pair(stage.submesh)},
                        {"mesh", pair(stage.logicalMesh)},
                        {"devices", Value::list(std::move(devices))},
                        {"latency", seconds(stage.latency)},
                        {"memory", bytes(stage.peakMemoryBytes)},
                        {"axes", axesValue(stage)},
                        {"recompute", Value::string(stage.costs.recompute)},
                        {"shard_optimizer", Value::boolean(stage.costs.shardedOptimizerState)}});
}

Value strings(const std::vector<std::string>& texts) {
  std::vector<Value> values;
  for (const std::string& text : texts) values.push_back(Value::string(text));
  return Value::list(std::move(values));
}

const std::vector<std::string> kPlanFields = {
    "alternatives",  "chunks",        "description", "global_batch", "mfu",
    "mfu_with_recompute", "microbatches", "model", "notes", "peak_memory",
    "samples_per_s", "schedule", "simulated_step_time", "stages", "step_time",
    "tflops_per_device", "tokens_per_s"};

}  // namespace

std::string PlanObject::repr(int depth) const {
  if (depth > 0) {
    return fmt::format("<plan of {}: {}, {}, step {}>", model_,
                       ir::counted(static_cast<std::int64_t>(plan_.stages.size()), "stage"),
                       ir::scheduleKindName(plan_.schedule),
                       Value::quantity(plan_.stepTime, kSeconds).repr());
  }
  std::string table = ir::planTable(plan_);
  while (!table.empty() && table.back() == '\n') table.pop_back();
  return table;
}

std::optional<Value> PlanObject::field(const std::string& name) const {
  if (name == "step_time") return seconds(plan_.stepTime);
  if (name == "samples_per_s") return Value::number(plan_.samplesPerSecond);
  if (name == "tflops_per_device") return Value::number(plan_.tflopsPerDevice);
  if (name == "mfu") return Value::number(plan_.mfu);
  if (name == "mfu_with_recompute") return Value::number(plan_.mfuWithRecompute);
  if (name == "tokens_per_s") return Value::number(plan_.tokensPerSecond());
  if (name == "description") return Value::string(plan_.description);
  if (name == "simulated_step_time")
    return plan_.simulatedStepTime > 0 ? seconds(plan_.simulatedStepTime) : Value();
  if (name == "peak_memory") return bytes(plan_.peakMemoryBytes());
  if (name == "microbatches") return Value::integer(plan_.microbatches);
  if (name == "chunks") return Value::integer(plan_.chunks);
  if (name == "global_batch") return Value::integer(plan_.globalBatch);
  if (name == "schedule") return Value::string(std::string(ir::scheduleKindName(plan_.schedule)));
  if (name == "model") return Value::string(model_);
  if (name == "notes") return strings(plan_.notes);
  if (name == "stages") {
    std::vector<Value> stages;
    for (std::size_t i = 0; i < plan_.stages.size(); ++i)
      stages.push_back(stageRecord(plan_.stages[i], i));
    return Value::list(std::move(stages));
  }
  if (name == "alternatives") {
    std::vector<Value> plans;
    for (const auto& alternative : alternatives())
      plans.push_back(Value::object(ValueKind::Object, alternative));
    return Value::list(std::move(plans));
  }
  return std::nullopt;
}

std::vector<std::string> PlanObject::fieldNames() const { return kPlanFields; }

const std::vector<std::shared_ptr<PlanObject>>& PlanObject::alternatives() const {
  if (alternatives_) return *alternatives_;
  alternatives_.emplace();
  for (const ir::PlanAlternative& a : plan_.alternatives)
    if (a.plan) {
      ir::Plan plan = *a.plan;
      if (plan.description.empty()) plan.description = a.description;
      alternatives_->push_back(std::make_shared<PlanObject>(std::move(plan), cluster_, model_));
    }
  return *alternatives_;
}

std::variant<double, std::string> PlanObject::trySimulatedStep() const {
  try {
    return simulation().result.makespan;
  } catch (const ScriptError& error) {
    return error.diagnostic().message;
  }
}

std::size_t planHeapBytes(const ir::Plan& plan) {
  std::size_t strategies = 0;
  for (const ir::PlanStage& stage : plan.stages) strategies += stage.strategies.size();
  std::size_t bytes = kObjectOverhead + 256 * (strategies + plan.stages.size());
  for (const ir::PlanAlternative& a : plan.alternatives)
    if (a.plan) bytes += planHeapBytes(*a.plan);
  return bytes;
}

Value planValue(Evaluator& ev, ir::Plan plan, ir::Cluster cluster, std::string model) {
  std::size_t bytes = planHeapBytes(plan);
  auto object = std::make_shared<PlanObject>(std::move(plan), std::move(cluster), std::move(model));
  ev.heap().adopt(object, bytes);
  return Value::object(ValueKind::Object, std::move(object));
}

const PlanSimulation& PlanObject::simulation() const {
  if (simulation_) return *simulation_;
  auto simulation = std::make_shared<PlanSimulation>();
  try {
    simulation->description = passes::describePipeline(plan_, &simulation->notes);
    simulation->program = passes::lowerPipeline(simulation->description);
    runtime::sim::SimulatorOptions options = passes::simulatorOptions(cluster_);
    options.recordTimeline = true;
    simulation->result = runtime::sim::simulate(simulation->program, options);
  } catch (const std::runtime_error& error) {
    throw ScriptError(DiagnosticKind::PlanningError,
                      fmt::format("cannot simulate the plan: {}", error.what()));
  }
  simulation_ = std::move(simulation);
  return *simulation_;
}

Value simulationRecord(Evaluator& ev, const PlanObject& plan) {
  const runtime::sim::SimulationResult& r = plan.simulation().result;
  std::vector<Value> bubbles, peaks, notes;
  for (double fraction : r.bubbleFraction) bubbles.push_back(Value::number(fraction));
  for (std::int64_t peak : r.peakBytes) peaks.push_back(bytes(static_cast<double>(peak)));
  for (const std::string& note : plan.simulation().notes) notes.push_back(ev.makeString(note));
  double overall = r.bubbleFraction.empty()
                       ? 0
                       : std::accumulate(r.bubbleFraction.begin(), r.bubbleFraction.end(), 0.0) /
                             static_cast<double>(r.bubbleFraction.size());
  return ev.makeRecord({{"step_time", seconds(r.makespan)},
                        {"bubble_fraction", Value::number(overall)},
                        {"bubble_per_device", ev.makeList(std::move(bubbles))},
                        {"peak_memory", ev.makeList(std::move(peaks))},
                        {"communication_bytes", bytes(r.intraNodeBytes + r.interNodeBytes)},
                        {"intra_node_bytes", bytes(r.intraNodeBytes)},
                        {"inter_node_bytes", bytes(r.interNodeBytes)},
                        {"notes", ev.makeList(std::move(notes))}});
}

}  // namespace meshflow::interp
