// The methods of a plan value: explain, timeline, save, save_trace and the
// exports (docs/planning.md, "Planning from a script").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "interp/Builtins.h"
#include "ir/Bytes.h"
#include "interp/Evaluator.h"
#include "interp/FileAccess.h"
#include "interp/PlanObject.h"
#include "ir/PlanFile.h"
#include "ir/PlanMemory.h"
#include "ir/ScopeGlob.h"
#include "runtime/sim/SimTrace.h"
#include "runtime/sim/TimelineText.h"

namespace meshflow::interp {
namespace {

// A scope names itself and everything under it (`block3` covers
// `block3.mlp.fc1`); a pattern with `*` is a glob over whole scopes.
bool scopeMatches(const std::string& query, const std::string& scope) {
  if (query.find('*') != std::string::npos) return ir::scopeMatches(query, scope);
  return scope == query || scope.rfind(query + ".", 0) == 0;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ", ") + part;
  return out;
}

// The op, then every strategy it could use with its cost, the chosen one marked.
void explainOp(const ir::OpStrategy& op, std::size_t stage, const ir::PlanStage& where,
               std::string& out) {
  // A leaf (a parameter, an input) has no inputs: its line shows its output only.
  std::string shardings =
      op.inputs.empty() ? joined(op.outputs) : joined(op.inputs) + " -> " + joined(op.outputs);
  out += fmt::format("{}  {} (op {}), stage {}, mesh ({}, {}): {}\n",
                     op.scope.empty() ? "(top level)" : op.scope, op.kind, op.op, stage,
                     where.logicalMesh[0], where.logicalMesh[1], shardings);
  std::vector<ir::OpAlternative> rows = op.alternatives;
  auto chosen = std::find_if(rows.begin(), rows.end(),
                             [&](const ir::OpAlternative& a) { return a.strategy == op.name; });
  std::size_t chosenRow = static_cast<std::size_t>(chosen - rows.begin());
  if (op.name.empty() || chosen == rows.end()) {
    rows.insert(rows.begin(), {op.name.empty() ? "(chosen)" : op.name, op.cost});
    chosenRow = 0;
  }
  std::size_t width = 0;
  for (const ir::OpAlternative& row : rows) width = std::max(width, row.strategy.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    out += fmt::format("  {} {:<{}}  {:>9}\n", i == chosenRow ? '*' : ' ', rows[i].strategy, width,
                       ir::formatSeconds(rows[i].cost));
}

// The planner's note on a stage whose intra-op sharding is not proven optimal
// (with the solver's bound and gap), under that stage's ops.
void explainStageNotes(const ir::Plan& plan, std::size_t stage, std::string& out) {
  std::string prefix = fmt::format("intra-op sharding of stage {} ", stage);
  for (const std::string& note : plan.notes)
    if (note.rfind(prefix, 0) == 0) out += fmt::format("  note: {}\n", note);
}

// The top-level scopes of the plan's ops, for the message when nothing matches.
std::string topScopes(const ir::Plan& plan) {
  std::vector<std::string> scopes;
  for (const ir::PlanStage& stage : plan.stages)
    for (const ir::OpStrategy& op : stage.strategies) {
      std::string top = op.scope.substr(0, op.scope.find('.'));
      if (!top.empty() && std::find(scopes.begin(), scopes.end(), top) == scopes.end())
        scopes.push_back(top);
    }
  return scopes.empty() ? "none" : joined(scopes);
}

// ---- timeline ----

std::string deviceRange(const std::vector<std::vector<int>>& meshes) {
  std::vector<int> ids;
  for (const auto& mesh : meshes) ids.insert(ids.end(), mesh.begin(), mesh.end());
  std::sort(ids.begin(), ids.end());
  if (ids.size() == 1) return fmt::format("device {}", ids[0]);
  bool consecutive = ids.back() - ids.front() + 1 == static_cast<int>(ids.size());
  if (consecutive) return fmt::format("devices {}-{}", ids.front(), ids.back());
  return fmt::format("{} devices", ids.size());
}

// ---- methods ----

const PlanObject& self(const BoundArgs& a) {
  return static_cast<const PlanObject&>(*a[0].object());
}

std::filesystem::path writablePath(Evaluator& ev, const BoundArgs& a) {
  const std::string& path = stringArg(a, 1, "the path");
  try {
    return checkWrite(ev.state().config, path);
  } catch (ScriptError& denied) {
    argumentError(a, 1, DiagnosticKind::AccessDenied, denied.diagnostic().message);
  }
}

void writeFile(const BoundArgs& a, const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out)
    argumentError(a, 1, DiagnosticKind::InvalidValue,
                  fmt::format("cannot write '{}': {}", path.string(), whyCannotWrite(path)));
}

Value specRows(Evaluator& ev, const std::vector<ir::SpecRow>& rows) {
  std::vector<Value> records;
  for (const ir::SpecRow& row : rows)
    records.push_back(ev.makeRecord({{"stage", Value::integer(row.stage)},
                                     {"op", Value::integer(static_cast<std::int64_t>(row.op))},
                                     {"kind", ev.makeString(row.kind)},
                                     {"scope", ev.makeString(row.scope)},
                                     {"output", Value::integer(row.output)},
                                     {"spec", ev.makeString(row.spec)},
                                     {"note", ev.makeString(row.note)}}));
  return ev.makeList(std::move(records));
}

template <typename Export>
Value specExport(Evaluator& ev, const BoundArgs& a, Export exporter) {
  try {
    return specRows(ev, exporter(self(a).plan()));
  } catch (const ir::ShardingParseError& error) {
    throw ScriptError(DiagnosticKind::ExportError,
                      fmt::format("the plan holds a malformed sharding spec: {}", error.what()));
  }
}

Value explain(Evaluator& ev, BoundArgs& a) {
  const std::string& scope = stringArg(a, 1, "the scope");
  const ir::Plan& plan = self(a).plan();
  std::string text = explainPlan(plan, scope);
  if (text.empty())
    argumentError(a, 1, DiagnosticKind::InvalidValue,
                  fmt::format("no op of the plan has a scope matching '{}' (top-level scopes: {})",
                              scope, topScopes(plan)));
  ev.ensureRoom(text.size());
  text.pop_back();  // print() ends the line
  return ev.makeString(std::move(text));
}

Value timeline(Evaluator& ev, BoundArgs& a) {
  const PlanObject& plan = self(a);
  std::int64_t width = intArg(a, 1, "width");
  if (width < 8 || width > 1000)
    argumentError(a, 1, DiagnosticKind::InvalidValue,
                  fmt::format("width must be between 8 and 1000 columns, not {}", width));
  std::string text = planTimeline(plan.plan(), plan.simulation(), static_cast<int>(width));
  text.pop_back();  // print() ends the line
  return ev.makeString(std::move(text));
}

Value save(Evaluator& ev, BoundArgs& a) {
  auto path = writablePath(ev, a);
  const PlanObject& plan = self(a);
  writeFile(a, path,
            ir::planFileToJson({plan.model(), plan.cluster(), plan.plan()}).dump(2) + "\n");
  return Value();
}

// The figures of one pipeline rank's devices (ir/PlanMemory.h).
Value rankMemoryRecord(Evaluator& ev, const ir::Plan& plan, const ir::RankMemory& m) {
  std::vector<Value> stages, devices;
  for (int k : m.stages) stages.push_back(Value::integer(k));
  for (int d : plan.stages[static_cast<std::size_t>(m.stages.front())].devices)
    devices.push_back(Value::integer(d));
  auto bytes = [](double b) { return Value::quantity(b, Dimension{1, 0, 0}); };
  return ev.makeRecord({{"rank", Value::integer(m.rank)},
                        {"stages", ev.makeList(std::move(stages))},
                        {"devices", ev.makeList(std::move(devices))},
                        {"weights", bytes(m.weights)},
                        {"gradients", bytes(m.gradients)},
                        {"optimizer_state", bytes(m.optimizerState)},
                        {"activations", bytes(m.activations)},
                        {"peak", bytes(m.peak)},
                        {"communication_buffers", bytes(m.communicationBuffers)}});
}

Value memory(Evaluator& ev, BoundArgs& a) {
  const ir::Plan& plan = self(a).plan();
  std::vector<Value> ranks;
  for (const ir::RankMemory& m : ir::planMemory(plan))
    if (!m.stages.empty()) ranks.push_back(rankMemoryRecord(ev, plan, m));
  return ev.makeList(std::move(ranks));
}

Value timeToTrain(Evaluator& ev, BoundArgs& a) {
  const ir::Plan& plan = self(a).plan();
  if (!a[1].isNumber())
    argumentError(a, 1, DiagnosticKind::TypeMismatch,
                  fmt::format("tokens must be a number such as 300e9, not {}", a[1].aTypeName()));
  double tokens = a[1].asNumber();
  if (!(tokens > 0) || tokens > 1e30)
    argumentError(a, 1, DiagnosticKind::InvalidValue, "tokens must be above 0 (and at most 1e30)");
  if (plan.model.sequence <= 0)
    argumentError(a, 1, DiagnosticKind::InvalidValue,
                  "the plan does not know the model's tokens per sample (its graph has no "
                  "embedding or attention); divide by samples_per_s instead");
  double perStep = double(plan.globalBatch) * double(plan.model.sequence);
  double steps = std::ceil(tokens / perStep);
  double time = steps * plan.stepTime;
  return ev.makeRecord({{"tokens", Value::number(tokens)},
                        {"steps", Value::number(steps)},
                        {"time", Value::quantity(time, Dimension{0, 1, 0})},
                        {"days", Value::number(time / 86400)},
                        {"text", ev.makeString(ir::durationText(time))}});
}

Value saveTrace(Evaluator& ev, BoundArgs& a) {
  auto path = writablePath(ev, a);
  const PlanSimulation& simulation = self(a).simulation();
  writeFile(a, path,
            runtime::sim::simulationTrace(simulation.program, simulation.result).dump() + "\n");
  return Value();
}

// An export's text, or an ExportError saying why not and the nearest plan the
// notation can express.
Value exported(Evaluator& ev, const ir::PlanExport& result, const char* notation) {
  if (result.ok()) return ev.makeString(result.text);
  std::string message = fmt::format("{} cannot express this plan: {}", notation, result.whyNot);
  message += result.nearest.empty() ? "; no nearby plan it can express"
                                    : fmt::format("; the nearest plan it can express: {}",
                                                  result.nearest);
  throw ScriptError(DiagnosticKind::ExportError, message);
}

Value megatron(Evaluator& ev, BoundArgs& a) {
  return exported(ev, ir::megatronFlags(self(a).plan()), "Megatron-LM flags");
}

Value deepspeed(Evaluator& ev, BoundArgs& a) {
  return exported(ev, ir::deepspeedConfig(self(a).plan()), "a DeepSpeed config");
}

Value pytorch(Evaluator& ev, BoundArgs& a) {
  return exported(ev, ir::pytorchPipeline(self(a).plan()), "PyTorch's pipelining");
}

}  // namespace

