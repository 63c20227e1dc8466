#include "runtime/distributed/TrainingJob.h"

#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace meshflow::runtime {
namespace {

using json = nlohmann::json;

// ---- tensors --------------------------------------------------------------

json tensorJson(const Tensor& t) {
  const auto raw = t.raw();
  std::vector<std::uint8_t> bytes(raw.size());
  if (!raw.empty()) std::memcpy(bytes.data(), raw.data(), raw.size());
  return {{"dtype", ir::dtypeName(t.dtype())}, {"shape", t.shape()}, {"data", json::binary(std::move(bytes))}};
}

Tensor tensorOf(const json& j) {
  auto dtype = ir::parseDType(j.at("dtype").get<std::string>());
  if (!dtype) throw JobFormatError("a tensor of an unknown dtype");
  Tensor t = Tensor::uninitialized(*dtype, j.at("shape").get<Shape>());
  const auto& bytes = j.at("data").get_binary();
  if (bytes.size() != t.bytes())
    throw JobFormatError(fmt::format("a tensor of {} holds {} bytes, not {}", t.typeText(), bytes.size(), t.bytes()));
  if (!bytes.empty()) std::memcpy(t.raw().data(), bytes.data(), bytes.size());
  return t;
}

// ---- the graph ------------------------------------------------------------

json attributeJson(const ir::Attribute& a) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t>) return {{"i", v}};
        else if constexpr (std::is_same_v<T, double>) return {{"d", v}};
        else if constexpr (std::is_same_v<T, std::string>) return {{"s", v}};
        else return {{"v", v}};
      },
      a);
}

ir::Attribute attributeOf(const json& j) {
  if (j.contains("i")) return j["i"].get<std::int64_t>();
  if (j.contains("d")) return j["d"].get<double>();
  if (j.contains("s")) return j["s"].get<std::string>();
  return j.at("v").get<std::vector<std::int64_t>>();
}

json typeJson(const ir::TensorType& type) {
  json dims = json::array();
  for (const ir::Dim& d : type.shape) dims.push_back({d.value, d.perBatch});
  return {{"dtype", ir::dtypeName(type.dtype)}, {"shape", dims}};
}

ir::TensorType typeOf(const json& j) {
  ir::TensorType type;
  auto dtype = ir::parseDType(j.at("dtype").get<std::string>());
  if (!dtype) throw JobFormatError("a value of an unknown dtype");
  type.dtype = *dtype;
  for (const json& d : j.at("shape")) type.shape.push_back({d.at(0).get<std::int64_t>(), d.at(1).get<bool>()});
  return type;
}

json graphJson(const ir::Graph& graph) {
  json ops = json::array(), values = json::array();
  for (const ir::Op& op : graph.ops()) {
    json attrs = json::object();
    for (const auto& [name, value] : op.attrs) attrs[name] = attributeJson(value);
    ops.push_back({{"kind", ir::opName(op.kind)},
                   {"in", op.inputs},
                   {"out", op.outputs},
                   {"attrs", attrs},
                   {"scope", op.scope},
                   {"loc", {op.location.file, op.location.line, op.location.column}},
                   {"phase", static_cast<int>(op.phase)},
                   {"forward", op.forwardOp ? json(*op.forwardOp) : json()}});
  }
  for (std::size_t v = 0; v < graph.valueCount(); ++v) {
    const ir::ValueInfo& info = graph.value(static_cast<ir::ValueId>(v));
    values.push_back({{"type", typeJson(info.type)}, {"producer", info.producer}, {"name", info.name}});
  }
  return {{"ops", ops}, {"values", values}, {"outputs", graph.outputs}};
}

