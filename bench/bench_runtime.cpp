// The parallel CPU runtime (runtime/parallel/ParallelTrainer.h) against its own
// cost model. It prints, with sizes and units:
//
//   1. the single-thread sgemm rate of the CPU kernels at each model's own GEMM
//      shapes (every MatMul of the training graph at its microbatch size, timed
//      through runKernel), and the element-wise kernels' bytes per second;
//   2. the main example's model (examples/train_tiny_gpt.mesh: tiny_gpt, batch
//      16) planned as 2 stages × 2 data-parallel replicas, 1F1B, on 4 virtual
//      cpu devices whose spec is calibrated by those measurements: the measured
//      step time beside the simulator's prediction for the same Program;
//   3. the runtime's overhead: the share of each device's step spent outside
//      kernels and communication;
//   4. a wider GPT on 2 devices: model FLOP/s as a share of 2 × the GEMM rate.
//
// For each model it also times one microbatch's kernels serially, op by op,
// against the cost model: how much of a miss is the kernels' and how much the
// runtime's or the threads'.
//
// Then a summary of the targets, MET or NOT MET. Not a timed test: run it by
// hand (bench/README.md); the machine is shared, so the figures are noisy.
//
//   bench_runtime [STEPS]   (default 10 measured steps after 2 warm-up steps)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "interp/Tracing.h"
#include "ir/OpCost.h"
#include "meshflow/meshflow.h"
#include "passes/Autodiff.h"
#include "passes/CostModel.h"
#include "passes/PlanPipeline.h"
#include "passes/Planner.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/data/DataSource.h"
#include "runtime/parallel/OpRunner.h"
#include "runtime/parallel/ParallelTrainer.h"
#include "runtime/parallel/PlanExecution.h"
#include "runtime/reference/SerialExecutor.h"
#include "runtime/sim/Simulator.h"

using namespace meshflow;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kWarmupSteps = 2;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  std::size_t n = xs.size();
  return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

ir::Graph trace(const std::string& model) {
  Interpreter interpreter;
  auto status = interpreter.eval("import std.models\ntrace(" + model + ")", "bench.mesh");
  if (!status.ok) {
    fmt::print(stderr, "cannot trace {}: {}\n", model, renderAll(status.diagnostics));
    std::exit(1);
  }
  return dynamic_cast<interp::GraphObject*>(status.value->object().get())->graph();
}

// Runs `op` on `inputs` until `seconds` have passed; returns seconds per run.
double timeKernel(const ir::Op& op, const std::vector<runtime::Tensor>& inputs, double seconds) {
  std::vector<const runtime::Tensor*> in;
  for (const auto& t : inputs) in.push_back(&t);
  runtime::Tensor y;
  std::vector<runtime::Tensor*> out = {&y};
  runtime::cpu::runKernel(op, in, out, {});  // warm up (and limit OpenBLAS to one thread)
  auto start = Clock::now();
  long runs = 0;
  double elapsed = 0;
  do {
    runtime::cpu::runKernel(op, in, out, {});
    ++runs;
    elapsed = secondsSince(start);
  } while (elapsed < seconds);
  return elapsed / static_cast<double>(runs);
}

struct GemmRate {
  double flopsPerSecond = 0;
  int shapes = 0;   // distinct MatMul shapes timed
  int matmuls = 0;  // MatMul ops of the training graph
};

// The single-thread rate over every MatMul of `training` at `batch` samples: the
// graph's MatMul FLOPs over the time they take, each distinct shape (operand
// shapes and transpose_b) timed once through the kernel the runtime calls.
GemmRate measureGemmRate(const ir::Graph& training, std::int64_t batch, double secondsPerShape) {
  using Key = std::tuple<runtime::Shape, runtime::Shape, std::int64_t>;
  std::map<Key, std::pair<ir::OpId, int>> shapes;  // a representative op, how many
  GemmRate rate;
  for (ir::OpId id = 0; id < training.ops().size(); ++id) {
    const ir::Op& op = training.op(id);
    if (op.kind != ir::OpKind::MatMul) continue;
    ++rate.matmuls;
    auto it = op.attrs.find("transpose_b");
    std::int64_t transposeB = it == op.attrs.end() ? 0 : std::get<std::int64_t>(it->second);
    Key key{runtime::boundShape(training.value(op.inputs[0]).type, batch),
            runtime::boundShape(training.value(op.inputs[1]).type, batch),
            transposeB};
    ++shapes.try_emplace(key, id, 0).first->second.second;
  }
  double flops = 0, seconds = 0;
  for (const auto& [key, use] : shapes) {
    std::vector<runtime::Tensor> inputs = {runtime::randomNormal(std::get<0>(key), 1),
                                           runtime::randomNormal(std::get<1>(key), 2)};
    flops += use.second * ir::opCost(training, use.first, batch).flops;
    seconds += use.second * timeKernel(training.op(use.first), inputs, secondsPerShape);
  }
  rate.shapes = static_cast<int>(shapes.size());
  rate.flopsPerSecond = flops / seconds;
  return rate;
}

