// train(...) and its data sources: the serial reference trainer (docs/training.md).
#include <fmt/format.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "interp/Builtins.h"
#include "interp/DataObject.h"
#include "interp/Evaluator.h"
#include "interp/FileAccess.h"
#include "interp/Tracing.h"
#include "passes/Autodiff.h"
#include "runtime/GpuHosts.h"
#include "runtime/data/DataSource.h"
#include "runtime/reference/SerialExecutor.h"
#include "interp/PlanInputs.h"
#include "interp/PlanObject.h"
#include "interp/TrainingLoop.h"
#include "passes/PlanPipeline.h"
#include "passes/Planner.h"
#include "runtime/distributed/ProcessGroup.h"
#include "runtime/parallel/PlanExecution.h"

namespace meshflow::interp {
namespace {

Value makeData(Evaluator& ev, std::unique_ptr<runtime::DataSource> source) {
  return dataValue(ev.heap(), std::move(source));
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
    return makeData(ev, runtime::textData(path, contents.str(), std::filesystem::absolute(allowed).string()));
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
           fmt::format("training at batch {} could hold up to {} of tensors, more than "
                       "the memory limit of {} (raise it with --max-memory)",
                       batch, ir::formatBytes(bytes), ir::formatBytes(limit)),
           where);
}

enum TrainArg {
  kModel, kCluster, kBatch, kSteps, kData, kOptimizer, kSeed, kLogEvery, kPlan, kCheckpoint, kEvery, kVerify, kTrace,
  kLossScale, kInitialLossScale, kLossScaleWindow
};

const ClusterObject* clusterArg(const BoundArgs& a) {
  if (a[kCluster].isNone()) return nullptr;
  const auto* cluster = handleArg<ClusterObject>(a, kCluster);
  if (!cluster)
    argumentError(a, kCluster, DiagnosticKind::TypeMismatch,
                  fmt::format("cluster must be a cluster such as cpu(devices = 4), not {}", a[kCluster].aTypeName()));
  return cluster;
}

// A GPU cluster (cuda(...), or devices from gpu(...)) trains on the cuda
// backend, as does every cluster under `meshflow run --backend cuda`.
bool onGpus(Evaluator& ev, const ClusterObject* cluster) {
  return ev.state().config.cuda || (cluster && cluster->field("device")->field("kind").str() == "gpu");
}

// The cuda backend's devices, made before anything is planned: without a GPU
// (or a CUDA build) train() fails at once, naming CUDA.
std::unique_ptr<runtime::DeviceHost> gpuHost(const BoundArgs& a, const ClusterObject* cluster, std::int64_t devices) {
  try {
    return runtime::makeGpuHost({static_cast<int>(devices), runtime::ParallelOptions{}.timeout});
  } catch (const runtime::GpuUnavailable& e) {
    failAt(DiagnosticKind::TrainingError,
           fmt::format("cannot train on {}: {}", cluster ? cluster->name() : std::string("the cuda backend"), e.what()),
           cluster ? a.spans[kCluster] : a.callSpan);
  }
}

// The plan to run: the one given, or (plan = auto or none on several devices)
// the planner's, with pipeline and data parallelism only (docs/training.md).
ir::Plan planToRun(Evaluator& ev, const BoundArgs& a, const ir::Graph& forward, const ir::Cluster& cluster,
                   std::int64_t batch) {
  if (const auto* given = handleArg<PlanObject>(a, kPlan)) {
    if (given->plan().globalBatch != batch)
      argumentError(a, kPlan, DiagnosticKind::InvalidValue,
                    fmt::format("the plan is for batch {}, but train() has batch = {}", given->plan().globalBatch,
                                batch));
    return given->plan();
  }
  if (!a[kPlan].isNone() && a[kPlan].kind() != ValueKind::Auto)
    argumentError(a, kPlan, DiagnosticKind::TypeMismatch,
                  fmt::format("plan must be auto or a plan from plan(...), not {}", a[kPlan].aTypeName()));
  passes::PlanRequest request;
  request.globalBatch = batch;
  request.maxTensorParallel = 1;
  request.control = &ev.state().planControl;
  try {
    return passes::planTraining(forward, cluster, request);
  } catch (const std::runtime_error& error) {
    failAt(DiagnosticKind::PlanningError, fmt::format("cannot plan training: {}", error.what()), a.callSpan);
  }
}

// The plan's peak bytes on each device (0 on a device it leaves idle).
std::vector<double> predictedMemory(const ir::Plan& plan, int devices) {
  std::vector<double> bytes(static_cast<std::size_t>(devices), 0);
  for (const ir::PlanStage& stage : plan.stages)
    for (int d : stage.devices)
      if (d >= 0 && d < devices) {
        double& held = bytes[static_cast<std::size_t>(d)];
        held = std::max(held, stage.peakMemoryBytes);
      }
  return bytes;
}

// A plan whose devices would hold more than the cluster's devices have is
// refused before anything runs.
void refuseIfTooBig(const BoundArgs& a, const ir::Plan& plan, double limit) {
  if (limit <= 0) return;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const ir::PlanStage& stage = plan.stages[s];
    if (stage.peakMemoryBytes <= limit) continue;
    failAt(DiagnosticKind::TrainingError,
           fmt::format("the plan needs {} on each device of stage {}, more than the cluster's {} per device; "
                       "give the devices more memory (cpu(memory = ...)) or plan for this cluster",
                       runtime::bytesText(stage.peakMemoryBytes), s, runtime::bytesText(limit)),
           a[kPlan].isNone() ? a.callSpan : a.spans[kPlan]);
  }
}

