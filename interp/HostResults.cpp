// The typed results of the embedding API (include/meshflow/Results.h): plans,
// simulations and training runs read from the values scripts hold.
#include "interp/HostResults.h"

#include "interp/PlanObject.h"

namespace meshflow::interp {
namespace {

// A number or quantity field in base units; nullopt when it is neither.
std::optional<double> numberField(const Value& record, const char* name) {
  Value v = record.field(name);
  if (v.kind() == ValueKind::Quantity) return v.quantityValue();
  if (v.isNumber()) return v.asNumber();
  return std::nullopt;
}

PlanStage stageOf(const ir::PlanStage& s) {
  PlanStage out;
  out.firstLayer = s.firstLayer;
  out.endLayer = s.endLayer;
  out.submesh = s.submesh;
  out.logicalMesh = s.logicalMesh;
  out.devices = s.devices;
  out.forwardSeconds = s.costs.forwardSeconds;
  out.backwardSeconds = s.costs.backwardSeconds;
  out.peakMemoryBytes = s.peakMemoryBytes;
  out.parameterBytes = s.costs.parameterBytes;
  out.gradientBytes = s.costs.gradientBytes;
  out.heldActivationBytes = s.costs.heldActivationBytes;
  out.recompute = s.costs.recompute;
  for (const ir::OpStrategy& op : s.strategies) out.strategies.push_back({op.scope, op.kind, op.name});
  return out;
}

}  // namespace

std::optional<PlanResult> planResultOf(const Value& value) {
  const auto* object = value.kind() == ValueKind::Object ? dynamic_cast<const PlanObject*>(value.object().get())
                                                         : nullptr;
  if (!object) return std::nullopt;
  const ir::Plan& plan = object->plan();
  PlanResult out;
  out.model = object->model();
  for (const ir::PlanStage& stage : plan.stages) out.stages.push_back(stageOf(stage));
  out.schedule = std::string(ir::scheduleKindName(plan.schedule));
  out.microbatches = plan.microbatches;
  out.chunks = plan.chunks;
  out.globalBatch = plan.globalBatch;
  out.stepSeconds = plan.stepTime;
  out.peakMemoryBytes = plan.peakMemoryBytes();
  out.tflopsPerDevice = plan.tflopsPerDevice;
  for (const ir::PlanAlternative& a : plan.alternatives) out.alternatives.push_back({a.description, a.stepTime});
  out.notes = plan.notes;
  out.json = ir::planToJson(plan).dump(2) + "\n";
  return out;
}

std::optional<SimulationResult> simulationResultOf(const Value& record) {
  auto step = numberField(record, "step_time");
  auto bubble = numberField(record, "bubble_fraction");
  auto communication = numberField(record, "communication_bytes");
  if (!step || !bubble || !communication || record.field("peak_memory").kind() != ValueKind::List)
    return std::nullopt;
  SimulationResult out{*step, *bubble, {}, *communication};
  for (const Value& peak : record.field("peak_memory").items())
    out.peakMemoryBytes.push_back(peak.kind() == ValueKind::Quantity ? peak.quantityValue() : peak.asNumber());
  return out;
}

std::optional<TrainResult> trainResultOf(const Value& record) {
  auto seconds = numberField(record, "seconds");
  auto throughput = numberField(record, "throughput");
  Value losses = record.field("losses"), steps = record.field("steps"), first = record.field("first_step");
  if (!seconds || !throughput || losses.kind() != ValueKind::List || !steps.isInt() || !first.isInt())
    return std::nullopt;
  TrainResult out;
  for (const Value& loss : losses.items()) out.losses.push_back(loss.asNumber());
  out.steps = steps.asInt();
  out.firstStep = first.asInt();
  out.seconds = *seconds;
  out.throughput = *throughput;
  if (record.field("unit").isString()) out.unit = record.field("unit").asString();
  return out;
}

}  // namespace meshflow::interp
