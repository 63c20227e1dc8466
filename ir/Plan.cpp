#include "ir/Plan.h"

#include "ir/JsonReader.h"
#include "ir/PlanAxes.h"
#include "ir/PlanMemory.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>

#include "ir/Counted.h"

namespace meshflow::ir {

using nlohmann::json;

double Plan::peakMemoryBytes() const {
  double peak = 0;
  for (const PlanStage& s : stages) peak = std::max(peak, s.peakMemoryBytes);
  return peak;
}

double Plan::tokensPerSecond() const {
  return samplesPerSecond * double(model.sequence > 0 ? model.sequence : 1);
}

bool PlanAlternative::operator==(const PlanAlternative& other) const {
  if (description != other.description || stepTime != other.stepTime) return false;
  if (!plan || !other.plan) return !plan && !other.plan;
  return *plan == *other.plan;
}

int Plan::pipelineRanks() const {
  return chunks > 0 ? static_cast<int>(stages.size()) / chunks : 0;
}

namespace {

// ---- to JSON ----

json strategyToJson(const OpStrategy& s) {
  json alternatives = json::array();
  for (const OpAlternative& a : s.alternatives)
    alternatives.push_back({{"strategy", a.strategy}, {"cost_s", a.cost}});
  return {{"op", s.op},         {"kind", s.kind},
          {"scope", s.scope},   {"name", s.name},
          {"inputs", s.inputs}, {"outputs", s.outputs},
          {"cost_s", s.cost},   {"alternatives", alternatives}};
}

json costsToJson(const StageCosts& c) {
  json out = {{"forward_s", c.forwardSeconds},
          {"backward_s", c.backwardSeconds},
          {"weight_grad_s", c.weightGradSeconds},
          {"update_s", c.updateSeconds},
          {"gradient_sync_s", c.gradientSyncSeconds},
          {"activation_bytes", c.activationBytes},
          {"held_activation_bytes", c.heldActivationBytes},
          {"parameter_bytes", c.parameterBytes},
          {"optimizer_state_bytes", c.optimizerStateBytes},
          {"gradient_bytes", c.gradientBytes},
          {"recompute", c.recompute},
          {"sharded_optimizer_state", c.shardedOptimizerState}};
  if (c.gradientSyncBytes) out["gradient_sync_bytes"] = *c.gradientSyncBytes;
  if (c.recompute != "none") {
    out["recompute_s"] = c.recomputeSeconds;
    out["recompute_bytes"] = c.recomputeBytes;
  }
  return out;
}

json stageToJson(const PlanStage& s) {
  json strategies = json::array();
  for (const OpStrategy& st : s.strategies) strategies.push_back(strategyToJson(st));
  return {{"layers", {s.firstLayer, s.endLayer}},
          {"submesh", s.submesh},
          {"logical_mesh", s.logicalMesh},
          {"devices", s.devices},
          {"latency_s", s.latency},
          {"peak_memory_bytes", s.peakMemoryBytes},
          {"costs", costsToJson(s.costs)},
          {"strategies", strategies}};
}

std::vector<std::string> specStrings(const JsonReader& r) {
  std::vector<std::string> specs = r.strings();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    try {
      ShardingSpec::parse(specs[i]);
    } catch (const ShardingParseError& e) {
      r.at(i).fail(fmt::format("bad sharding spec '{}': {}", specs[i], e.what()));
    }
  }
  return specs;
}

OpStrategy strategyFromJson(const JsonReader& r) {
  r.object({"op", "kind", "scope", "name", "inputs", "outputs", "cost_s", "alternatives"});
  OpStrategy s;
  std::int64_t op = r.at("op").integer();
  if (op < 0) r.at("op").fail("expected an op id ≥ 0");
  s.op = static_cast<OpId>(op);
  s.kind = r.at("kind").string();
  if (r.has("scope")) s.scope = r.at("scope").string();
  if (r.has("name")) s.name = r.at("name").string();
  s.inputs = specStrings(r.at("inputs"));
  s.outputs = specStrings(r.at("outputs"));
  if (r.has("cost_s")) s.cost = r.at("cost_s").number();
  if (r.has("alternatives")) {
    JsonReader alts = r.at("alternatives");
    for (std::size_t i = 0; i < alts.size(); ++i) {
      JsonReader a = alts.at(i).object({"strategy", "cost_s"});
      s.alternatives.push_back({a.at("strategy").string(), a.at("cost_s").number()});
    }
  }
  return s;
}

StageCosts costsFromJson(const JsonReader& r) {
  r.object({"forward_s", "backward_s", "weight_grad_s", "update_s", "gradient_sync_s",
            "activation_bytes", "held_activation_bytes", "parameter_bytes",
            "optimizer_state_bytes", "gradient_bytes", "recompute", "recompute_s", "recompute_bytes", "sharded_optimizer_state",
            "gradient_sync_bytes"});
  StageCosts c;
  auto number = [&](const char* key, double& out) {
    if (r.has(key)) out = r.at(key).number();
  };
  number("forward_s", c.forwardSeconds);
  number("backward_s", c.backwardSeconds);
  number("weight_grad_s", c.weightGradSeconds);
  number("update_s", c.updateSeconds);
  number("gradient_sync_s", c.gradientSyncSeconds);
  number("activation_bytes", c.activationBytes);
  number("held_activation_bytes", c.heldActivationBytes);
  number("parameter_bytes", c.parameterBytes);
  number("optimizer_state_bytes", c.optimizerStateBytes);
  number("gradient_bytes", c.gradientBytes);
  if (r.has("recompute")) {
    c.recompute = r.at("recompute").string();
    if (c.recompute != "none" && c.recompute != "selective" && c.recompute != "full")
      r.at("recompute").fail("expected \"none\", \"selective\" or \"full\"");
  }
  // What recomputing costs means nothing without recomputation (costsToJson
  // leaves it out): read, it would not survive the plan's next save.
  if (c.recompute != "none") {
    number("recompute_s", c.recomputeSeconds);
    number("recompute_bytes", c.recomputeBytes);
  }
  if (r.has("gradient_sync_bytes")) {
    const JsonReader list = r.at("gradient_sync_bytes");
    if (list.size() != 3) list.fail("expected [dimension 0, dimension 1, both]");
    c.gradientSyncBytes.emplace();
    for (std::size_t a = 0; a < 3; ++a) (*c.gradientSyncBytes)[a] = list.at(a).number();
  }
  if (r.has("sharded_optimizer_state"))
    c.shardedOptimizerState = r.at("sharded_optimizer_state").boolean();
  return c;
}

PlanStage stageFromJson(const JsonReader& r) {
  r.object({"layers", "submesh", "logical_mesh", "devices", "latency_s", "peak_memory_bytes",
            "costs", "strategies"});
  PlanStage s;
  auto layers = r.at("layers").pair();
  if (layers[0] < 0 || layers[1] <= layers[0])
    r.at("layers").fail(fmt::format(
        "expected [first, last_exclusive] with first < last, got [{}, {}]", layers[0], layers[1]));
  if (layers[1] > std::numeric_limits<int>::max())
    r.at("layers").fail(fmt::format("{} does not fit in 32 bits", layers[1]));
  s.firstLayer = static_cast<int>(layers[0]);
  s.endLayer = static_cast<int>(layers[1]);
  s.submesh = r.at("submesh").pair();
  s.logicalMesh = r.at("logical_mesh").pair();
  if (s.submesh[0] < 1 || s.submesh[1] < 1) r.at("submesh").fail("expected positive [n, m]");
  // Sides this large would overflow the products below (and no cluster has them).
  constexpr std::int64_t kMaxSide = std::int64_t{1} << 24;
  for (const char* key : {"submesh", "logical_mesh"}) {
    const auto mesh = r.at(key).pair();
    if (mesh[0] > kMaxSide || mesh[1] > kMaxSide)
      r.at(key).fail(fmt::format("expected at most {} devices a side", kMaxSide));
  }
  if (s.logicalMesh[0] < 1 || s.logicalMesh[1] < 1 ||
      s.logicalMesh[0] * s.logicalMesh[1] != s.submesh[0] * s.submesh[1])
    r.at("logical_mesh")
        .fail(fmt::format("({}, {}) does not view the {} devices of submesh ({}, {})",
                          s.logicalMesh[0], s.logicalMesh[1], s.submesh[0] * s.submesh[1],
                          s.submesh[0], s.submesh[1]));
  JsonReader devices = r.at("devices");
  for (std::size_t i = 0; i < devices.size(); ++i)
    s.devices.push_back(devices.at(i).int32());
  if (!s.devices.empty() && std::int64_t(s.devices.size()) != s.submesh[0] * s.submesh[1])
    devices.fail(fmt::format("expected {} device ids, got {}", s.submesh[0] * s.submesh[1],
                             s.devices.size()));
  if (r.has("latency_s")) s.latency = r.at("latency_s").number();
  if (r.has("peak_memory_bytes")) s.peakMemoryBytes = r.at("peak_memory_bytes").number();
  if (r.has("costs")) s.costs = costsFromJson(r.at("costs"));
  if (r.has("strategies")) {
    JsonReader strategies = r.at("strategies");
    for (std::size_t i = 0; i < strategies.size(); ++i)
      s.strategies.push_back(strategyFromJson(strategies.at(i)));
  }
  return s;
}

// ---- the table ----

std::string deviceRanges(const std::vector<int>& ids) { return ids.empty() ? "-" : idRanges(ids, ","); }

}  // namespace