// MESHFLOW_INJECT_FAULT=DEVICE:STEP:INSTRUCTION makes that instruction fail,
// for the tests of failures across processes (docs/distributed.md); the
// value must parse, else it is ignored.
std::optional<runtime::InjectedFault> injectedFault() {
  const char* text = std::getenv("MESHFLOW_INJECT_FAULT");
  runtime::InjectedFault fault;
  char extra = 0;
  if (!text || std::sscanf(text, "%d:%" SCNd64 ":%zu%c", &fault.device, &fault.step, &fault.instruction, &extra) != 3)
    return std::nullopt;
  return fault;
}

std::unique_ptr<StepRunner> makeRunner(Evaluator& ev, const BoundArgs& a, const ir::Graph& forward,
                                       const passes::TrainingGraph& training, std::int64_t batch,
                                       const runtime::DataSource& data) {
  const ClusterObject* clusterObject = clusterArg(a);
  const auto* planObject = handleArg<PlanObject>(a, kPlan);
  std::optional<ir::Cluster> cluster;
  if (clusterObject) cluster = clusterOf(*clusterObject);
  else if (planObject) cluster = planObject->cluster();
  std::int64_t devices = cluster ? cluster->nodes * cluster->devicesPerNode : 1;
  // Under --backend mpi each process takes a GPU of its machine when the job
  // starts (runtime::jobHost); here, this process's threads take them now.
  const bool gpuCluster = onGpus(ev, clusterObject);
  std::unique_ptr<runtime::DeviceHost> gpus;
  if (gpuCluster && !ev.state().config.processes) gpus = gpuHost(a, clusterObject, devices);
  if (devices == 1 && a[kPlan].isNone() && !gpuCluster) return serialRunner(training, batch);
  if (!cluster && gpuCluster)
    failAt(DiagnosticKind::TrainingError,
           "the cuda backend runs a plan on a cluster's devices: give one, e.g. cluster = cuda(devices = 1)",
           a.callSpan);
  if (!cluster) argumentError(a, kPlan, DiagnosticKind::InvalidValue, "plan = auto needs a cluster");
  ir::Plan plan = planToRun(ev, a, forward, *cluster, batch);
  refuseIfTooBig(a, plan, cluster->device.memoryBytes);
  try {
    runtime::ParallelPlan parallel = runtime::parallelPlanOf(forward, plan);
    parallel.fusedAttention = cluster->device.fusedKernels;
    runtime::ParallelOptions options;
    options.batch = batch;
    options.devices = static_cast<int>(devices);
    // The device threads take turns on this machine's cores (or as many as
    // the cluster says), and the simulator predicts the step with those turns.
    ir::Cluster host = *cluster;
    if (host.hostCores < 1) host.hostCores = std::max(1u, std::thread::hardware_concurrency());
    options.hostCores = static_cast<int>(host.hostCores);
    std::string text = runtime::parallelPlanText(parallel, batch, &plan);
    if (host.hostCores < devices) text += fmt::format(" taking turns on {} host cores", host.hostCores);
    options.deviceMemory = static_cast<std::int64_t>(cluster->device.memoryBytes);
    options.fault = injectedFault();
    // Under `meshflow run --backend mpi` each device is a process of the job.
    if (runtime::ProcessGroup* processes = ev.state().config.processes.get()) {
      options.timeout = processes->timeout();
      options.hostCores = 0;
      std::string described = fmt::format("{} as {} {} processes{}", runtime::parallelPlanText(parallel, batch, &plan),
                                          processes->size(), processes->backend(), gpuCluster ? " on GPUs" : "");
      return processRunner(*processes, {training, std::move(parallel), options, data.recipe(), gpuCluster},
                           passes::simulatorOptions(*cluster), std::move(described),
                           predictedMemory(plan, static_cast<int>(devices)));
    }
    if (gpus) {
      options.hostCores = 0;
      text += " on the cuda backend";
    }
    return parallelRunner(training, std::move(parallel), options, passes::simulatorOptions(host), text,
                          predictedMemory(plan, static_cast<int>(devices)), std::move(gpus));
  } catch (const std::runtime_error& error) {
    failAt(DiagnosticKind::TrainingError, fmt::format("cannot run the plan: {}", error.what()),
           a[kPlan].isNone() ? a.callSpan : a.spans[kPlan]);
  }
}

