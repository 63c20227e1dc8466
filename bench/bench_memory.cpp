// What devices really hold, against what the plan predicts.
//
//   1. Over a grid of planned runs (GPT sizes × devices × schedules × stages ×
//      replicas × tensor parallelism × recomputation), each device's measured peak — its
//      DeviceMemory's accounting of every tensor, by category — beside the
//      plan's per-device prediction, and the error's spread.
//   2. A 1-device plan on the parallel runtime against the serial executor on
//      the tiny GPT and the GPT of hidden size 512: bytes held at the peak,
//      page faults and time per step, the two alternating step by step.
//
//   bench_memory [grid|serial] [ROUNDS] [tiny|wide|both] [WIDE_BATCH]   (default
//   both parts; 9 rounds of the wide GPT, 4 × that of the tiny one; the wide
//   GPT at batch 8, the tiny one at 16)
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/BenchModels.h"
#include "interp/Tracing.h"
#include "meshflow/meshflow.h"
#include "passes/Autodiff.h"
#include "passes/Planner.h"
#include "runtime/data/DataSource.h"
#include "runtime/parallel/ParallelTrainer.h"
#include "runtime/parallel/PlanExecution.h"
#include "runtime/reference/SerialExecutor.h"

using namespace meshflow;

namespace {

using bench::trace;

using Clock = std::chrono::steady_clock;

long minorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs.empty() ? 0 : xs[xs.size() / 2];
}

struct Case {
  std::string model;
  int devices;
  passes::PlanRequest request;
};

std::string caseText(const Case& c) {
  const auto& r = c.request;
  return fmt::format(
      "{:<3} dev {:<11} st {} dp {} tp {} mb {} {:<9}", c.devices,
      std::string(ir::scheduleKindName(r.schedule.value_or(ir::ScheduleKind::kOneFOneB))),
      r.stages.value_or(1), r.dataParallel.value_or(1), r.maxTensorParallel.value_or(1),
      r.microbatches.value_or(1), r.recompute.value_or("none"));
}

std::vector<Case> grid() {
  std::vector<Case> cases;
  const std::vector<std::string> models = {
      "gpt(layers = 2, hidden = 64, heads = 4, seq = 64, vocab = 96)",
      "gpt(layers = 4, hidden = 256, heads = 8, seq = 64, vocab = 512)"};
  struct Shape {
    int devices, stages, dp, microbatches;
    ir::ScheduleKind schedule;
    int tensorParallel = 1;
  };
  const std::vector<Shape> shapes = {
      {1, 1, 1, 1, ir::ScheduleKind::kOneFOneB},     {2, 1, 2, 1, ir::ScheduleKind::kOneFOneB},
      {2, 2, 1, 4, ir::ScheduleKind::kOneFOneB},     {2, 2, 1, 4, ir::ScheduleKind::kGPipe},
      {2, 2, 1, 4, ir::ScheduleKind::kZeroBubbleH1}, {4, 2, 2, 4, ir::ScheduleKind::kOneFOneB},
      {2, 2, 1, 4, ir::ScheduleKind::kInterleaved},  {2, 1, 1, 2, ir::ScheduleKind::kOneFOneB, 2}};
  for (const std::string& model : models)
    for (const Shape& s : shapes)
      for (const char* recompute : {"none", "selective", "full"}) {
        Case c{model, s.devices, {}};
        c.request.globalBatch = 16;
        c.request.stages = s.stages;
        c.request.dataParallel = s.dp;
        c.request.microbatches = s.microbatches;
        c.request.schedule = s.schedule;
        c.request.maxTensorParallel = s.tensorParallel;
        c.request.recompute = recompute;
        c.request.shardOptimizerState = false;
        cases.push_back(c);
      }
  return cases;
}