json planToJson(const Plan& plan) {
  json stages = json::array();
  for (const PlanStage& s : plan.stages) stages.push_back(stageToJson(s));
  json alternatives = json::array();
  for (const PlanAlternative& a : plan.alternatives) {
    json alternative = {{"description", a.description}, {"step_time_s", a.stepTime}};
    if (a.plan) alternative["plan"] = planToJson(*a.plan);
    alternatives.push_back(std::move(alternative));
  }
  const ModelFacts& m = plan.model;
  return {{"stages", stages},
          {"description", plan.description},
          {"model", {{"blocks", m.blocks}, {"hidden", m.hidden}, {"heads", m.heads},
                     {"sequence", m.sequence}, {"precision", m.precision}}},
          {"simulated_step_time_s", plan.simulatedStepTime},
          {"mfu_with_recompute", plan.mfuWithRecompute},
          {"microbatches", plan.microbatches},
          {"schedule", std::string(scheduleKindName(plan.schedule))},
          {"chunks", plan.chunks},
          {"global_batch", plan.globalBatch},
          {"step_time_s", plan.stepTime},
          {"samples_per_s", plan.samplesPerSecond},
          {"tflops_per_device", plan.tflopsPerDevice},
          {"mfu", plan.mfu},
          {"peak_memory_bytes", plan.peakMemoryBytes()},
          {"alternatives", alternatives},
          {"notes", plan.notes}};
}

