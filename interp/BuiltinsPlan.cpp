// plan(...) and simulate(p): the planner and the simulator from a script
// (docs/planning.md, "Planning from a script").
#include <fmt/format.h>

#include "interp/Builtins.h"
#include "interp/Evaluator.h"
#include "interp/PlanInputs.h"
#include "interp/PlanObject.h"
#include "interp/Tracing.h"
#include "runtime/sim/PlanSimulation.h"

namespace meshflow::interp {
namespace {

constexpr std::size_t kModel = 0, kCluster = 1, kBatch = 2, kSchedule = 3, kLayers = 4;

int layersArg(const BoundArgs& a) {
  if (a[kLayers].kind() == ValueKind::Auto) return 0;
  if (!a[kLayers].isInt())
    argumentError(a, kLayers, DiagnosticKind::TypeMismatch,
                  fmt::format("layers must be an int or auto, not {}", a[kLayers].aTypeName()));
  if (a[kLayers].asInt() < 1 || a[kLayers].asInt() > (1 << 20))
    argumentError(a, kLayers, DiagnosticKind::InvalidValue, "layers must be between 1 and 2^20");
  return static_cast<int>(a[kLayers].asInt());
}

// A PlanningError at the plan(...) call, or at its batch or layers argument when
// the planner blames one. A note points at the schedule hint at fault; a hint
// the block did not write is named in the message unless it already is.
[[noreturn]] void refuse(const BoundArgs& a, const ScheduleObject* schedule,
                         const std::string& model, const passes::PlanningError& error) {
  const std::string& hint = error.hint();
  SourceSpan where = a.callSpan;
  if (hint == "batch") where = a.spans[kBatch];
  if (hint == "layers") where = a.spans[kLayers];
  SourceSpan written = schedule && !hint.empty() ? hintSpan(*schedule, hint) : SourceSpan{};
  std::string message = fmt::format("cannot plan '{}': {}", model, error.what());
  if (!hint.empty() && !written.valid() && message.find(hint) == std::string::npos)
    message += fmt::format(" (the hint at fault: {})", hint);
  Diagnostic diagnostic = makeDiagnostic(DiagnosticKind::PlanningError, message, where);
  if (written.valid())
    diagnostic.notes.push_back(makeDiagnostic(DiagnosticKind::PlanningError,
                                              fmt::format("'{}' is set here", hint), written,
                                              Severity::Note));
  throw ScriptError(std::move(diagnostic));
}

Value plan(Evaluator& ev, BoundArgs& a) {
  auto model = modelOf(ev, a[kModel], a.spans[kModel]);
  const auto* cluster = handleArg<ClusterObject>(a, kCluster);
  if (!cluster)
    argumentError(a, kCluster, DiagnosticKind::TypeMismatch,
                  fmt::format("cluster must be a cluster such as dgx_a100(nodes = 1) or "
                              "cpu(devices = 4), not {}",
                              a[kCluster].aTypeName()));
  std::int64_t batch = intArg(a, kBatch, "batch");
  if (batch < 1 || batch > (std::int64_t{1} << 40))
    argumentError(a, kBatch, DiagnosticKind::InvalidValue, "batch must be between 1 and 2^40");
  const auto* schedule = handleArg<ScheduleObject>(a, kSchedule);
  if (!schedule && !a[kSchedule].isNone())
    argumentError(a, kSchedule, DiagnosticKind::TypeMismatch,
                  fmt::format("schedule must be a schedule block's name or none, not {}",
                              a[kSchedule].aTypeName()));

  passes::PlanRequest request;
  request.globalBatch = batch;
  request.layers = layersArg(a);
  if (schedule) applySchedule(*schedule, request);
  request.simulateStep = runtime::sim::simulatePlanStep;
  request.control = &ev.state().planControl;
  TracedModel traced = traceModel(ev, *model, a.callSpan);
  ir::Plan result;
  try {
    result = passes::planTraining(traced.tracer->graph, clusterOf(*cluster), request);
  } catch (const passes::PlanningError& error) {
    refuse(a, schedule, traced.name, error);
  } catch (const std::runtime_error& error) {
    // Errors of the passes the planner runs (clustering, placement, the solvers)
    // that it did not turn into a PlanningError.
    refuse(a, schedule, traced.name, passes::PlanningError("", error.what()));
  }
  std::size_t strategies = 0;
  for (const ir::PlanStage& stage : result.stages) strategies += stage.strategies.size();
  auto object = std::make_shared<PlanObject>(std::move(result), clusterOf(*cluster), traced.name);
  ev.heap().adopt(object, kObjectOverhead + 256 * (strategies + object->plan().stages.size()));
  return Value::object(ValueKind::Object, std::move(object));
}

Value simulate(Evaluator& ev, BoundArgs& a) {
  const auto* plan = handleArg<PlanObject>(a, 0);
  if (!plan)
    argumentError(a, 0, DiagnosticKind::TypeMismatch,
                  fmt::format("simulate() takes a plan from plan(...), not {}", a[0].aTypeName()));
  return simulationRecord(ev, *plan);
}

}  // namespace

void installPlanBuiltins(Environment& env) {
  defineBuiltin(env, "plan",
                {{"model", {}},
                 {"cluster", {}},
                 {"batch", {}},
                 {"schedule", Value()},
                 {"layers", Value::autoValue()}},
                plan);
  defineBuiltin(env, "simulate", {{"plan", {}}}, simulate);
}

}  // namespace meshflow::interp
