#include "ir/Plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace meshflow::ir {

using nlohmann::json;

double Plan::peakMemoryBytes() const {
  double peak = 0;
  for (const PlanStage& s : stages) peak = std::max(peak, s.peakMemoryBytes);
  return peak;
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

// ---- from JSON: every read names its path, and unknown keys are errors ----

class Reader {
 public:
  Reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  // An object whose keys must all be in `known`.
  Reader object(std::initializer_list<const char*> known) const {
    if (!j_.is_object()) fail("expected an object");
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool ok =
          std::any_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; });
      if (!ok) at(it.key()).fail("unknown key");
    }
    return *this;
  }
  bool has(const char* key) const { return j_.contains(key); }
  Reader at(const std::string& key) const {
    if (!j_.contains(key)) Reader(j_, join(key)).fail("missing");
    return Reader(j_.at(key), join(key));
  }
  Reader at(std::size_t i) const { return Reader(j_.at(i), fmt::format("{}[{}]", path_, i)); }
  std::size_t size() const {
    if (!j_.is_array()) fail("expected an array");
    return j_.size();
  }

  double number() const {
    if (!j_.is_number()) fail("expected a number");
    return j_.get<double>();
  }
  std::int64_t integer() const {
    if (!j_.is_number_integer()) fail("expected an integer");
    return j_.get<std::int64_t>();
  }
  bool boolean() const {
    if (!j_.is_boolean()) fail("expected true or false");
    return j_.get<bool>();
  }
  std::string string() const {
    if (!j_.is_string()) fail("expected a string");
    return j_.get<std::string>();
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < size(); ++i) out.push_back(at(i).string());
    return out;
  }
  std::array<std::int64_t, 2> pair() const {
    if (size() != 2) fail("expected two integers");
    return {at(0).integer(), at(1).integer()};
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw PlanError(fmt::format("{}: {}", path_.empty() ? "plan" : path_, message));
  }

 private:
  std::string join(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const json& j_;
  std::string path_;
};

std::vector<std::string> specStrings(const Reader& r) {
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

OpStrategy strategyFromJson(const Reader& r) {
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
    Reader alts = r.at("alternatives");
    for (std::size_t i = 0; i < alts.size(); ++i) {
      Reader a = alts.at(i).object({"strategy", "cost_s"});
      s.alternatives.push_back({a.at("strategy").string(), a.at("cost_s").number()});
    }
  }
  return s;
}