std::string explainPlan(const ir::Plan& plan, const std::string& scope) {
  std::string out;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    bool listed = false;
    for (const ir::OpStrategy& op : plan.stages[s].strategies)
      if (scopeMatches(scope, op.scope)) {
        explainOp(op, s, plan.stages[s], out);
        listed = true;
      }
    if (listed) explainStageNotes(plan, s, out);
  }
  return out;
}

std::string planTimeline(const ir::Plan& plan, const PlanSimulation& simulation, int columns) {
  const auto& result = simulation.result;
  const auto& ranks = simulation.description.stages;
  std::string out = fmt::format(
      "one step, simulated: {} on {} pipeline rank{}, {}, {} microbatch{}; one column = {}\n",
      ir::formatSeconds(result.makespan), ranks.size(), ranks.size() == 1 ? "" : "s",
      ir::scheduleKindName(plan.schedule), plan.microbatches, plan.microbatches == 1 ? "" : "es",
      ir::formatSeconds(result.makespan / columns));
  std::vector<std::string> labels;
  std::size_t width = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    labels.push_back(fmt::format("rank {} ({})", r, deviceRange(ranks[r].meshes)));
    width = std::max(width, labels.back().size());
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    int device = ranks[r].meshes[0][0];
    double busy = result.makespan > 0
                      ? result.computeBusy[static_cast<std::size_t>(device)] / result.makespan
                      : 0;
    out += fmt::format("{:<{}} |{}| busy {:.0f}%\n", labels[r], width,
                       runtime::sim::timelineRow(simulation.program, device,
                                                 result.timeline[static_cast<std::size_t>(device)],
                                                 result.makespan, columns),
                       busy * 100);
  }
  const bool recomputes = std::any_of(plan.stages.begin(), plan.stages.end(),
                                      [](const ir::PlanStage& s) { return s.costs.recompute != "none"; });
  out += fmt::format(
      "F forward, B backward, I input gradient, W weight gradient{} (odd microbatches in lower "
      "case), U optimizer step, . idle\n",
      recomputes ? ", R recomputation" : "");
  for (const std::string& note : simulation.notes) out += "note: " + note + "\n";
  return out;
}

MethodTable planMethods() {
  return {
      {"explain", {{{"scope", {}}}, explain}},
      {"timeline", {{{"width", Value::integer(runtime::sim::kTimelineColumns)}}, timeline}},
      {"save", {{{"path", {}}}, save}},
      {"save_trace", {{{"path", {}}}, saveTrace}},
      {"memory", {{}, memory}},
      {"time_to_train", {{{"tokens", {}}}, timeToTrain}},
      {"megatron", {{}, megatron}},
      {"deepspeed", {{}, deepspeed}},
      {"pytorch", {{}, pytorch}},
      {"jax_specs",
       {{}, [](Evaluator& ev, BoundArgs& a) { return specExport(ev, a, ir::jaxPartitionSpecs); }}},
      {"alpa_specs",
       {{}, [](Evaluator& ev, BoundArgs& a) { return specExport(ev, a, ir::alpaSpecs); }}},
  };
}

}  // namespace meshflow::interp