// Bytes per second of the element-wise Add kernel on two [rows, cols] tensors
// (read both, write one): what the roofline's memory term should use.
double measureElementwiseBandwidth(std::int64_t rows, std::int64_t cols, double seconds) {
  ir::Op add{ir::OpKind::Add, {}, {}, {}, "", {}, {}, {}};
  std::vector<runtime::Tensor> inputs = {runtime::randomNormal({rows, cols}, 1),
                                         runtime::randomNormal({rows, cols}, 2)};
  return 3.0 * 4.0 * static_cast<double>(rows * cols) / timeKernel(add, inputs, seconds);
}

// A virtual cpu cluster (as the `cpu(devices = n)` builtin) whose device is
// calibrated: the cost model prices a GEMM at FLOPs / (peak · kComputeEfficiency),
// so peak = measured rate / kComputeEfficiency makes it FLOPs / measured rate.
ir::Cluster calibratedCpu(int devices, double gemmRate, double bandwidth) {
  ir::Cluster c;
  c.nodes = 1;
  c.devicesPerNode = devices;
  c.device = {"cpu-thread (calibrated)", 4.0 * (1 << 30), gemmRate / passes::kComputeEfficiency, bandwidth};
  c.intraNode = {10e9, 1e-6};  // the cpu() builtin's nominal in-process link
  c.interNode = c.intraNode;
  return c;
}

double forwardFlops(const ir::Graph& forward, std::int64_t batch) {
  double flops = 0;
  for (ir::OpId id = 0; id < forward.ops().size(); ++id) flops += ir::opCost(forward, id, batch).flops;
  return flops;
}

// The forward and backward ops of the training graph, by ir::opCost.
double trainingFlops(const ir::Graph& training, std::int64_t batch) {
  double flops = 0;
  for (ir::OpId id = 0; id < training.ops().size(); ++id)
    if (training.op(id).phase != ir::Phase::Update) flops += ir::opCost(training, id, batch).flops;
  return flops;
}

// One microbatch's forward and backward run serially on this thread, op by op
// through the runtime's OpRunner: where kernel time goes, and what the
// calibrated cost model says the same ops take (opComputeTime over the forward
// graph, which prices each op's backward with it).
struct KernelProfile {
  double seconds = 0;
  double predicted = 0;
  std::vector<std::pair<double, std::string>> byKind;  // seconds, op kind; largest first
};

KernelProfile profileKernels(const passes::TrainingGraph& training, const ir::Graph& forward,
                             std::int64_t microbatch, const ir::DeviceSpec& device, int repeats) {
  runtime::OpRunner runner(training.graph, microbatch);
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 1, state);
  auto inputs = runtime::syntheticData(1)->batch(training.graph, microbatch, 0);
  std::map<std::string, double> byKind;
  KernelProfile profile;
  for (int r = 0; r < repeats; ++r) {
    runtime::ValueTable values;
    for (ir::OpId id = 0; id < training.graph.ops().size(); ++id) {
      const ir::Op& op = training.graph.op(id);
      if (op.phase == ir::Phase::Update || op.kind == ir::OpKind::Input || op.kind == ir::OpKind::Parameter)
        continue;
      ir::OpId one[] = {id};
      auto start = Clock::now();
      runner.run(one, values, state, inputs, 1);
      double seconds = secondsSince(start) / repeats;
      byKind[ir::opName(op.kind)] += seconds;
      profile.seconds += seconds;
    }
  }
  for (const auto& [kind, seconds] : byKind) profile.byKind.emplace_back(seconds, kind);
  std::sort(profile.byKind.rbegin(), profile.byKind.rend());
  for (ir::OpId id = 0; id < forward.ops().size(); ++id)
    profile.predicted += passes::opComputeTime(forward, id, microbatch, 1, device);
  return profile;
}