// trace = "step.trace.json": the last step's measured Chrome trace, which only
// a plan's devices record.
void traceArg(Evaluator& ev, const BoundArgs& a, const StepRunner& runner, TrainingLoop& loop) {
  if (a[kTrace].isNone()) return;
  const std::string& path = stringArg(a, kTrace, "trace");
  if (!runner.parallel())
    argumentError(a, kTrace, DiagnosticKind::InvalidValue,
                  "trace needs a plan on the parallel runtime: the serial reference runs on no devices");
  try {
    loop.trace = checkWrite(ev.state().config, path);
  } catch (ScriptError& denied) {
    argumentError(a, kTrace, DiagnosticKind::AccessDenied, denied.diagnostic().message);
  }
  loop.traceSpan = a.spans[kTrace];
}

// The checkpoint directory: readable to resume from, writable to save to. A
// resume problem (a corrupt checkpoint) is reported before a write permission.
void checkpointArg(Evaluator& ev, const BoundArgs& a, TrainingLoop& loop) {
  if (a[kCheckpoint].isNone()) return;
  const std::string& dir = stringArg(a, kCheckpoint, "checkpoint");
  try {
    loop.checkpoint = checkRead(ev.state().config, dir);
  } catch (ScriptError& denied) {
    argumentError(a, kCheckpoint, DiagnosticKind::AccessDenied, denied.diagnostic().message);
  }
  try {
    checkWrite(ev.state().config, dir);
  } catch (ScriptError& denied) {
    loop.checkpointDenied = denied.diagnostic().message;
  }
}

// The precision a model computes in: the dtype of its half-precision
// parameters (mixed precision), else f32.
ir::DType modelPrecision(const ir::Graph& forward) {
  for (ir::ValueId p : forward.parameters()) {
    ir::DType dtype = forward.value(p).type.dtype;
    if (dtype == ir::DType::F16 || dtype == ir::DType::BF16) return dtype;
  }
  return ir::DType::F32;
}

// loss_scale = "dynamic" | "off", or none: dynamic for an f16 model, whose
// gradients underflow (and overflow) f16's narrow range, and off otherwise
// (bf16 has f32's range). initial_loss_scale and loss_scale_window set the
// dynamic scaler (docs/training.md).
void lossScaleArgs(const BoundArgs& a, ir::DType precision, passes::OptimizerConfig& optimizer) {
  bool dynamic = precision == ir::DType::F16;
  if (!a[kLossScale].isNone()) {
    const std::string& mode = stringArg(a, kLossScale, "loss_scale");
    if (mode != "dynamic" && mode != "off")
      argumentError(a, kLossScale, DiagnosticKind::InvalidValue,
                    fmt::format("loss_scale must be \"dynamic\" or \"off\", not \"{}\"", mode));
    dynamic = mode == "dynamic";
  }
  double initial = numberArg(a, kInitialLossScale, "initial_loss_scale");
  if (!(initial >= 1 && std::isfinite(initial)))
    argumentError(a, kInitialLossScale, DiagnosticKind::InvalidValue,
                  "initial_loss_scale must be a finite number >= 1");
  std::int64_t window = intArg(a, kLossScaleWindow, "loss_scale_window");
  if (window < 1)
    argumentError(a, kLossScaleWindow, DiagnosticKind::InvalidValue, "loss_scale_window must be >= 1");
  optimizer.lossScale = dynamic ? initial : 0;
  optimizer.lossScaleWindow = window;
}