StageCosts costsFromJson(const Reader& r) {
  r.object({"forward_s", "backward_s", "weight_grad_s", "update_s", "gradient_sync_s",
            "activation_bytes", "held_activation_bytes", "parameter_bytes", "gradient_bytes",
            "recompute", "recompute_s", "recompute_bytes", "sharded_optimizer_state",
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
  number("gradient_bytes", c.gradientBytes);
  number("recompute_s", c.recomputeSeconds);
  number("recompute_bytes", c.recomputeBytes);
  if (r.has("recompute")) {
    c.recompute = r.at("recompute").string();
    if (c.recompute != "none" && c.recompute != "selective" && c.recompute != "full")
      r.at("recompute").fail("expected \"none\", \"selective\" or \"full\"");
  }
  if (r.has("gradient_sync_bytes")) {
    const Reader list = r.at("gradient_sync_bytes");
    if (list.size() != 3) list.fail("expected [dimension 0, dimension 1, both]");
    c.gradientSyncBytes.emplace();
    for (std::size_t a = 0; a < 3; ++a) (*c.gradientSyncBytes)[a] = list.at(a).number();
  }
  if (r.has("sharded_optimizer_state"))
    c.shardedOptimizerState = r.at("sharded_optimizer_state").boolean();
  return c;
}

PlanStage stageFromJson(const Reader& r) {
  r.object({"layers", "submesh", "logical_mesh", "devices", "latency_s", "peak_memory_bytes",
            "costs", "strategies"});
  PlanStage s;
  auto layers = r.at("layers").pair();
  if (layers[0] < 0 || layers[1] <= layers[0])
    r.at("layers").fail(fmt::format(
        "expected [first, last_exclusive] with first < last, got [{}, {}]", layers[0], layers[1]));
  s.firstLayer = static_cast<int>(layers[0]);
  s.endLayer = static_cast<int>(layers[1]);
  s.submesh = r.at("submesh").pair();
  s.logicalMesh = r.at("logical_mesh").pair();
  if (s.submesh[0] < 1 || s.submesh[1] < 1) r.at("submesh").fail("expected positive [n, m]");
  if (s.logicalMesh[0] * s.logicalMesh[1] != s.submesh[0] * s.submesh[1] || s.logicalMesh[0] < 1 ||
      s.logicalMesh[1] < 1)
    r.at("logical_mesh")
        .fail(fmt::format("({}, {}) does not view the {} devices of submesh ({}, {})",
                          s.logicalMesh[0], s.logicalMesh[1], s.submesh[0] * s.submesh[1],
                          s.submesh[0], s.submesh[1]));
  Reader devices = r.at("devices");
  for (std::size_t i = 0; i < devices.size(); ++i)
    s.devices.push_back(static_cast<int>(devices.at(i).integer()));
  if (!s.devices.empty() && std::int64_t(s.devices.size()) != s.submesh[0] * s.submesh[1])
    devices.fail(fmt::format("expected {} device ids, got {}", s.submesh[0] * s.submesh[1],
                             s.devices.size()));
  if (r.has("latency_s")) s.latency = r.at("latency_s").number();
  if (r.has("peak_memory_bytes")) s.peakMemoryBytes = r.at("peak_memory_bytes").number();
  if (r.has("costs")) s.costs = costsFromJson(r.at("costs"));
  if (r.has("strategies")) {
    Reader strategies = r.at("strategies");
    for (std::size_t i = 0; i < strategies.size(); ++i)
      s.strategies.push_back(strategyFromJson(strategies.at(i)));
  }
  return s;
}

// ---- the table ----

std::string seconds(double s) {
  if (s >= 1) return fmt::format("{:.3g} s", s);
  if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
  if (s > 0) return fmt::format("{:.3g} us", s * 1e6);
  return "0 s";
}

std::string deviceRanges(const std::vector<int>& ids) { return ids.empty() ? "-" : idRanges(ids, ","); }

}  // namespace

json planToJson(const Plan& plan) {
  json stages = json::array();
  for (const PlanStage& s : plan.stages) stages.push_back(stageToJson(s));
  json alternatives = json::array();
  for (const PlanAlternative& a : plan.alternatives)
    alternatives.push_back({{"description", a.description}, {"step_time_s", a.stepTime}});
  return {{"stages", stages},
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

Plan planFromJson(const json& j) {
  Reader r = Reader(j, "").object({"stages", "microbatches", "schedule", "chunks", "global_batch",
                                   "step_time_s", "samples_per_s", "tflops_per_device", "mfu",
                                   "peak_memory_bytes", "alternatives", "notes"});
  Plan plan;
  Reader stages = r.at("stages");
  for (std::size_t i = 0; i < stages.size(); ++i)
    plan.stages.push_back(stageFromJson(stages.at(i)));
  plan.microbatches = static_cast<int>(r.at("microbatches").integer());
  if (plan.microbatches < 1) r.at("microbatches").fail("expected at least 1");
  std::string schedule = r.at("schedule").string();
  auto kind = parseScheduleKind(schedule);
  if (!kind) r.at("schedule").fail(fmt::format("unknown schedule '{}'", schedule));
  plan.schedule = *kind;
  if (r.has("chunks")) plan.chunks = static_cast<int>(r.at("chunks").integer());
  if (plan.chunks < 1 || plan.stages.size() % plan.chunks != 0)
    r.at("chunks").fail(fmt::format("expected a divisor of the {} stages", plan.stages.size()));
  if (r.has("global_batch")) plan.globalBatch = r.at("global_batch").integer();
  plan.stepTime = r.at("step_time_s").number();
  if (r.has("samples_per_s")) plan.samplesPerSecond = r.at("samples_per_s").number();
  plan.tflopsPerDevice = r.at("tflops_per_device").number();
  if (r.has("mfu")) plan.mfu = r.at("mfu").number();
  // peak_memory_bytes is derived from the stages; it is read only to check it.
  if (r.has("peak_memory_bytes")) r.at("peak_memory_bytes").number();
  if (r.has("alternatives")) {
    Reader alts = r.at("alternatives");
    for (std::size_t i = 0; i < alts.size(); ++i) {
      Reader a = alts.at(i).object({"description", "step_time_s"});
      plan.alternatives.push_back({a.at("description").string(), a.at("step_time_s").number()});
    }
  }
  if (r.has("notes")) plan.notes = r.at("notes").strings();
  return plan;
}

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

std::string planTable(const Plan& plan) {
  // "1 stage", "2 stages"; "1 microbatch", "4 microbatches".
  auto count = [](std::int64_t n, std::string_view one, std::string_view many) {
    return fmt::format("{} {}", n, n == 1 ? one : many);
  };
  std::string out = fmt::format(
      "plan: {} on {}, schedule {}, {}",
      count(static_cast<std::int64_t>(plan.stages.size()), "stage", "stages"),
      count(plan.pipelineRanks(), "pipeline rank", "pipeline ranks"),
      scheduleKindName(plan.schedule), count(plan.microbatches, "microbatch", "microbatches"));
  if (plan.chunks > 1) out += fmt::format(" ({} chunks per rank)", plan.chunks);
  out += "\n";
  out += fmt::format(
      "step {}, {:.4g} samples/s, {:.4g} TFLOP/s per device (MFU {:.1f}%), "
      "peak memory {} per device\n",
      seconds(plan.stepTime), plan.samplesPerSecond, plan.tflopsPerDevice, plan.mfu * 100,
      formatBytes(plan.peakMemoryBytes()));
  out += fmt::format("{:<6} {:<10} {:<9} {:<9} {:<14} {:<10} {}\n", "stage", "layers", "submesh",
                     "mesh", "devices", "latency", "memory");
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    const PlanStage& s = plan.stages[i];
    out += fmt::format("{:<6} {:<10} {:<9} {:<9} {:<14} {:<10} {}\n", i,
                       fmt::format("[{}, {})", s.firstLayer, s.endLayer),
                       fmt::format("({}, {})", s.submesh[0], s.submesh[1]),
                       fmt::format("({}, {})", s.logicalMesh[0], s.logicalMesh[1]),
                       deviceRanges(s.devices), seconds(s.latency), formatBytes(s.peakMemoryBytes));
  }
  if (!plan.alternatives.empty()) {
    out += "alternatives considered:\n";
    for (const PlanAlternative& a : plan.alternatives)
      out += fmt::format("  {:<40} step {}\n", a.description, seconds(a.stepTime));
  }
  for (const std::string& note : plan.notes) out += fmt::format("note: {}\n", note);
  return out;
}

}  // namespace meshflow::ir