void printProfile(const KernelProfile& p, std::int64_t microbatch) {
  fmt::print("  kernels alone (one microbatch of {}, forward + backward, serial on one thread): measured "
             "{:.5f} s, cost model {:.5f} s, ratio {:.2f}\n    by op kind:",
             microbatch, p.seconds, p.predicted, p.seconds / p.predicted);
  for (std::size_t i = 0; i < std::min<std::size_t>(p.byKind.size(), 8); ++i)
    fmt::print(" {} {:.1f}%{}", p.byKind[i].second, 100 * p.byKind[i].first / p.seconds, i < 7 ? "," : "");
  fmt::print("\n");
}

struct Workload {
  std::string label;
  int layers = 1, hidden = 64, heads = 4, seq = 64, vocab = 96;
  std::int64_t batch = 1;
  int devices = 1;
  passes::PlanRequest request;

  std::string model() const {
    return fmt::format("gpt(layers = {}, hidden = {}, heads = {}, seq = {}, vocab = {})", layers, hidden, heads,
                       seq, vocab);
  }
  std::int64_t microbatch() const {
    return batch / (request.dataParallel.value_or(1) * request.microbatches.value_or(1));
  }
};

struct Outcome {
  std::string plan;
  GemmRate gemm;
  double bandwidth = 0;      // element-wise kernel bytes per second
  double measured = 0;       // median wall seconds of a step
  double best = 0;           // fastest step
  double predicted = 0;      // the simulator's makespan
  double predictedBusy = 0;  // the simulator's compute seconds summed over devices
  double maxOverhead = 0, meanOverhead = 0;
  double modelFlops = 0;     // 3 × forward
  double trainingFlops = 0;  // forward + backward ops of the training graph
  std::vector<runtime::ParallelStepResult> steps;
  KernelProfile profile;
};

// Per device, Σ (total − kernel − comm) / Σ total over the measured steps.
std::vector<double> overheadShares(const std::vector<runtime::ParallelStepResult>& steps) {
  std::vector<double> other(steps.front().devices.size()), total(other.size());
  for (const auto& step : steps)
    for (std::size_t d = 0; d < other.size(); ++d) {
      const runtime::DeviceTimes& t = step.devices[d];
      other[d] += t.totalSeconds - t.kernelSeconds - t.commSeconds;
      total[d] += t.totalSeconds;
    }
  std::vector<double> shares;
  for (std::size_t d = 0; d < other.size(); ++d)
    if (total[d] > 0) shares.push_back(other[d] / total[d]);
  return shares;
}

// Runs warm-up and measured steps; fills the measured figures of `o`.
void measureSteps(runtime::ParallelTrainer& trainer, const passes::TrainingGraph& training, std::int64_t batch,
                  int steps, Outcome& o) {
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 1, state);
  trainer.setState(state);
  auto data = runtime::syntheticData(1);
  std::vector<double> wall;
  for (int step = 1; step <= kWarmupSteps + steps; ++step) {
    auto inputs = data->batch(training.graph, batch, step - 1);
    auto start = Clock::now();
    auto result = trainer.step(inputs, step);
    double seconds = secondsSince(start);
    if (step <= kWarmupSteps) continue;
    wall.push_back(seconds);
    o.steps.push_back(std::move(result));
  }
  o.measured = median(wall);
  o.best = *std::min_element(wall.begin(), wall.end());
  auto shares = overheadShares(o.steps);
  o.maxOverhead = *std::max_element(shares.begin(), shares.end());
  for (double share : shares) o.meanOverhead += share / static_cast<double>(shares.size());
}

// Calibrates a cpu cluster at the workload's sizes (its GEMMs at the plan's
// microbatch, its element-wise kernels on a microbatch's hidden states), plans
// on it, predicts the step with the simulator and measures it.
Outcome run(const Workload& w, int steps, int profileRepeats) {
  Outcome o;
  ir::Graph forward = trace(w.model());
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  o.gemm = measureGemmRate(training.graph, w.microbatch(), 0.05);
  o.bandwidth = measureElementwiseBandwidth(w.microbatch() * w.seq, w.hidden, 0.1);
  ir::Cluster cluster = calibratedCpu(w.devices, o.gemm.flopsPerSecond, o.bandwidth);

  runtime::ParallelPlan parallel = runtime::parallelPlanOf(forward, passes::planTraining(forward, cluster, w.request));
  o.plan = runtime::parallelPlanText(parallel, w.batch);
  runtime::ParallelOptions options;
  options.batch = w.batch;
  runtime::ParallelTrainer trainer(training, parallel, options);
  auto simulated = runtime::sim::simulate(trainer.program(), passes::simulatorOptions(cluster));
  o.predicted = simulated.makespan;
  for (double busy : simulated.computeBusy) o.predictedBusy += busy;

  measureSteps(trainer, training, w.batch, steps, o);
  o.modelFlops = 3 * forwardFlops(forward, w.batch);
  o.trainingFlops = trainingFlops(training.graph, w.batch);
  o.profile = profileKernels(training, forward, w.microbatch(), cluster.device, profileRepeats);
  return o;
}