Value train(Evaluator& ev, BoundArgs& a) {
  auto model = modelOf(ev, a[kModel], a.spans[kModel]);
  std::int64_t batch = intArg(a, kBatch, "batch");
  std::int64_t steps = intArg(a, kSteps, "steps");
  if (batch < 1 || batch > (1 << 20))
    argumentError(a, kBatch, DiagnosticKind::InvalidValue, "batch must be between 1 and 2^20");
  if (steps < 1) argumentError(a, kSteps, DiagnosticKind::InvalidValue, "steps must be >= 1");
  std::shared_ptr<runtime::DataSource> data = runtime::syntheticData(0);
  if (!a[kData].isNone()) {
    auto* object = a[kData].kind() == ValueKind::Object ? dynamic_cast<DataObject*>(a[kData].object().get()) : nullptr;
    if (!object)
      argumentError(a, kData, DiagnosticKind::TypeMismatch, "data must be synthetic(seed) or text(path)");
    data = object->source;
  }
  passes::OptimizerConfig optimizer = optimizerOf(a, kOptimizer);
  std::int64_t every = intArg(a, kEvery, "every");
  if (every < 0) argumentError(a, kEvery, DiagnosticKind::InvalidValue, "every must be >= 0 (0: at the end)");

  TracedModel traced = traceModel(ev, *model, a.callSpan);
  const ir::DType precision = modelPrecision(traced.tracer->graph);
  lossScaleArgs(a, precision, optimizer);
  passes::TrainingGraph training;
  try {
    training = passes::buildTrainingGraph(traced.tracer->graph, optimizer);
  } catch (const passes::AutodiffError& error) {
    failAt(DiagnosticKind::InvalidModel, fmt::format("cannot train '{}': {}", traced.name, error.what()),
           a.callSpan);
  }
  requireMemory(ev, training.graph, batch, a.callSpan);
  std::unique_ptr<StepRunner> runner = makeRunner(ev, a, traced.tracer->graph, training, batch, *data);
  std::unique_ptr<StepRunner> reference;
  // The serial reference has nothing to be verified against.
  if (boolArg(a, kVerify, "verify") && runner->parallel()) reference = serialRunner(training, batch);

  TrainingLoop loop;
  loop.model = traced.name;
  loop.graph = &training.graph;
  loop.data = data.get();
  loop.batch = batch;
  loop.steps = steps;
  loop.seed = static_cast<std::uint64_t>(intArg(a, kSeed, "seed"));
  loop.optimizer = passes::optimizerKindName(optimizer.kind);
  loop.logEvery = intArg(a, kLogEvery, "log_every");
  checkpointArg(ev, a, loop);
  loop.every = every;
  std::tie(loop.work, loop.unit) = workPerStep(training.graph, batch);
  loop.call = a.callSpan;
  loop.precision = precision;
  loop.lossScaling = optimizer.lossScale > 0;
  loop.dataSpan = a.spans[kData];
  loop.checkpointSpan = a.spans[kCheckpoint];
  traceArg(ev, a, *runner, loop);
  if (loop.logEvery > 0 && runner->parallel())
    ev.write(fmt::format("training '{}' on {}\n", traced.name, runner->describe()));
  return runTrainingLoop(ev, loop, *runner, reference.get());
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
                 {"log_every", Value::integer(1)},
                 {"plan", Value()},
                 {"checkpoint", Value()},
                 {"every", Value::integer(0)},
                 {"verify", Value::boolean(false)},
                 {"trace", Value()},
                 {"loss_scale", Value()},
                 {"initial_loss_scale", Value::number(65536)},
                 {"loss_scale_window", Value::integer(2000)}},
                train);
}

}  // namespace meshflow::interp