// Runs two steps of the planned case; returns each device's (measured, predicted).
std::vector<std::pair<runtime::MemoryStats, double>> measure(
    const Case& c, const ir::Graph& forward, const passes::TrainingGraph& training) {
  ir::Plan plan = passes::planTraining(forward, bench::cpuCluster(c.devices), c.request);
  runtime::ParallelOptions options;
  options.batch = c.request.globalBatch;
  runtime::ParallelTrainer trainer(training, runtime::parallelPlanOf(forward, plan), options);
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 1, state);
  trainer.setState(state);
  auto data = runtime::syntheticData(1);
  runtime::ParallelStepResult result;
  for (int step = 1; step <= 2; ++step)
    result = trainer.step(data->batch(training.graph, options.batch, step - 1), step);
  std::vector<std::pair<runtime::MemoryStats, double>> out;
  for (const ir::PlanStage& stage : plan.stages)
    for (int d : stage.devices)
      if (out.size() <= static_cast<std::size_t>(d)) out.resize(static_cast<std::size_t>(d) + 1);
  for (const ir::PlanStage& stage : plan.stages)
    for (int d : stage.devices)
      out[static_cast<std::size_t>(d)] = {result.memory.at(static_cast<std::size_t>(d)),
                                          stage.peakMemoryBytes};
  return out;
}

std::string mib(double bytes) { return fmt::format("{:.2f}", bytes / (1 << 20)); }

void reportGrid() {
  fmt::print("== 1. measured peak per device / the plan's prediction ==\n");
  fmt::print(
      "  {:<49} {:>4} {:>9} {:>9} {:>6}   measured peak by category (MiB): par grad opt act comm\n",
      "case", "dev", "measured", "planned", "ratio");
  std::vector<double> ratios;
  int within = 0;
  std::string last;
  ir::Graph forward;
  passes::TrainingGraph training;
  for (const Case& c : grid()) {
    if (c.model != last) {
      fmt::print("  model {}\n", c.model);
      forward = trace(c.model);
      training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
      last = c.model;
    }
    std::vector<std::pair<runtime::MemoryStats, double>> devices;
    try {
      devices = measure(c, forward, training);
    } catch (const std::exception& e) {
      fmt::print("  {:<49} not planned: {}\n", caseText(c), e.what());
      continue;
    }
    for (std::size_t d = 0; d < devices.size(); ++d) {
      const auto& [s, predicted] = devices[d];
      const double ratio = predicted > 0 ? double(s.peak) / predicted : 0;
      ratios.push_back(ratio);
      within += std::abs(ratio - 1) <= 0.10 ? 1 : 0;
      const auto& b = s.peakBreakdown;
      fmt::print("  {:<49} {:>4} {:>9} {:>9} {:>6.2f}   {} {} {} {} {}\n",
                 d == 0 ? caseText(c) : "", d, mib(double(s.peak)), mib(predicted), ratio,
                 mib(double(b[0])), mib(double(b[1])), mib(double(b[2])), mib(double(b[3])),
                 mib(double(b[4])));
    }
  }
  std::sort(ratios.begin(), ratios.end());
  fmt::print("  {} devices: ratio median {:.2f}, range {:.2f}-{:.2f}; within 10%: {} ({:.0f}%)\n\n",
             ratios.size(), median(ratios), ratios.front(), ratios.back(), within,
             100.0 * within / double(ratios.size()));
}

// One side of part 2: its step times and page faults, and the bytes at its peak.
struct Side {
  std::vector<double> times;
  long faults = 0;
};

template <class Step>
void timeStep(Side& side, Step&& step) {
  long before = minorFaults();
  auto start = Clock::now();
  step();
  side.times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  side.faults += minorFaults() - before;
}