void printDevices(const std::vector<runtime::ParallelStepResult>& steps) {
  fmt::print("  per device, summed over the measured steps (comm includes waiting for peers):\n");
  fmt::print("    {:>6} {:>9} {:>9} {:>9} {:>9}  {:>7}\n", "device", "total_s", "kernel_s", "comm_s",
             "other_s", "other%");
  for (std::size_t d = 0; d < steps.front().devices.size(); ++d) {
    runtime::DeviceTimes sum;
    for (const auto& step : steps) {
      sum.totalSeconds += step.devices[d].totalSeconds;
      sum.kernelSeconds += step.devices[d].kernelSeconds;
      sum.commSeconds += step.devices[d].commSeconds;
    }
    double other = sum.totalSeconds - sum.kernelSeconds - sum.commSeconds;
    fmt::print("    {:>6} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f}  {:>6.1f}%\n", d, sum.totalSeconds,
               sum.kernelSeconds, sum.commSeconds, other, 100 * other / sum.totalSeconds);
  }
}

void printOutcome(const Workload& w, const Outcome& o, int steps) {
  fmt::print("\n== {} ==\n", w.label);
  fmt::print("  model: {}, global batch {} ({} tokens/step)\n", w.model(), w.batch, w.batch * w.seq);
  fmt::print("  model FLOPs/step = 3 x forward (ir::opCost) = {:.3f} GFLOP; the training graph's forward + "
             "backward ops = {:.3f} GFLOP\n",
             o.modelFlops / 1e9, o.trainingFlops / 1e9);
  fmt::print("  plan: {} (planTraining on the calibrated cluster, then parallelPlanOf)\n", o.plan);
  fmt::print("  calibration: sgemm {:.2f} GFLOP/s single-thread over the training graph's {} MatMuls "
             "({} distinct shapes) at microbatch {};\n"
             "               element-wise Add {:.2f} GB/s on [{}, {}] f32\n",
             o.gemm.flopsPerSecond / 1e9, o.gemm.matmuls, o.gemm.shapes, w.microbatch(), o.bandwidth / 1e9,
             w.microbatch() * w.seq, w.hidden);
  fmt::print("  measured step: median {:.4f} s, best {:.4f} s over {} steps (after {} warm-up)\n", o.measured,
             o.best, steps, kWarmupSteps);
  fmt::print("  predicted step (simulator, one core per device): {:.4f} s; compute summed over devices "
             "{:.4f} s; measured / predicted {:.2f}\n",
             o.predicted, o.predictedBusy, o.measured / o.predicted);
  printDevices(o.steps);
  printProfile(o.profile, w.microbatch());
}

std::string verdict(bool met) { return met ? "MET" : "NOT MET"; }

std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one.empty() ? "unknown" : one + " " + five + " " + fifteen;
}

// The main example's model (examples/train_tiny_gpt.mesh: tiny_gpt(seq = 64,
// layers = 2, hidden = 64, heads = 4), vocabulary 96, batch 16) on 4 devices.
Workload tinyGpt() {
  Workload w;
  w.label = "2. tiny GPT of examples/train_tiny_gpt.mesh, 2 stages x 2 replicas, 1F1B, 4 devices";
  w.layers = 2;
  w.hidden = 64;
  w.heads = 4;
  w.seq = 64;
  w.vocab = 96;
  w.batch = 16;
  w.devices = 4;
  w.request.stages = 2;
  w.request.dataParallel = 2;
  w.request.microbatches = 4;
  return w;
}

