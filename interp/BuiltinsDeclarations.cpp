// Building blocks of cluster and schedule declarations: gpu(), link(),
// optimizers, pin() and exclude().
#include <fmt/format.h>

#include <algorithm>

#include "interp/Builtins.h"
#include "ir/Counted.h"
#include "interp/Evaluator.h"
#include "interp/Handles.h"

namespace meshflow::interp {
namespace {

constexpr Dimension kBytes{1, 0, 0};
constexpr Dimension kSeconds{0, 1, 0};
constexpr Dimension kBytesPerSecond{1, -1, 0};
constexpr Dimension kFlopPerSecond{0, -1, 1};

double positiveQuantity(const BoundArgs& a, std::size_t i, Dimension d, const char* what) {
  double value = quantityArg(a, i, d, what);
  if (!(value > 0))
    argumentError(a, i, DiagnosticKind::InvalidValue, fmt::format("{} must be positive", what));
  return value;
}

Value gpu(Evaluator& ev, BoundArgs& a) {
  stringArg(a, 0, "the device name");
  positiveQuantity(a, 1, kBytes, "memory");
  positiveQuantity(a, 2, kFlopPerSecond, "peak");
  positiveQuantity(a, 3, kBytesPerSecond, "memory_bandwidth");
  boolArg(a, 4, "fused_kernels");
  return ev.makeRecord({{"kind", ev.makeString("gpu")}, {"name", a[0]}, {"memory", a[1]},
                        {"peak", a[2]}, {"memory_bandwidth", a[3]}, {"fused_kernels", a[4]}});
}

Value link(Evaluator& ev, BoundArgs& a) {
  positiveQuantity(a, 0, kBytesPerSecond, "bandwidth");
  double latency = quantityArg(a, 1, kSeconds, "latency");
  if (latency < 0) argumentError(a, 1, DiagnosticKind::InvalidValue, "latency cannot be negative");
  return ev.makeRecord({{"kind", ev.makeString("link")}, {"bandwidth", a[0]}, {"latency", a[1]}});
}

// Every optimizer setting is a non-negative number; betas lie in [0, 1).
void defineOptimizer(Environment& env, const char* kind, std::vector<ParamSpec> params) {
  std::vector<std::string> names;
  for (const auto& p : params) names.push_back(p.name);
  defineBuiltin(env, kind, params, [kind, names](Evaluator& ev, BoundArgs& a) {
    std::vector<std::pair<std::string, Value>> fields = {{"kind", ev.makeString(kind)}};
    for (std::size_t i = 0; i < names.size(); ++i) {
      double v = numberArg(a, i, names[i].c_str());
      if (!(v >= 0))
        argumentError(a, i, DiagnosticKind::InvalidValue, fmt::format("{} must be >= 0", names[i]));
      if (names[i].rfind("beta", 0) == 0 && v >= 1)
        argumentError(a, i, DiagnosticKind::InvalidValue, fmt::format("{} must be below 1", names[i]));
      fields.emplace_back(names[i], Value::number(v));
    }
    return ev.makeRecord(std::move(fields));
  });
}

Value pin(Evaluator& ev, BoundArgs& a) {
  // pin(layers = 0..4, stage = 0), pin(op = "block*.fc1", sharding = "RS1"),
  // pin(stage = 1, devices = [4, 5, 6, 7]).
  const Value &layers = a[0], &stage = a[1], &op = a[2], &sharding = a[3], &devices = a[4];
  if (!layers.isNone() && layers.kind() != ValueKind::Range)
    argumentError(a, 0, DiagnosticKind::TypeMismatch, "pin(layers = ...) takes a range such as 0..4");
  if (!stage.isNone() && (!stage.isInt() || stage.asInt() < 0))
    argumentError(a, 1, DiagnosticKind::InvalidValue, "pin(stage = ...) takes a stage index >= 0");
  if (!op.isNone()) stringArg(a, 2, "pin(op = ...)");
  if (!sharding.isNone()) stringArg(a, 3, "pin(sharding = ...)");
  if (!devices.isNone()) {
    bool ok = devices.kind() == ValueKind::List || devices.kind() == ValueKind::Range;
    for (const auto& d : devices.items()) ok = ok && d.isInt() && d.asInt() >= 0;
    if (!ok) argumentError(a, 4, DiagnosticKind::TypeMismatch, "pin(devices = ...) takes device ids");
  }
  // A stage is itself what is pinned when devices say where it goes.
  bool what = !layers.isNone() || !op.isNone() || (!stage.isNone() && !devices.isNone());
  bool where = !stage.isNone() || !sharding.isNone() || !devices.isNone();
  if (!what || !where)
    failAt(DiagnosticKind::InvalidValue,
           "pin(...) needs what to pin (layers =, op =, or a stage = given devices =) "
           "and where (stage =, sharding = or devices =)",
           a.callSpan);
  if (!sharding.isNone() && op.isNone())
    failAt(DiagnosticKind::InvalidValue, "pin(sharding = ...) applies to an op: add op = \"...\"",
           a.callSpan);
  // The planner takes three shapes of pin; refuse the others where they are written.
  if (!op.isNone() && (!layers.isNone() || !stage.isNone() || !devices.isNone()))
    failAt(DiagnosticKind::InvalidValue,
           "pin(op = ...) fixes an op's sharding only; the op's stage follows its layer", a.callSpan);
  if (!devices.isNone() && stage.isNone())
    failAt(DiagnosticKind::InvalidValue, "pin(devices = ...) places a stage: add stage = ...",
           a.callSpan);
  if (!layers.isNone()) {
    const auto& range = static_cast<const RangeObject&>(*layers.object());
    if (range.step != 1 || range.begin < 0 || range.size() < 1)
      argumentError(a, 0, DiagnosticKind::InvalidValue,
                    "pin(layers = ...) takes a non-empty range a..b of layers, a >= 0");
  }
  if (devices.kind() == ValueKind::Range) {
    const auto& range = static_cast<const RangeObject&>(*devices.object());
    if (range.size() < 1 || std::min(range.at(0), range.at(range.size() - 1)) < 0)
      argumentError(a, 4, DiagnosticKind::InvalidValue, "pin(devices = ...) takes device ids >= 0");
  }
  if (devices.kind() == ValueKind::List && devices.items().empty())
    argumentError(a, 4, DiagnosticKind::InvalidValue, "pin(devices = ...) takes at least one device");
  std::vector<std::pair<std::string, Value>> fields = {{"kind", ev.makeString("pin")}};
  const char* names[] = {"layers", "stage", "op", "sharding", "devices"};
  for (std::size_t i = 0; i < 5; ++i)
    if (!a[i].isNone()) fields.emplace_back(names[i], a[i]);
  return ev.makeRecord(std::move(fields));
}

// exclude(devices = [6, 7]) or exclude(nodes = [3]): devices no stage may use
// (the planner checks the ids against the cluster, docs/planning.md).
Value exclude(Evaluator& ev, BoundArgs& a) {
  if (a[0].isNone() == a[1].isNone())
    failAt(DiagnosticKind::InvalidValue,
           "exclude(...) takes either devices = [...] or nodes = [...]", a.callSpan);
  const std::size_t i = a[0].isNone() ? 1 : 0;
  const char* what = i == 0 ? "exclude(devices = ...)" : "exclude(nodes = ...)";
  const Value& ids = a[i];
  bool ok = ids.kind() == ValueKind::List || ids.kind() == ValueKind::Range;
  for (const auto& d : ids.items()) ok = ok && d.isInt();
  if (!ok)
    argumentError(a, i, DiagnosticKind::TypeMismatch,
                  fmt::format("{} takes a list or range of {} ids", what, i == 0 ? "device" : "node"));
  std::int64_t count = 0, least = 0;
  if (ids.kind() == ValueKind::Range) {
    const auto& range = static_cast<const RangeObject&>(*ids.object());
    count = range.size();
    if (count > 0) least = std::min(range.at(0), range.at(count - 1));
  } else {
    count = std::int64_t(ids.items().size());
    for (const auto& d : ids.items()) least = std::min(least, d.asInt());
  }
  if (count < 1)
    argumentError(a, i, DiagnosticKind::InvalidValue, fmt::format("{} takes at least one id", what));
  if (least < 0) argumentError(a, i, DiagnosticKind::InvalidValue, fmt::format("{} takes ids >= 0", what));
  return ev.makeRecord(
      {{"kind", ev.makeString("exclude")}, {i == 0 ? "devices" : "nodes", ids}});
}

// cpu(devices = 8, mesh = [2, 4]): a virtual cluster of CPU threads, 2 "nodes"
// of 4 devices. Its device figures are nominal (one core's fp32 rate and a
// share of memory bandwidth) unless `peak` and `memory_bandwidth` give measured
// ones (bench/bench_runtime prints this machine's). `cores` says how many host
// cores the devices share (plans and simulations then model the turns they
// take); train() uses this machine's when it is not given. `memory` is each
// device's memory (4 GiB unless given): plans fit it, and train() refuses a
// plan that does not and stops a device that would hold more.
// devices = N (argument 0) and mesh = [nodes, devices_per_node] (argument 1,
// optional: one node of N).
struct MeshShape {
  std::int64_t nodes = 1, perNode = 1;
};

MeshShape meshArgs(const BoundArgs& a) {
  std::int64_t devices = intArg(a, 0, "devices");
  if (devices < 1) argumentError(a, 0, DiagnosticKind::InvalidValue, "devices must be >= 1");
  if (a[1].isNone()) return {1, devices};
  const auto& mesh = a[1].items();
  if (a[1].kind() != ValueKind::List || mesh.size() != 2 || !mesh[0].isInt() || !mesh[1].isInt() ||
      mesh[0].asInt() < 1 || mesh[1].asInt() < 1)
    argumentError(a, 1, DiagnosticKind::InvalidValue, "mesh must be [nodes, devices_per_node]");
  MeshShape shape{mesh[0].asInt(), mesh[1].asInt()};
  if (shape.nodes * shape.perNode != devices)
    argumentError(a, 1, DiagnosticKind::InvalidValue,
                  fmt::format("mesh [{}, {}] has {}, not {}", shape.nodes, shape.perNode,
                              ir::counted(shape.nodes * shape.perNode, "device"), devices));
  return shape;
}

Value cpu(Evaluator& ev, BoundArgs& a) {
  auto [nodes, perNode] = meshArgs(a);
  if (!a[4].isNone() && (!a[4].isInt() || a[4].asInt() < 1))
    argumentError(a, 4, DiagnosticKind::InvalidValue,
                  fmt::format("cores must be an integer >= 1, not {}", a[4].isInt() ? a[4].repr() : a[4].aTypeName()));
  if (!a[2].isNone()) positiveQuantity(a, 2, kFlopPerSecond, "peak");
  if (!a[3].isNone()) positiveQuantity(a, 3, kBytesPerSecond, "memory_bandwidth");
  if (!a[5].isNone()) positiveQuantity(a, 5, kBytes, "memory");
  boolArg(a, 6, "fused_kernels");
  Value device = ev.makeRecord({{"kind", ev.makeString("cpu")},
                                {"name", ev.makeString("cpu-thread")},
                                {"memory", a[5].isNone() ? Value::quantity(4.0 * (1 << 30), kBytes) : a[5]},
                                {"peak", a[2].isNone() ? Value::quantity(50e9, kFlopPerSecond) : a[2]},
                                {"memory_bandwidth",
                                 a[3].isNone() ? Value::quantity(10e9, kBytesPerSecond) : a[3]},
                                {"fused_kernels", a[6]}});
  Value link = ev.makeRecord({{"kind", ev.makeString("link")},
                              {"bandwidth", Value::quantity(10e9, kBytesPerSecond)},
                              {"latency", Value::quantity(1e-6, kSeconds)}});
  Fields fields{{"nodes", Value::integer(nodes)},
                {"devices_per_node", Value::integer(perNode)},
                {"device", device},
                {"intra_node", link},
                {"inter_node", link}};
  if (!a[4].isNone()) fields.emplace_back("cores", a[4]);
  auto cluster = std::make_shared<ClusterObject>("cpu", std::move(fields));
  ev.heap().adopt(cluster, kObjectOverhead);
  return Value::object(ValueKind::Object, std::move(cluster));
}

// cuda(devices = 2, mesh = [1, 2], memory = 80GB, peak = 989TFLOPS,
// memory_bandwidth = 3350GB/s, fused_kernels = false): N devices on this machine's GPUs, which
// train() runs on the cuda backend (several virtual devices share a GPU when
// it has fewer, docs/gpu.md). Its figures, for plans and simulations, are an
// H100 SXM's (dense bf16 peak) unless given.
Value cuda(Evaluator& ev, BoundArgs& a) {
  auto [nodes, perNode] = meshArgs(a);
  if (!a[2].isNone()) positiveQuantity(a, 2, kBytes, "memory");
  if (!a[3].isNone()) positiveQuantity(a, 3, kFlopPerSecond, "peak");
  if (!a[4].isNone()) positiveQuantity(a, 4, kBytesPerSecond, "memory_bandwidth");
  boolArg(a, 5, "fused_kernels");
  Value device = ev.makeRecord({{"kind", ev.makeString("gpu")},
                                {"name", ev.makeString("cuda-gpu")},
                                {"memory", a[2].isNone() ? Value::quantity(80e9, kBytes) : a[2]},
                                {"peak", a[3].isNone() ? Value::quantity(989e12, kFlopPerSecond) : a[3]},
                                {"memory_bandwidth",
                                 a[4].isNone() ? Value::quantity(3350e9, kBytesPerSecond) : a[4]},
                                {"fused_kernels", a[5]}});
  Value nvlink = ev.makeRecord({{"kind", ev.makeString("link")},
                                {"bandwidth", Value::quantity(450e9, kBytesPerSecond)},
                                {"latency", Value::quantity(2e-6, kSeconds)}});
  Value network = ev.makeRecord({{"kind", ev.makeString("link")},
                                 {"bandwidth", Value::quantity(50e9, kBytesPerSecond)},
                                 {"latency", Value::quantity(10e-6, kSeconds)}});
  Fields fields{{"nodes", Value::integer(nodes)},
                {"devices_per_node", Value::integer(perNode)},
                {"device", device},
                {"intra_node", nvlink},
                {"inter_node", network}};
  auto cluster = std::make_shared<ClusterObject>("cuda", std::move(fields));
  ev.heap().adopt(cluster, kObjectOverhead);
  return Value::object(ValueKind::Object, std::move(cluster));
}

}  // namespace

void installDeclarationBuiltins(Environment& env) {
  defineBuiltin(env, "gpu",
                {{"name", {}},
                 {"memory", {}},
                 {"peak", {}},
                 {"memory_bandwidth", {}},
                 {"fused_kernels", Value::boolean(false)}},
                gpu);
  defineBuiltin(env, "cpu",
                {{"devices", Value::integer(1)},
                 {"mesh", Value()},
                 {"peak", Value()},
                 {"memory_bandwidth", Value()},
                 {"cores", Value()},
                 {"memory", Value()},
                 {"fused_kernels", Value::boolean(false)}},
                cpu);
  defineBuiltin(env, "cuda",
                {{"devices", Value::integer(1)},
                 {"mesh", Value()},
                 {"memory", Value()},
                 {"peak", Value()},
                 {"memory_bandwidth", Value()},
                 {"fused_kernels", Value::boolean(false)}},
                cuda);
  defineBuiltin(env, "link", {{"bandwidth", {}}, {"latency", Value::quantity(0, kSeconds)}}, link);
  defineOptimizer(env, "adam",
                  {{"lr", Value::number(1e-3)}, {"beta1", Value::number(0.9)},
                   {"beta2", Value::number(0.999)}, {"eps", Value::number(1e-8)},
                   {"weight_decay", Value::number(0)}, {"clip_norm", Value::number(0)}});
  defineOptimizer(env, "adamw",
                  {{"lr", Value::number(1e-3)}, {"beta1", Value::number(0.9)},
                   {"beta2", Value::number(0.999)}, {"eps", Value::number(1e-8)},
                   {"weight_decay", Value::number(0.01)}, {"clip_norm", Value::number(0)}});
  defineOptimizer(env, "sgd",
                  {{"lr", Value::number(1e-2)}, {"momentum", Value::number(0)},
                   {"weight_decay", Value::number(0)}, {"clip_norm", Value::number(0)}});
  defineBuiltin(env, "pin",
                {{"layers", Value()}, {"stage", Value()}, {"op", Value()}, {"sharding", Value()},
                 {"devices", Value()}},
                pin);
  defineBuiltin(env, "exclude", {{"devices", Value()}, {"nodes", Value()}}, exclude);
}

}  // namespace meshflow::interp
