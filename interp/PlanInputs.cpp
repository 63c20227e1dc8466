#include "interp/PlanInputs.h"

#include <fmt/format.h>

#include "ir/ScopeGlob.h"
#include "passes/planner/Exclusions.h"

namespace meshflow::interp {
namespace {

double quantity(const Value& record, const char* name) {
  Value v = record.field(name);
  return v.kind() == ValueKind::Quantity ? v.quantityValue() : 0;
}

ir::LinkSpec linkOf(const Value& link, double share) {
  return {quantity(link, "bandwidth") * share, quantity(link, "latency")};
}

const RangeObject& rangeOf(const Value& value) {
  return static_cast<const RangeObject&>(*value.object());
}

std::optional<int> intHint(const ScheduleObject& schedule, const std::string& name) {
  auto value = schedule.field(name);
  if (!value || !value->isInt()) return std::nullopt;  // absent or auto
  return static_cast<int>(value->asInt());
}

std::optional<bool> boolHint(const ScheduleObject& schedule, const std::string& name) {
  auto value = schedule.field(name);
  if (!value || !value->isBool()) return std::nullopt;  // absent or auto
  return value->asBool();
}

std::optional<std::string> stringHint(const ScheduleObject& schedule, const std::string& name) {
  auto value = schedule.field(name);
  if (!value || !value->isString()) return std::nullopt;
  return value->asString();
}

// Adam keeps two moments per parameter, SGD with momentum one, plain SGD none.
int optimizerCopies(const Value& optimizer) {
  const std::string kind = optimizer.field("kind").str();
  if (kind == "adam" || kind == "adamw") return 2;
  Value momentum = optimizer.field("momentum");
  return momentum.isNumber() && momentum.asNumber() > 0 ? 1 : 0;
}

std::vector<int> deviceIds(const Value& devices) {
  std::vector<int> ids;
  if (devices.kind() == ValueKind::Range) {
    const RangeObject& range = rangeOf(devices);
    for (std::int64_t i = 0; i < range.size(); ++i) ids.push_back(static_cast<int>(range.at(i)));
    return ids;
  }
  for (const Value& d : devices.items()) ids.push_back(static_cast<int>(d.asInt()));
  return ids;
}

// pin() has already refused the shapes the planner does not take (see
// BuiltinsDeclarations.cpp): op + sharding, layers + stage, stage + devices.
void applyPin(const Value& pin, passes::PlanRequest& request) {
  const Value layers = pin.field("layers"), stage = pin.field("stage"), op = pin.field("op"),
              devices = pin.field("devices");
  if (!op.isNone()) {
    request.opPins.push_back({op.asString(), pin.field("sharding").asString()});
    return;
  }
  const int s = static_cast<int>(stage.asInt());
  if (!layers.isNone()) {
    const RangeObject& range = rangeOf(layers);
    request.layerPins.push_back({static_cast<int>(range.begin), static_cast<int>(range.end), s});
  }
  if (!devices.isNone()) request.devicePins.push_back({s, deviceIds(devices)});
}

passes::DeviceExclusion exclusionOf(const Value& exclusion) {
  const Value nodes = exclusion.field("nodes");
  return {!nodes.isNone(), deviceIds(nodes.isNone() ? exclusion.field("devices") : nodes)};
}

std::string normalised(const std::string& text) {
  std::string out;
  for (char c : text)
    if (c != ' ' && c != '"' && c != '\'') out += c;
  return out;
}

}  // namespace

ir::Cluster clusterOf(const ClusterObject& cluster) {
  ir::Cluster out;
  out.nodes = cluster.field("nodes")->asInt();
  out.devicesPerNode = cluster.field("devices_per_node")->asInt();
  const Value device = *cluster.field("device");
  out.device.name = device.field("name").str();
  out.device.memoryBytes = quantity(device, "memory");
  out.device.peakFlops = quantity(device, "peak");
  out.device.memoryBandwidth = quantity(device, "memory_bandwidth");
  if (Value fused = device.field("fused_kernels"); fused.isBool())
    out.device.fusedKernels = fused.asBool();
  out.intraNode = linkOf(*cluster.field("intra_node"), 1);
  out.interNode = linkOf(*cluster.field("inter_node"), static_cast<double>(out.devicesPerNode));
  if (auto cores = cluster.field("cores"); cores && cores->isInt()) out.hostCores = cores->asInt();
  return out;
}

void applySchedule(const ScheduleObject& schedule, passes::PlanRequest& request) {
  if (auto v = intHint(schedule, "microbatches")) request.microbatches = v;
  if (auto v = stringHint(schedule, "pipeline")) request.schedule = ir::parseScheduleKind(*v);
  if (auto v = intHint(schedule, "virtual_stages")) request.virtualStages = v;
  if (auto v = intHint(schedule, "stages")) request.stages = v;
  if (auto v = intHint(schedule, "max_tensor_parallel")) request.maxTensorParallel = v;
  if (auto v = intHint(schedule, "data_parallel")) request.dataParallel = v;
  if (auto v = stringHint(schedule, "recompute")) request.recompute = v;
  if (auto v = boolHint(schedule, "shard_optimizer")) request.shardOptimizerState = v;
  for (const ScheduleBound& bound : schedule.bounds())
    if (bound.name == "memory_per_device") request.memoryPerDevice = bound.limit.quantityValue();
  if (auto optimizer = schedule.field("optimizer");
      optimizer && optimizer->kind() == ValueKind::Record)
    request.optimizerCopies = optimizerCopies(*optimizer);
  for (const Value& pin : schedule.pins()) applyPin(pin, request);
  for (const Value& exclusion : schedule.exclusions())
    request.exclusions.push_back(exclusionOf(exclusion));
}

std::string pinText(const ScheduleObject& schedule, std::size_t index) {
  std::string args;
  for (const auto& [key, value] :
       static_cast<const RecordObject&>(*schedule.pins()[index].object()).fields)
    if (key != "kind") args += (args.empty() ? "" : ", ") + key + " = " + value.repr();
  return "pin(" + args + ")";
}

SourceSpan hintSpan(const ScheduleObject& schedule, const std::string& hint) {
  if (SourceSpan span = schedule.spanOf(hint); span.valid()) return span;
  // The planner writes a pin as the block does, perhaps eliding a part as `...`
  // (`pin(stage = 0, devices = ...)`).
  std::string pattern = normalised(hint);
  for (std::size_t at; (at = pattern.find("...")) != std::string::npos;)
    pattern.replace(at, 3, "*");
  for (std::size_t i = 0; i < schedule.pins().size(); ++i)
    if (ir::scopeMatches(pattern, normalised(pinText(schedule, i)))) return schedule.pinSpan(i);
  // The planner writes an exclusion with its ids listed (a range expanded).
  for (std::size_t i = 0; i < schedule.exclusions().size(); ++i)
    if (normalised(passes::exclusionText(exclusionOf(schedule.exclusions()[i]))) == pattern)
      return schedule.exclusionSpan(i);
  return {};
}

}  // namespace meshflow::interp
