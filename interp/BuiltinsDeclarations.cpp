// Building blocks of cluster and schedule declarations: gpu(), link(),
// optimizers and pin().
#include <fmt/format.h>

#include "interp/Builtins.h"
#include "interp/Evaluator.h"

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
  return ev.makeRecord({{"kind", ev.makeString("gpu")}, {"name", a[0]}, {"memory", a[1]},
                        {"peak", a[2]}, {"memory_bandwidth", a[3]}});
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
  // pin(layers = 0..4, devices = [0, 1]).
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
  bool what = !layers.isNone() || !op.isNone();
  bool where = !stage.isNone() || !sharding.isNone() || !devices.isNone();
  if (!what || !where)
    failAt(DiagnosticKind::InvalidValue,
           "pin(...) needs what to pin (layers = or op =) and where (stage =, sharding = or devices =)",
           a.callSpan);
  if (!sharding.isNone() && op.isNone())
    failAt(DiagnosticKind::InvalidValue, "pin(sharding = ...) applies to an op: add op = \"...\"",
           a.callSpan);
  std::vector<std::pair<std::string, Value>> fields = {{"kind", ev.makeString("pin")}};
  const char* names[] = {"layers", "stage", "op", "sharding", "devices"};
  for (std::size_t i = 0; i < 5; ++i)
    if (!a[i].isNone()) fields.emplace_back(names[i], a[i]);
  return ev.makeRecord(std::move(fields));
}

}  // namespace

void installDeclarationBuiltins(Environment& env) {
  defineBuiltin(env, "gpu", {{"name", {}}, {"memory", {}}, {"peak", {}}, {"memory_bandwidth", {}}},
                gpu);
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
}

}  // namespace meshflow::interp
