// plan(...) and simulate(p): the planner and the simulator from a script
// (docs/planning.md, "Planning from a script").
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "interp/Builtins.h"
#include "interp/Evaluator.h"
#include "interp/FileAccess.h"
#include "interp/PlanInputs.h"
#include "interp/PlanObject.h"
#include "interp/Tracing.h"
#include "ir/PlanFile.h"
#include "passes/MemoryFloor.h"
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

// "; it needs about 93 GiB per device (a plan fits in 93 GiB, none in 91.5
// GiB; the plan that fits: 1f1b, ..., peak 92.8 GiB); with recompute = full, 61
// GiB": what the request would need, planned under larger budgets
// (passes/MemoryFloor.h); "" when no budget helps.
std::string memoryNeeded(const ir::Graph& graph, const ir::Cluster& cluster,
                         const passes::PlanRequest& request) {
  auto floor = passes::memoryFloor(graph, cluster, request);
  if (!floor) return "";
  std::string out = fmt::format(
      "; it needs about {} per device (a plan fits in {}, none in {}; the plan that fits: {}, "
      "peak {})",
      ir::formatBytes(floor->fits), ir::formatBytes(floor->fits), ir::formatBytes(floor->tooSmall),
      floor->plan, ir::formatBytes(floor->peak));
  passes::PlanRequest other = request;
  std::string what;
  if (!request.recompute) {
    other.recompute = "none";
    what = "without recomputation";
  } else if (*request.recompute != "full") {
    other.recompute = "full";
    what = "with recompute = full";
  }
  if (what.empty()) return out;
  if (auto alternative = passes::memoryFloor(graph, cluster, other))
    out += fmt::format("; {}, {}", what, ir::formatBytes(alternative->fits));
  return out;
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
    if (error.hint() != "memory_per_device") refuse(a, schedule, traced.name, error);
    std::string needed = memoryNeeded(traced.tracer->graph, clusterOf(*cluster), request);
    refuse(a, schedule, traced.name,
           passes::PlanningError(error.hint(), std::string(error.what()) + needed));
  } catch (const std::runtime_error& error) {
    // Errors of the passes the planner runs (clustering, placement, the solvers)
    // that it did not turn into a PlanningError.
    refuse(a, schedule, traced.name, passes::PlanningError("", error.what()));
  }
  return planValue(ev, std::move(result), clusterOf(*cluster), traced.name);
}

Value simulate(Evaluator& ev, BoundArgs& a) {
  const auto* plan = handleArg<PlanObject>(a, 0);
  if (!plan)
    argumentError(a, 0, DiagnosticKind::TypeMismatch,
                  fmt::format("simulate() takes a plan from plan(...), not {}", a[0].aTypeName()));
  return simulationRecord(ev, *plan);
}

// How an argument was written (`p`, `p.alternatives[0]`), or `fallback` when
// it spans lines or is long.
std::string writtenAs(const SourceSpan& span, const char* fallback) {
  if (!span.valid() || span.line != span.endLine || span.endColumn <= span.column) return fallback;
  std::string_view line = span.file->line(span.line);
  if (span.endColumn > line.size() || span.endColumn - span.column > 28) return fallback;
  return std::string(line.substr(span.column, span.endColumn - span.column));
}

const PlanObject& planArg(const BoundArgs& a, std::size_t i, const char* function) {
  const auto* plan = handleArg<PlanObject>(a, i);
  if (!plan)
    argumentError(a, i, DiagnosticKind::TypeMismatch,
                  fmt::format("{}() takes plans from plan(...) or load_plan(...), not {}", function,
                              a[i].aTypeName()));
  return *plan;
}

Value compare(Evaluator& ev, BoundArgs& a) {
  const PlanObject& p = planArg(a, 0, "compare");
  const PlanObject& q = planArg(a, 1, "compare");
  std::string first = writtenAs(a.spans[0], "first"), second = writtenAs(a.spans[1], "second");
  if (first == second) {
    first = "first";
    second = "second";
  }
  ev.write(comparePlans(p, q, first, second));
  return Value();
}

Value loadPlan(Evaluator& ev, BoundArgs& a) {
  const std::string& path = stringArg(a, 0, "the path");
  std::filesystem::path file;
  try {
    file = checkRead(ev.state().config, path);
  } catch (ScriptError& denied) {
    argumentError(a, 0, DiagnosticKind::AccessDenied, denied.diagnostic().message);
  }
  std::ifstream in(file, std::ios::binary);
  if (!in)
    argumentError(a, 0, DiagnosticKind::InvalidValue,
                  fmt::format("cannot read '{}': no such file, or not readable", path));
  nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded())
    argumentError(a, 0, DiagnosticKind::InvalidValue,
                  fmt::format("cannot load plan '{}': not JSON (a corrupt or truncated file?)", path));
  try {
    ir::PlanFile saved = ir::planFileFromJson(json);
    return planValue(ev, std::move(saved.plan), std::move(saved.cluster), std::move(saved.model));
  } catch (const ir::PlanError& error) {
    argumentError(a, 0, DiagnosticKind::InvalidValue,
                  fmt::format("cannot load plan '{}': {}", path, error.what()));
  }
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
  defineBuiltin(env, "compare", {{"p", {}}, {"q", {}}}, compare);
  defineBuiltin(env, "load_plan", {{"path", {}}}, loadPlan);
}

}  // namespace meshflow::interp
