// train(...) and its data sources: the serial reference trainer (docs/training.md).
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "interp/Builtins.h"
#include "interp/Evaluator.h"
#include "interp/FileAccess.h"
#include "interp/Tracing.h"
#include "passes/Autodiff.h"
#include "runtime/data/DataSource.h"
#include "runtime/reference/SerialExecutor.h"

namespace meshflow::interp {
namespace {

/// `synthetic(seed)` or `text(path)`: where train() takes its batches from.
class DataObject final : public Object {
 public:
  explicit DataObject(std::shared_ptr<runtime::DataSource> source) : source(std::move(source)) {}
  std::string typeName() const override { return "data"; }
  std::string repr(int) const override { return source->describe(); }
  std::shared_ptr<runtime::DataSource> source;
};

Value makeData(Evaluator& ev, std::unique_ptr<runtime::DataSource> source) {
  auto object = std::make_shared<DataObject>(std::move(source));
  ev.heap().adopt(object, kObjectOverhead);
  return Value::object(ValueKind::Object, std::move(object));
}

Value synthetic(Evaluator& ev, BoundArgs& a) {
  std::int64_t seed = intArg(a, 0, "the seed");
  return makeData(ev, runtime::syntheticData(static_cast<std::uint64_t>(seed)));
}

Value text(Evaluator& ev, BoundArgs& a) {
  const std::string& path = stringArg(a, 0, "the path");
  std::filesystem::path allowed;
  try {
    allowed = checkRead(ev.state().config, path);
  } catch (ScriptError& denied) {
    argumentError(a, 0, DiagnosticKind::AccessDenied, denied.diagnostic().message);
  }
  std::ifstream in(allowed, std::ios::binary);
  if (!in) argumentError(a, 0, DiagnosticKind::DataError, fmt::format("cannot read '{}'", path));
  std::ostringstream contents;
  contents << in.rdbuf();
  ev.ensureRoom(contents.str().size() * 5);
  try {
    return makeData(ev, runtime::textData(path, contents.str()));
  } catch (const runtime::DataError& error) {
    argumentError(a, 0, DiagnosticKind::DataError, error.what());
  }
}

passes::OptimizerConfig optimizerOf(const BoundArgs& a, std::size_t i) {
  passes::OptimizerConfig config = passes::OptimizerConfig::adam();
  if (a[i].isNone()) return config;
  Value kind = a[i].field("kind");
  if (a[i].kind() != ValueKind::Record || !kind.isString() ||
      (kind.asString() != "adam" && kind.asString() != "adamw" && kind.asString() != "sgd"))
    argumentError(a, i, DiagnosticKind::TypeMismatch,
                  fmt::format("optimizer must be adam(...), adamw(...) or sgd(...), not {}",
                              a[i].repr()));
  auto number = [&](const char* name, double fallback) {
    Value v = a[i].field(name);
    return v.isNumber() ? v.asNumber() : fallback;
  };
  config.kind = kind.asString() == "sgd"     ? passes::OptimizerConfig::Kind::Sgd
                : kind.asString() == "adamw" ? passes::OptimizerConfig::Kind::AdamW
                                             : passes::OptimizerConfig::Kind::Adam;
  config.lr = number("lr", config.lr);
  config.momentum = number("momentum", 0);
  config.beta1 = number("beta1", config.beta1);
  config.beta2 = number("beta2", config.beta2);
  config.eps = number("eps", config.eps);
  config.weightDecay = number("weight_decay", 0);
  config.clipNorm = number("clip_norm", 0);
  return config;
}

// The serial trainer runs on one device: no cluster, or cpu(devices = 1).
void requireOneDevice(const BoundArgs& a, std::size_t i) {
  if (a[i].isNone()) return;
  auto* cluster = a[i].kind() == ValueKind::Object ? dynamic_cast<ClusterObject*>(a[i].object().get())
                                                   : nullptr;
  if (!cluster)
    argumentError(a, i, DiagnosticKind::TypeMismatch,
                  fmt::format("cluster must be a cluster such as cpu(devices = 1), not {}",
                              a[i].aTypeName()));
  std::int64_t devices = cluster->field("nodes")->asInt() * cluster->field("devices_per_node")->asInt();
  Value device = *cluster->field("device");
  if (device.field("kind").str() != "cpu" || devices != 1)
    argumentError(a, i, DiagnosticKind::InvalidValue,
                  fmt::format("training runs on cpu(devices = 1) for now; parallel plans on {} "
                              "devices of {} need the planner and the parallel runtime",
                              devices, cluster->name()));
}

// Tokens per step for a language model (an input named `tokens`), else samples.
std::pair<std::int64_t, const char*> workPerStep(const ir::Graph& graph, std::int64_t batch) {
  for (ir::ValueId input : graph.inputs())
    if (graph.value(input).name == "tokens")
      return {graph.value(input).type.elements(batch), "tokens/s"};
  return {batch, "samples/s"};
}

// Every value of the training graph at once bounds what a step can hold; it
// must fit the memory limit before any tensor is allocated.
void requireMemory(Evaluator& ev, const ir::Graph& graph, std::int64_t batch, const SourceSpan& where) {
  double bytes = 0;
  for (std::size_t v = 0; v < graph.valueCount(); ++v) {
    const auto& type = graph.value(static_cast<ir::ValueId>(v)).type;
    double elements = static_cast<double>(ir::dtypeBytes(type.dtype));
    for (const auto& d : type.shape)
      elements *= static_cast<double>(d.value) * (d.perBatch ? static_cast<double>(batch) : 1.0);
    bytes += elements;
  }
  double limit = static_cast<double>(ev.state().config.limits.maxMemoryBytes);
  if (bytes > limit)
    failAt(DiagnosticKind::MemoryLimit,
           fmt::format("training at batch {} could hold up to {:.3g} bytes of tensors, more than "
                       "the memory limit of {:.3g} bytes (raise it with --max-memory)",
                       batch, bytes, limit),
           where);
}

Value train(Evaluator& ev, BoundArgs& a) {
  auto model = modelOf(ev, a[0], a.spans[0]);
  requireOneDevice(a, 1);
  std::int64_t batch = intArg(a, 2, "batch");
  std::int64_t steps = intArg(a, 3, "steps");
  if (batch < 1 || batch > (1 << 20))
    argumentError(a, 2, DiagnosticKind::InvalidValue, "batch must be between 1 and 2^20");
  if (steps < 1) argumentError(a, 3, DiagnosticKind::InvalidValue, "steps must be >= 1");
  std::shared_ptr<runtime::DataSource> data = runtime::syntheticData(0);
  if (!a[4].isNone()) {
    auto* object = a[4].kind() == ValueKind::Object ? dynamic_cast<DataObject*>(a[4].object().get()) : nullptr;
    if (!object)
      argumentError(a, 4, DiagnosticKind::TypeMismatch,
                    "data must be synthetic(seed) or text(path)");
    data = object->source;
  }
  passes::OptimizerConfig optimizer = optimizerOf(a, 5);
  auto seed = static_cast<std::uint64_t>(intArg(a, 6, "seed"));
  std::int64_t logEvery = intArg(a, 7, "log_every");

  TracedModel traced = traceModel(ev, *model, a.callSpan);
  passes::TrainingGraph training;
  try {
    training = passes::buildTrainingGraph(traced.tracer->graph, optimizer);
  } catch (const passes::AutodiffError& error) {
    failAt(DiagnosticKind::InvalidModel, fmt::format("cannot train '{}': {}", traced.name, error.what()),
           a.callSpan);
  }
  requireMemory(ev, training.graph, batch, a.callSpan);
  auto [work, unit] = workPerStep(training.graph, batch);
  std::vector<Value> losses;
  double seconds = 0;
  try {
    runtime::SerialExecutor executor(training.graph, {batch, true});
    runtime::TensorMap state;
    runtime::initializeParameters(training.graph, seed, state);
    for (std::int64_t step = 1; step <= steps; ++step) {
      ev.step();
      runtime::TensorMap inputs = data->batch(training.graph, batch, step - 1);
      auto start = std::chrono::steady_clock::now();
      auto outputs = executor.run(inputs, state, step);
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      seconds += elapsed;
      double loss = outputs.at(0).item();
      losses.push_back(Value::number(loss));
      if (logEvery > 0 && (step % logEvery == 0 || step == 1 || step == steps))
        ev.write(fmt::format("step {:>4}/{}  loss {:.4f}  {:.0f} {}  {:.1f} ms\n", step, steps,
                             loss, static_cast<double>(work) / elapsed, unit, elapsed * 1e3));
    }
  } catch (const runtime::DataError& error) {
    failAt(DiagnosticKind::DataError, error.what(), a.spans[4]);
  } catch (const runtime::ExecutionError& error) {
    failAt(DiagnosticKind::TrainingError, fmt::format("training '{}' failed: {}", traced.name, error.what()),
           a.callSpan);
  }
  return ev.makeRecord({{"losses", ev.makeList(std::move(losses))},
                        {"steps", Value::integer(steps)},
                        {"seconds", Value::quantity(seconds, Dimension{0, 1, 0})},
                        {"throughput", Value::number(static_cast<double>(work * steps) / seconds)},
                        {"unit", ev.makeString(unit)}});
}

}  // namespace

void installTrainingBuiltins(Environment& env) {
  defineBuiltin(env, "synthetic", {{"seed", Value::integer(0)}}, synthetic);
  defineBuiltin(env, "text", {{"path", {}}}, text);
  defineBuiltin(env, "train",
                {{"model", {}},
                 {"cluster", Value()},
                 {"batch", Value::integer(8)},
                 {"steps", Value::integer(10)},
                 {"data", Value()},
                 {"optimizer", Value()},
                 {"seed", Value::integer(0)},
                 {"log_every", Value::integer(1)}},
                train);
}

}  // namespace meshflow::interp