namespace {

ModelFacts modelFromJson(const JsonReader& r) {
  r.object({"blocks", "hidden", "heads", "sequence", "precision"});
  ModelFacts m;
  auto count = [&](const char* key, std::int64_t& out) {
    if (!r.has(key)) return;
    out = r.at(key).integer();
    if (out < 0) r.at(key).fail("expected a count >= 0");
  };
  count("blocks", m.blocks);
  count("hidden", m.hidden);
  count("heads", m.heads);
  count("sequence", m.sequence);
  if (r.has("precision")) {
    m.precision = r.at("precision").string();
    if (m.precision != "fp32" && m.precision != "fp16" && m.precision != "bf16")
      r.at("precision").fail("expected \"fp32\", \"fp16\" or \"bf16\"");
  }
  return m;
}

Plan parsePlan(const JsonReader& r);

PlanAlternative alternativeFromJson(const JsonReader& r) {
  r.object({"description", "step_time_s", "plan"});
  PlanAlternative a{r.at("description").string(), r.at("step_time_s").number(), nullptr};
  if (r.has("plan")) {
    // One level only: an alternative's plan weighs no alternatives itself
    // (and a file cannot nest plans deeper than the parser's stack).
    JsonReader plan = r.at("plan");
    if (plan.has("alternatives") && plan.at("alternatives").size() > 0)
      plan.at("alternatives").fail("an alternative's plan has no alternatives of its own");
    a.plan = std::make_shared<const Plan>(parsePlan(plan));
  }
  return a;
}

Plan parsePlan(const JsonReader& root) {
  JsonReader r = root.object({"stages", "microbatches", "schedule", "chunks", "global_batch",
                          "step_time_s", "samples_per_s", "tflops_per_device", "mfu",
                          "peak_memory_bytes", "alternatives", "notes", "description", "model",
                          "simulated_step_time_s", "mfu_with_recompute"});
  Plan plan;
  JsonReader stages = r.at("stages");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    plan.stages.push_back(stageFromJson(stages.at(i)));
    // The stages split the model's layers in order, from the first.
    const int expected = i == 0 ? 0 : plan.stages[i - 1].endLayer;
    if (plan.stages[i].firstLayer != expected)
      stages.at(i).at("layers").fail(fmt::format(
          "stage {} starts at layer {}, expected {} ({}): a plan's stages take the layers in order",
          i, plan.stages[i].firstLayer, expected,
          i == 0 ? "the first layer" : fmt::format("where stage {} ends", i - 1)));
  }
  plan.microbatches = r.at("microbatches").int32();
  if (plan.microbatches < 1) r.at("microbatches").fail("expected at least 1");
  std::string schedule = r.at("schedule").string();
  auto kind = parseScheduleKind(schedule);
  if (!kind) r.at("schedule").fail(fmt::format("unknown schedule '{}'", schedule));
  plan.schedule = *kind;
  if (r.has("chunks")) plan.chunks = r.at("chunks").int32();
  if (plan.chunks < 1 || plan.stages.size() % plan.chunks != 0)
    r.at("chunks").fail(fmt::format("expected a divisor of the {} stages", plan.stages.size()));
  if (r.has("global_batch")) plan.globalBatch = r.at("global_batch").integer();
  plan.stepTime = r.at("step_time_s").number();
  if (r.has("samples_per_s")) plan.samplesPerSecond = r.at("samples_per_s").number();
  plan.tflopsPerDevice = r.at("tflops_per_device").number();
  if (r.has("mfu")) plan.mfu = r.at("mfu").number();
  if (r.has("mfu_with_recompute")) plan.mfuWithRecompute = r.at("mfu_with_recompute").number();
  if (r.has("simulated_step_time_s"))
    plan.simulatedStepTime = r.at("simulated_step_time_s").number();
  if (r.has("description")) plan.description = r.at("description").string();
  if (r.has("model")) plan.model = modelFromJson(r.at("model"));
  // peak_memory_bytes is derived from the stages; it is read only to check it.
  if (r.has("peak_memory_bytes")) r.at("peak_memory_bytes").number();
  if (r.has("alternatives")) {
    JsonReader alts = r.at("alternatives");
    for (std::size_t i = 0; i < alts.size(); ++i)
      plan.alternatives.push_back(alternativeFromJson(alts.at(i)));
  }
  if (r.has("notes")) plan.notes = r.at("notes").strings();
  return plan;
}

}  // namespace