ir::Graph graphOf(const json& j) {
  std::vector<ir::Op> ops;
  for (const json& o : j.at("ops")) {
    auto kind = ir::parseOpKind(o.at("kind").get<std::string>());
    if (!kind) throw JobFormatError(fmt::format("an unknown op '{}'", o.at("kind").get<std::string>()));
    ir::Op op{*kind, o.at("in").get<std::vector<ir::ValueId>>(), o.at("out").get<std::vector<ir::ValueId>>(),
              {}, {}, {}, ir::Phase::Forward, std::nullopt};
    for (const auto& [name, value] : o.at("attrs").items()) op.attrs[name] = attributeOf(value);
    op.scope = o.at("scope").get<std::string>();
    const json& loc = o.at("loc");
    op.location = {loc.at(0).get<std::string>(), loc.at(1).get<std::uint32_t>(), loc.at(2).get<std::uint32_t>()};
    const int phase = o.at("phase").get<int>();
    if (phase < 0 || phase > static_cast<int>(ir::Phase::Update)) throw JobFormatError("an op of an unknown phase");
    op.phase = static_cast<ir::Phase>(phase);
    if (!o.at("forward").is_null()) op.forwardOp = o["forward"].get<ir::OpId>();
    ops.push_back(std::move(op));
  }
  std::vector<ir::ValueInfo> values;
  for (const json& v : j.at("values"))
    values.push_back({typeOf(v.at("type")), v.at("producer").get<ir::OpId>(), v.at("name").get<std::string>()});
  try {
    return ir::Graph::assemble(std::move(ops), std::move(values), j.at("outputs").get<std::vector<ir::ValueId>>());
  } catch (const std::invalid_argument& e) {
    throw JobFormatError(e.what());
  }
}

// ---- the plan -------------------------------------------------------------

json specsJson(const std::vector<ir::ShardingSpec>& specs) {
  json list = json::array();
  for (const auto& s : specs) list.push_back(s.toString());
  return list;
}

std::vector<ir::ShardingSpec> specsOf(const json& j) {
  std::vector<ir::ShardingSpec> specs;
  for (const json& s : j) specs.push_back(ir::ShardingSpec::parse(s.get<std::string>()));
  return specs;
}

json stageJson(const passes::StageDescription& s) {
  return {{"meshes", s.meshes},
          {"times", {s.forwardSeconds, s.backwardSeconds, s.weightGradSeconds, s.updateSeconds, s.recomputeSeconds}},
          {"bytes", {s.activationBytes, s.heldActivationBytes, s.parameterBytes, s.gradientBytes, s.recomputeBytes}},
          {"recompute", s.recompute},
          {"shard_optimizer", s.shardOptimizer}};
}

passes::StageDescription stageOf(const json& j) {
  passes::StageDescription s;
  s.meshes = j.at("meshes").get<std::vector<std::vector<int>>>();
  const json& t = j.at("times");
  s.forwardSeconds = t.at(0).get<double>();
  s.backwardSeconds = t.at(1).get<double>();
  s.weightGradSeconds = t.at(2).get<double>();
  s.updateSeconds = t.at(3).get<double>();
  s.recomputeSeconds = t.at(4).get<double>();
  const json& b = j.at("bytes");
  s.activationBytes = b.at(0).get<std::int64_t>();
  s.heldActivationBytes = b.at(1).get<std::int64_t>();
  s.parameterBytes = b.at(2).get<std::int64_t>();
  s.gradientBytes = b.at(3).get<std::int64_t>();
  s.recomputeBytes = b.at(4).get<std::int64_t>();
  s.recompute = j.at("recompute").get<bool>();
  s.shardOptimizer = j.at("shard_optimizer").get<bool>();
  return s;
}

json planJson(const ParallelPlan& p) {
  json strategies = json::array();
  for (const auto& [op, specs] : p.strategies)
    strategies.push_back({op, specsJson(specs.inputs), specsJson(specs.outputs)});
  json costs = json::array(), recompute = json::array();
  for (const auto& s : p.costs) costs.push_back(stageJson(s));
  for (passes::Recompute r : p.recompute) recompute.push_back(passes::recomputeName(r));
  return {{"stage_of_op", p.stageOfForwardOp}, {"layer_of_op", p.layerOfForwardOp},
          {"virtual_stages", p.virtualStages},
          {"rank_devices", p.rankDevices},     {"rank_meshes", p.rankMeshes},
          {"strategies", strategies},          {"schedule", p.schedule},
          {"microbatches", p.microbatches},    {"group_size", p.groupSize},
          {"costs", costs},                    {"recompute", recompute},
          {"shard_optimizer", p.shardOptimizer}, {"fused_attention", p.fusedAttention}};
}