// A wider GPT on 2 devices as 2 data-parallel replicas (no pipeline bubble).
Workload wideGpt() {
  Workload w;
  w.label = "4. wider GPT, 1 stage x 2 replicas (data parallel), 2 devices";
  w.layers = 4;
  w.hidden = 512;
  w.heads = 8;
  w.seq = 64;
  w.vocab = 512;
  w.batch = 16;
  w.devices = 2;
  w.request.stages = 1;
  w.request.dataParallel = 2;
  w.request.microbatches = 1;
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  fmt::print("bench_runtime: {} hardware threads, load average {} (a shared machine: figures are noisy)\n",
             cores, loadAverage());

  ir::Op matmul{ir::OpKind::MatMul, {}, {}, {}, "", {}, {}, {}};
  std::vector<runtime::Tensor> square = {runtime::randomNormal({1024, 1024}, 1),
                                         runtime::randomNormal({1024, 1024}, 2)};
  double squareRate = 2.0 * 1024 * 1024 * 1024 / timeKernel(matmul, square, 0.5);
  fmt::print("\n== 1. GEMM rate ==\n  sgemm 1024 x 1024 x 1024, one thread: {:.2f} GFLOP/s\n"
             "  (each workload below is calibrated at its own GEMM shapes)\n",
             squareRate / 1e9);

  std::vector<Workload> workloads = {tinyGpt(), wideGpt()};
  for (Workload& w : workloads) {
    w.request.globalBatch = w.batch;
    w.request.maxTensorParallel = 1;
    w.request.schedule = ir::ScheduleKind::kOneFOneB;
  }
  const Workload& tiny = workloads[0];
  Outcome t = run(tiny, steps, 20);
  printOutcome(tiny, t, steps);
  // With more devices (threads) than cores the devices share them: the step
  // cannot beat the whole compute spread over the cores.
  double scaled = std::max(t.predicted, t.predictedBusy / cores);
  double ratio = t.measured / t.predicted;
  double scaledRatio = t.measured / scaled;
  fmt::print("  NOTE: {} virtual devices (threads) on {} hardware threads; the prediction assumes one core per "
             "device.\n  prediction scaled for oversubscription, max(makespan, summed compute / {} cores) = "
             "{:.4f} s; measured / scaled {:.2f}\n",
             tiny.devices, cores, cores, scaled, scaledRatio);
  fmt::print("\n== 3. runtime overhead (outside kernels and communication), tiny GPT ==\n"
             "  max over devices {:.1f}%, mean {:.1f}%\n",
             100 * t.maxOverhead, 100 * t.meanOverhead);

  const Workload& wide = workloads[1];
  Outcome w = run(wide, steps, 2);
  printOutcome(wide, w, steps);
  double achieved = w.modelFlops / w.measured;
  double share = achieved / (2 * w.gemm.flopsPerSecond);
  fmt::print("  achieved {:.2f} GFLOP/s (model FLOPs / median step) = {:.1f}% of 2 x {:.2f} GFLOP/s\n",
             achieved / 1e9, 100 * share, w.gemm.flopsPerSecond / 1e9);

  fmt::print("\n== summary ==\n");
  fmt::print("  single-thread sgemm: {:.2f} GFLOP/s (1024^3), {:.2f} (tiny GPT shapes), {:.2f} (wide GPT shapes)\n",
             squareRate / 1e9, t.gemm.flopsPerSecond / 1e9, w.gemm.flopsPerSecond / 1e9);
  fmt::print("  tiny GPT step: measured {:.4f} s, predicted {:.4f} s, ratio {:.2f} (target within 20%): {}\n",
             t.measured, t.predicted, ratio, verdict(ratio >= 0.8 && ratio <= 1.2));
  fmt::print("    scaled for {} devices on {} hardware threads: predicted {:.4f} s, ratio {:.2f}: {}\n",
             tiny.devices, cores, scaled, scaledRatio, verdict(scaledRatio >= 0.8 && scaledRatio <= 1.2));
  fmt::print("    kernels alone, one thread, no runtime: {:.2f} x the cost model (tiny), {:.2f} x (wide)\n",
             t.profile.seconds / t.profile.predicted, w.profile.seconds / w.profile.predicted);
  fmt::print("  runtime overhead, tiny GPT: max {:.1f}%, mean {:.1f}% (target < 10%): {}\n",
             100 * t.maxOverhead, 100 * t.meanOverhead, verdict(t.maxOverhead < 0.10));
  fmt::print("    wide GPT: max {:.1f}%, mean {:.1f}%\n", 100 * w.maxOverhead, 100 * w.meanOverhead);
  fmt::print("  wide GPT on 2 devices: {:.1f}% of 2 x single-thread sgemm (target >= 50%): {}\n", 100 * share,
             verdict(share >= 0.5));
  fmt::print("    measured {:.4f} s, predicted {:.4f} s, ratio {:.2f}\n", w.measured, w.predicted,
             w.measured / w.predicted);
  return 0;
}