Plan planFromJson(const json& j) { return parsePlan(JsonReader(j, "")); }

Plan planFromJson(const JsonReader& reader) { return parsePlan(reader); }

std::string idRanges(const std::vector<int>& ids, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += separator;
    out += j == i ? fmt::format("{}", ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  return out;
}

std::string durationText(double s) {
  if (s >= 2 * 86400) return fmt::format("{:.3g} days", s / 86400);
  if (s >= 2 * 3600) return fmt::format("{:.3g} h", s / 3600);
  if (s >= 2 * 60) return fmt::format("{:.3g} min", s / 60);
  return formatSeconds(s);
}

std::string rateText(double n) {
  if (n >= 1e9) return fmt::format("{:.4g}G", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.4g}M", n / 1e6);
  if (n >= 1e4) return fmt::format("{:.4g}k", n / 1e3);
  return fmt::format("{:.4g}", n);
}

namespace {

std::string throughputLine(const Plan& plan) {
  std::string step = formatSeconds(plan.stepTime);
  if (plan.simulatedStepTime > 0) step += fmt::format(" (simulated {})", formatSeconds(plan.simulatedStepTime));
  std::string tokens = plan.model.sequence > 0
                           ? fmt::format(", {} tokens/s", rateText(plan.tokensPerSecond()))
                           : std::string();
  std::string mfu = fmt::format("MFU {:.1f}%", plan.mfu * 100);
  if (plan.mfuWithRecompute > plan.mfu * (1 + 1e-9))
    mfu += fmt::format(" ({:.1f}% with recomputation counted)", plan.mfuWithRecompute * 100);
  return fmt::format("step {}, {:.4g} samples/s{}, {:.4g} TFLOP/s per device, {}\n", step,
                     plan.samplesPerSecond, tokens, plan.tflopsPerDevice, mfu);
}

}  // namespace

std::string planTable(const Plan& plan) {
  // "1 stage", "2 stages"; "1 microbatch", "4 microbatches".

  std::string out = fmt::format(
      "plan: {} on {}, schedule {}, {}",
      counted(static_cast<std::int64_t>(plan.stages.size()), "stage"),
      counted(plan.pipelineRanks(), "pipeline rank"),
      scheduleKindName(plan.schedule), counted(plan.microbatches, "microbatch", "microbatches"));
  if (plan.chunks > 1) out += fmt::format(" ({} chunks per rank)", plan.chunks);
  out += "\n";
  out += throughputLine(plan);
  if (plan.model.sequence > 0 && plan.tokensPerSecond() > 0)
    out += fmt::format("1e9 tokens take {}; peak memory {} per device\n",
                       durationText(1e9 / plan.tokensPerSecond()), formatBytes(plan.peakMemoryBytes()));
  else
    out += fmt::format("peak memory {} per device\n", formatBytes(plan.peakMemoryBytes()));
  std::vector<std::string> axes;
  std::size_t axesWidth = 4;
  for (const PlanStage& s : plan.stages) {
    axes.push_back(axesText(s));
    axesWidth = std::max(axesWidth, axes.back().size());
  }
  out += fmt::format("{:<6} {:<10} {:<9} {:<9} {:<14} {:<10} {:<10} {:<{}}  {:<10} {}\n", "stage",
                     "layers", "submesh", "mesh", "devices", "latency", "memory", "axes", axesWidth,
                     "recompute", "optimizer");
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    const PlanStage& s = plan.stages[i];
    out += fmt::format("{:<6} {:<10} {:<9} {:<9} {:<14} {:<10} {:<10} {:<{}}  {:<10} {}\n", i,
                       fmt::format("[{}, {})", s.firstLayer, s.endLayer),
                       fmt::format("({}, {})", s.submesh[0], s.submesh[1]),
                       fmt::format("({}, {})", s.logicalMesh[0], s.logicalMesh[1]),
                       deviceRanges(s.devices), formatSeconds(s.latency), formatBytes(s.peakMemoryBytes),
                       axes[i], axesWidth, s.costs.recompute,
                       s.costs.shardedOptimizerState && s.logicalMesh[0] > 1 ? "sharded" : "whole");
  }
  out += memoryTable(plan);
  if (!plan.alternatives.empty()) {
    out += "alternatives considered (p.alternatives[i]):\n";
    for (std::size_t i = 0; i < plan.alternatives.size(); ++i) {
      const PlanAlternative& a = plan.alternatives[i];
      std::string simulated = a.plan && a.plan->simulatedStepTime > 0
                                  ? fmt::format(", simulated {}", formatSeconds(a.plan->simulatedStepTime))
                                  : "";
      out += fmt::format("  [{}] {:<40} step {}{}\n", i, a.description, formatSeconds(a.stepTime), simulated);
    }
  }
  for (const std::string& note : plan.notes) out += fmt::format("note: {}\n", note);
  return out;
}

}  // namespace meshflow::ir