ParallelPlan planOf(const json& j) {
  ParallelPlan p;
  p.stageOfForwardOp = j.at("stage_of_op").get<std::vector<int>>();
  p.layerOfForwardOp = j.at("layer_of_op").get<std::vector<int>>();
  p.virtualStages = j.at("virtual_stages").get<int>();
  p.rankDevices = j.at("rank_devices").get<std::vector<std::vector<int>>>();
  p.rankMeshes = j.at("rank_meshes").get<std::vector<std::array<std::int64_t, 2>>>();
  for (const json& s : j.at("strategies"))
    p.strategies[s.at(0).get<ir::OpId>()] = PlannedSpecs{specsOf(s.at(1)), specsOf(s.at(2))};
  p.schedule = j.at("schedule").get<std::string>();
  p.microbatches = j.at("microbatches").get<int>();
  p.groupSize = j.at("group_size").get<int>();
  for (const json& s : j.at("costs")) p.costs.push_back(stageOf(s));
  for (const json& r : j.at("recompute")) {
    auto kind = passes::parseRecompute(r.get<std::string>());
    if (!kind) throw JobFormatError("an unknown recomputation");
    p.recompute.push_back(*kind);
  }
  p.shardOptimizer = j.at("shard_optimizer").get<std::vector<bool>>();
  p.fusedAttention = j.at("fused_attention").get<bool>();
  return p;
}

json optionsJson(const ParallelOptions& o) {
  json fault = o.fault ? json{o.fault->device, o.fault->step, o.fault->instruction} : json();
  return {{"batch", o.batch},           {"devices", o.devices},
          {"timeout_ms", o.timeout.count()}, {"host_cores", o.hostCores},
          {"bucket_bytes", o.bucketBytes}, {"device_memory", o.deviceMemory},
          {"fault", fault}};
}

ParallelOptions optionsOf(const json& j) {
  ParallelOptions o;
  o.batch = j.at("batch").get<std::int64_t>();
  o.devices = j.at("devices").get<int>();
  o.timeout = std::chrono::milliseconds(j.at("timeout_ms").get<std::int64_t>());
  o.hostCores = j.at("host_cores").get<int>();
  o.bucketBytes = j.at("bucket_bytes").get<std::int64_t>();
  o.deviceMemory = j.at("device_memory").get<std::int64_t>();
  if (const json& f = j.at("fault"); !f.is_null())
    o.fault = InjectedFault{f.at(0).get<int>(), f.at(1).get<std::int64_t>(), f.at(2).get<std::size_t>()};
  return o;
}

template <typename F>
auto decoding(const char* what, F&& body) {
  try {
    return body();
  } catch (const json::exception& e) {
    throw JobFormatError(fmt::format("cannot read {}: {}", what, e.what()));
  } catch (const std::invalid_argument& e) {
    throw JobFormatError(fmt::format("cannot read {}: {}", what, e.what()));
  }
}

std::string bytesOf(const json& j) {
  std::vector<std::uint8_t> bytes = json::to_msgpack(j);
  return {bytes.begin(), bytes.end()};
}

json jsonOf(std::string_view bytes) {
  return json::from_msgpack(bytes.begin(), bytes.end());
}

}  // namespace

std::string encodeJob(const TrainingJob& job) {
  json writeBacks = json::array();
  for (const auto& w : job.training.writeBacks) writeBacks.push_back({w.updated, w.target});
  const DataRecipe& d = job.data;
  return bytesOf({{"graph", graphJson(job.training.graph)},
                  {"write_backs", writeBacks},
                  {"plan", planJson(job.plan)},
                  {"options", optionsJson(job.options)},
                  {"data", {d.kind, d.seed, d.name, d.file}},
                  {"on_gpus", job.onGpus}});
}

TrainingJob decodeJob(std::string_view bytes) {
  return decoding("a training job", [&] {
    json j = jsonOf(bytes);
    TrainingJob job;
    job.training.graph = graphOf(j.at("graph"));
    for (const json& w : j.at("write_backs"))
      job.training.writeBacks.push_back({w.at(0).get<ir::ValueId>(), w.at(1).get<ir::ValueId>()});
    job.plan = planOf(j.at("plan"));
    job.options = optionsOf(j.at("options"));
    const json& d = j.at("data");
    job.data = {d.at(0).get<std::string>(), d.at(1).get<std::uint64_t>(), d.at(2).get<std::string>(),
                d.at(3).get<std::string>()};
    job.onGpus = j.at("on_gpus").get<bool>();
    return job;
  });
}

std::string encodeTensors(const TensorMap& tensors) {
  json j = json::object();
  for (const auto& [name, tensor] : tensors) j[name] = tensorJson(tensor);
  return bytesOf(j);
}

TensorMap decodeTensors(std::string_view bytes) {
  return decoding("tensors", [&] {
    TensorMap tensors;
    const json all = jsonOf(bytes);
    for (const auto& [name, t] : all.items()) tensors.emplace(name, tensorOf(t));
    return tensors;
  });
}

}  // namespace meshflow::runtime