// The serial executor and the 1-device plan on the same model, state and
// batches, one step of each per round, the order alternating between rounds
// (a drift of the host's speed affects both alike), after one warm-up step each.
void reportSerial(const std::string& model, std::int64_t batch, int rounds) {
  fmt::print("  {} batch {}, {} alternating rounds\n", model, batch, rounds);
  ir::Graph forward = trace(model);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  auto data = runtime::syntheticData(1);
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 1, state);
  std::size_t stateBytes = 0;
  for (const auto& [name, t] : state) stateBytes += t.bytes();

  runtime::SerialExecutor serial(training.graph, {batch, true});
  runtime::TensorMap serialState = state;
  passes::PlanRequest request;
  request.globalBatch = batch;
  request.stages = 1;
  request.maxTensorParallel = 1;
  ir::Plan plan = passes::planTraining(forward, bench::cpuCluster(1), request);
  runtime::ParallelOptions options;
  options.batch = batch;
  runtime::ParallelTrainer trainer(training, runtime::parallelPlanOf(forward, plan), options);
  trainer.setState(state);

  Side serialSide, planSide;
  std::size_t serialPeak = 0;
  std::int64_t peak = 0, reused = 0, allocations = 0;
  auto serialStep = [&](int step) {
    serial.run(data->batch(training.graph, batch, step - 1), serialState, step);
    serialPeak = std::max(serialPeak, serial.lastStats().peakIntermediateBytes);
  };
  auto planStep = [&](int step) {
    auto result = trainer.step(data->batch(training.graph, batch, step - 1), step);
    peak = std::max(peak, result.memory[0].peak);
    reused += result.memory[0].reused;
    allocations += result.memory[0].allocations;
  };
  serialStep(1);
  planStep(1);
  for (int round = 0; round < rounds; ++round) {
    const int step = round + 2;
    // The batch is made inside the timed step on both sides alike.
    if (round % 2 == 0) {
      timeStep(serialSide, [&] { serialStep(step); });
      timeStep(planSide, [&] { planStep(step); });
    } else {
      timeStep(planSide, [&] { planStep(step); });
      timeStep(serialSide, [&] { serialStep(step); });
    }
  }
  const double serialMs = 1e3 * median(serialSide.times), planMs = 1e3 * median(planSide.times);
  const auto fastest = [](const Side& s) { return 1e3 * *std::min_element(s.times.begin(), s.times.end()); };
  fmt::print(
      "  serial:   {:>8} MiB at the peak (state {} + intermediates {}), {:>6} page faults/step, "
      "{:.1f} ms/step (fastest {:.1f})\n",
      mib(double(stateBytes + serialPeak)), mib(double(stateBytes)), mib(double(serialPeak)),
      serialSide.faults / rounds, serialMs, fastest(serialSide));
  fmt::print(
      "  parallel: {:>8} MiB at the peak (planned {}), {:>6} page faults/step, {:.1f} ms/step "
      "(fastest {:.1f}), {:.0f}% of allocations from the cache\n",
      mib(double(peak)), mib(plan.stages[0].peakMemoryBytes), planSide.faults / rounds, planMs,
      fastest(planSide), 100.0 * double(reused) / double(std::max<std::int64_t>(1, allocations)));
  fmt::print("  1-device plan / serial executor: {:.3f} by the medians, {:.3f} by the fastest steps\n\n",
             planMs / serialMs, fastest(planSide) / fastest(serialSide));
}

void reportSerial(int rounds, const std::string& models, std::int64_t wideBatch) {
  fmt::print("== 2. one device: the parallel runtime against the serial executor ==\n");
  if (models != "wide")
    reportSerial("gpt(layers = 2, hidden = 64, heads = 4, seq = 64, vocab = 96)", 16, rounds * 4);
  if (models != "tiny")
    reportSerial("gpt(layers = 4, hidden = 512, heads = 8, seq = 64, vocab = 512)", wideBatch, rounds);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 9;
  if (only != "serial") reportGrid();
  const std::int64_t wideBatch = argc > 4 ? std::max(1, std::atoi(argv[4])) : 8;
  if (only != "grid") reportSerial(rounds, argc > 3 ? argv[3] : "both", wideBatch);
  return 0;
}
