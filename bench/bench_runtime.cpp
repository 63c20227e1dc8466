// The parallel CPU runtime (runtime/parallel/ParallelTrainer.h) against its own
// cost model. It prints, with sizes and units:
//
//   1. the calibration of a cpu device, all measured on this machine through
//      the kernels the runtime calls: the sgemm rate at the model's GEMM shapes
//      (each shape in a loop of its own: the cores' GEMM rate); the rates the
//      cost model prices kernels at — MatMuls, and the other kernels with
//      FLOPs — timed in whole passes over a microbatch's forward and backward
//      in graph order, with as many model copies taking turns as devices share
//      a core; the element-wise kernels' bytes per second; the fixed cost of a
//      kernel run through OpRunner; the in-process link's latency and the core
//      time a handoff of a core between devices costs;
//   2. the main example's model (examples/train_tiny_gpt.mesh: tiny_gpt, batch
//      16) planned as 2 stages × 2 data-parallel replicas, 1F1B, on 4 virtual
//      cpu devices whose spec is calibrated by those measurements (each device
//      with its share of the host's cores): the measured step time beside the
//      simulator's prediction for the same Program;
//   3. the runtime's overhead: the share of each device's step spent outside
//      kernels and communication;
//   4. a wider GPT on 2 devices: model FLOP/s as a share of 2 × the GEMM rate.
//
// For each model it also times one microbatch's kernels serially, op by op,
// against the cost model, by op kind: how much of a miss is the kernels' and
// how much the runtime's or the threads'.
//
// Then a summary of the targets, MET or NOT MET. Not a timed test: run it by
// hand (bench/README.md); the machine is shared, so the figures are noisy.
//
//   bench_runtime [STEPS] [tiny|wide] [ROUNDS]   (default 20 measured steps after
//   2 warm-up steps, both workloads, the tiny GPT in 5 rounds of calibration,
//   prediction and measurement whose median ratio is the figure; with
//   BENCH_RAW=1 in the environment it also prints every instruction of the
//   median step with its measured start and end, and BENCH_CORES=n makes the
//   devices share n host cores instead of this machine's count)
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench/BenchModels.h"
#include "interp/Tracing.h"
#include "ir/OpCost.h"
#include "meshflow/meshflow.h"
#include "passes/Autodiff.h"
#include "passes/CostModel.h"
#include "passes/PlanPipeline.h"
#include "passes/Planner.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/LocalCluster.h"
#include "runtime/data/DataSource.h"
#include "runtime/parallel/OpRunner.h"
#include "runtime/parallel/ParallelTrainer.h"
#include "runtime/parallel/PlanExecution.h"
#include "runtime/reference/SerialExecutor.h"
#include "runtime/sim/Simulator.h"
#include "runtime/sim/TimelineText.h"

using namespace meshflow;
using Clock = std::chrono::steady_clock;

namespace {

using bench::trace;

constexpr int kWarmupSteps = 2;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  std::size_t n = xs.size();
  return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}


// Runs `op` on `inputs` until `seconds` have passed; returns seconds per run.
double timeKernel(const ir::Op& op, const std::vector<runtime::Tensor>& inputs, double seconds) {
  std::vector<const runtime::Tensor*> in;
  for (const auto& t : inputs) in.push_back(&t);
  std::vector<runtime::Tensor> ys(std::max<std::size_t>(1, op.outputs.size()));
  std::vector<runtime::Tensor*> out;
  for (auto& y : ys) out.push_back(&y);
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

// Bytes per second of the element-wise Add kernel on two [rows, cols] tensors
// (read both, write one): what the roofline's memory term should use.
double measureElementwiseBandwidth(std::int64_t rows, std::int64_t cols, double seconds) {
  ir::Op add{ir::OpKind::Add, {}, {}, {}, "", {}, {}, {}};
  std::vector<runtime::Tensor> inputs = {runtime::randomNormal({rows, cols}, 1),
                                         runtime::randomNormal({rows, cols}, 2)};
  return 3.0 * 4.0 * static_cast<double>(rows * cols) / timeKernel(add, inputs, seconds);
}

// The ops a step runs through kernels: neither leaves nor optimizer updates.
bool isStepKernel(const ir::Op& op) {
  return op.phase != ir::Phase::Update && op.kind != ir::OpKind::Input && op.kind != ir::OpKind::Parameter;
}

// Runs one microbatch's forward and backward through OpRunner and returns
// every value, for timing single ops on real operands (ids and labels in range).
runtime::ValueTable oneMicrobatch(const ir::Graph& training, std::int64_t microbatch,
                                  const runtime::TensorMap& state, const runtime::TensorMap& inputs) {
  runtime::OpRunner runner(training, microbatch);
  runtime::ValueTable values;
  std::vector<ir::OpId> ops;
  for (ir::OpId id = 0; id < training.ops().size(); ++id)
    if (isStepKernel(training.op(id))) ops.push_back(id);
  runner.run(ops, values, state, inputs, 1);
  return values;
}

// One op of a microbatch's forward or backward with the operands a real
// microbatch gives it.
struct OpOnOperands {
  const ir::Op* op = nullptr;
  std::vector<runtime::Tensor> operands;
  std::vector<runtime::Tensor> outputs;
  double flops = 0;  // ir::opCost
};

// The sgemm rate over every MatMul of `training` at `batch` samples, each
// distinct shape (operand shapes, transpose_a and transpose_b) timed in a loop
// of its own, operands in cache: the GEMM rate of the cores, which the wide
// GPT's model FLOP/s are a share of. (The cost model prices MatMuls at the
// lower rate they reach inside a step: measureKernelRates.)
struct GemmRate {
  double flopsPerSecond = 0;
  int shapes = 0;   // distinct MatMul shapes timed
  int matmuls = 0;  // MatMul ops of the training graph
};

GemmRate measureSgemmRate(const ir::Graph& training, std::int64_t batch, double secondsPerShape) {
  using Key = std::tuple<runtime::Shape, runtime::Shape, bool, bool>;
  std::map<Key, std::pair<ir::OpId, int>> shapes;  // a representative op, how many
  GemmRate rate;
  for (ir::OpId id = 0; id < training.ops().size(); ++id) {
    const ir::Op& op = training.op(id);
    if (op.kind != ir::OpKind::MatMul) continue;
    ++rate.matmuls;
    Key key{runtime::boundShape(training.value(op.inputs[0]).type, batch),
            runtime::boundShape(training.value(op.inputs[1]).type, batch), ir::flagAttr(op, "transpose_a"),
            ir::flagAttr(op, "transpose_b")};
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

// The ops of one microbatch's forward and backward, in graph order, each on
// the operands a real microbatch gives it (ids and labels in range), for a
// model whose parameters come from `seed`.
std::vector<OpOnOperands> opsInGraphOrder(const ir::Graph& training, std::int64_t microbatch, std::uint64_t seed) {
  runtime::TensorMap state;
  runtime::initializeParameters(training, seed, state);
  auto inputs = runtime::syntheticData(seed)->batch(training, microbatch, 0);
  runtime::ValueTable values = oneMicrobatch(training, microbatch, state, inputs);
  std::vector<OpOnOperands> ops;
  for (ir::OpId id = 0; id < training.ops().size(); ++id) {
    const ir::Op& op = training.op(id);
    if (!isStepKernel(op)) continue;
    OpOnOperands o{&op, {}, std::vector<runtime::Tensor>(std::max<std::size_t>(1, op.outputs.size())),
                   ir::opCost(training, id, microbatch).flops};
    for (ir::ValueId v : op.inputs) {
      auto it = values.find(v);
      std::string name = it == values.end() ? runtime::bindingName(training, v) : "";
      o.operands.push_back(it != values.end() ? it->second : state.count(name) ? state.at(name) : inputs.at(name));
    }
    ops.push_back(std::move(o));
  }
  return ops;
}

struct KernelRate {
  double flopsPerSecond = 0;
  int ops = 0;  // of one microbatch's forward and backward
};

struct KernelRates {
  KernelRate gemm;    // the MatMuls
  KernelRate vector;  // the other kernels with FLOPs
  int copies = 1;     // of the model, taking turns
};

// The single-thread FLOP rates of the MatMuls and of the other kernels with
// FLOPs (element-wise, normalisation, reductions, losses), as a microbatch's
// forward and backward meets them: whole passes over the graph's kernels in
// graph order, each kernel timed in its pass, the passes taking turns among
// `copies` models with their own parameters and activations — as many as
// devices take turns on one core, which find their data evicted by the
// others'. (Each shape timed in a loop of its own, as until 2026-11-24, found
// its operands and OpenBLAS's packed panels in cache every time: rates
// 10-30% above what the same kernels reach in a step.)
KernelRates measureKernelRates(const ir::Graph& training, std::int64_t microbatch, int copies, double seconds) {
  std::vector<std::vector<OpOnOperands>> models;
  for (int c = 0; c < copies; ++c) models.push_back(opsInGraphOrder(training, microbatch, 1 + c));
  double gemmFlops = 0, gemmSeconds = 0, vectorFlops = 0, vectorSeconds = 0;
  KernelRates rates;
  rates.copies = copies;
  auto pass = [&](std::vector<OpOnOperands>& ops, bool count) {
    for (auto& o : ops) {
      std::vector<const runtime::Tensor*> in;
      for (const auto& t : o.operands) in.push_back(&t);
      // Fresh outputs for the kernel to allocate, as OpRunner gives it: writing
      // into memory last touched a pass ago is part of what a kernel costs.
      std::vector<runtime::Tensor*> out;
      for (auto& t : o.outputs) {
        t = runtime::Tensor();
        out.push_back(&t);
      }
      auto start = Clock::now();
      runtime::cpu::runKernel(*o.op, in, out, {});
      double spent = secondsSince(start);
      if (!count) continue;
      if (o.op->kind == ir::OpKind::MatMul) {
        gemmFlops += o.flops;
        gemmSeconds += spent;
      } else if (o.flops > 0) {
        vectorFlops += o.flops;
        vectorSeconds += spent;
      }
    }
  };
  for (auto& ops : models) pass(ops, false);  // warm up (and limit OpenBLAS to one thread)
  auto start = Clock::now();
  for (std::size_t p = 0; secondsSince(start) < seconds || p % models.size() != 0; ++p)
    pass(models[p % models.size()], true);
  for (const auto& o : models[0]) {
    if (o.op->kind == ir::OpKind::MatMul) ++rates.gemm.ops;
    else if (o.flops > 0) ++rates.vector.ops;
  }
  rates.gemm.flopsPerSecond = gemmFlops / gemmSeconds;
  rates.vector.flopsPerSecond = vectorFlops / vectorSeconds;
  return rates;
}

// The in-process link's latency: half the median round trip of a message of
// `bytes` between two device threads of a LocalCluster (a send hands the
// tensors over; the time is the receiver's wake-up).
double measureLinkLatency(std::int64_t bytes, int rounds) {
  runtime::cpu::LocalCluster cluster({.devices = 2});
  std::vector<double> trips;
  cluster.run([&](int device) {
    runtime::Communicator& comm = cluster.communicator(device);
    for (int i = 0; i < rounds; ++i) {
      auto start = Clock::now();
      if (device == 0) {
        comm.send(1, static_cast<std::uint64_t>(i), {runtime::Tensor::zeros({bytes / 4})});
        comm.recv(1, static_cast<std::uint64_t>(i));
        trips.push_back(secondsSince(start));
      } else {
        comm.send(0, static_cast<std::uint64_t>(i), comm.recv(0, static_cast<std::uint64_t>(i)));
      }
    }
  });
  return median(trips) / 2;
}

// Seconds of core time lost each time a core passes from one device to
// another (CoreGate: the next device's thread is woken on the core's CPU):
// `devices` threads on `cores` cores, each taking its turn before every one
// of `turns` spells of `work` seconds, against the time the work alone takes.
double measureCoreHandoff(int devices, int cores, int turns, double work) {
  if (cores >= devices) return 0;
  runtime::cpu::LocalCluster cluster({.devices = devices, .cores = cores});
  std::vector<int> all(static_cast<std::size_t>(devices));
  for (int d = 0; d < devices; ++d) all[static_cast<std::size_t>(d)] = d;
  auto start = Clock::now();
  cluster.run([&](int device) {
    cluster.communicator(device).barrier(all);  // everyone in line before the first turn
    for (int i = 0; i < turns; ++i) {
      cluster.cores()->takeTurn(device);
      for (auto spell = Clock::now(); secondsSince(spell) < work;) {
      }
    }
  });
  const double handoffs = static_cast<double>(devices) * turns;
  const double workOnEachCore = handoffs * work / cores;
  return std::max(0.0, (secondsSince(start) - workOnEachCore) / (handoffs / cores));
}

// What a kernel costs beyond its work: one op of one element (a Scale) run
// through the runtime's OpRunner — lookup, output allocation, dispatch.
double measureKernelLatency(double seconds) {
  ir::Graph g;
  ir::TensorType one{ir::DType::F32, {ir::Dim::constant(1)}};
  ir::OpId in = g.addOp({ir::OpKind::Input, {}, {}, {{"name", std::string("x")}}, "", {}, {}, {}}, {one});
  ir::ValueId x = g.op(in).outputs[0];
  ir::OpId scale = g.addOp({ir::OpKind::Scale, {x}, {}, {{"factor", 2.0}}, "", {}, {}, {}}, {one});
  runtime::OpRunner runner(g, 1);
  runtime::TensorMap inputs{{"x", runtime::Tensor::fromF32({1}, {1.0f})}};
  ir::OpId ops[] = {scale};
  auto start = Clock::now();
  long runs = 0;
  do {
    runtime::ValueTable values;
    runner.run(ops, values, {}, inputs, 1);
    ++runs;
  } while (secondsSince(start) < seconds);
  return secondsSince(start) / static_cast<double>(runs);
}

// What calibrates a workload's cpu device, all measured on this machine.
struct Calibration {
  GemmRate sgemm;            // the cores' GEMM rate at the model's shapes
  KernelRates rates;         // what the cost model prices kernels at
  double bandwidth = 0;      // element-wise kernel bytes per second
  double kernelLatency = 0;  // seconds per kernel beyond its work
  double linkLatency = 0;    // seconds: a message between two device threads
  double coreHandoff = 0;    // seconds of a core idle when it passes between devices
};

// A virtual cpu device (as the `cpu(devices = n)` builtin makes) calibrated by
// `c`: the cost model prices a kernel's FLOPs at peak · kComputeEfficiency, so
// peak = measured rate / kComputeEfficiency prices them at the measured rate.
ir::DeviceSpec calibratedDevice(const Calibration& c) {
  ir::DeviceSpec d{"cpu-thread (calibrated)", 4.0 * (1 << 30), c.rates.gemm.flopsPerSecond / passes::kComputeEfficiency,
                   c.bandwidth};
  d.vectorFlops = c.rates.vector.flopsPerSecond / passes::kComputeEfficiency;
  d.kernelLatency = c.kernelLatency;
  return d;
}

// The cores `devices` share: this machine's, or BENCH_CORES; at most one each.
int sharedCores(int devices, unsigned cores) {
  int shared = std::getenv("BENCH_CORES") ? std::atoi(std::getenv("BENCH_CORES")) : static_cast<int>(cores);
  return std::clamp(shared, 1, devices);
}

// How many devices take turns on one core.
int devicesPerCore(int devices, unsigned cores) {
  int shared = sharedCores(devices, cores);
  return (devices + shared - 1) / shared;
}

// `devices` calibrated devices on this machine's `cores`: with more devices than
// cores they take turns (the runtime's CoreGate, the simulator's hostCores).
ir::Cluster calibratedCpu(int devices, unsigned cores, const Calibration& c) {
  ir::Cluster cluster;
  cluster.nodes = 1;
  cluster.devicesPerNode = devices;
  cluster.device = calibratedDevice(c);
  // The cpu() builtin's nominal bandwidth (a send hands tensors over), the
  // measured latency once there is one.
  cluster.intraNode = {10e9, c.linkLatency > 0 ? c.linkLatency : 1e-6};
  cluster.interNode = cluster.intraNode;
  cluster.hostCores = sharedCores(devices, cores);
  return cluster;
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
  std::vector<double> perOp;                           // mean seconds per op of the training graph
  int copies = 1;                                      // models taking turns
};

KernelProfile profileKernels(const passes::TrainingGraph& training, const ir::Graph& forward,
                             std::int64_t microbatch, const ir::DeviceSpec& device, int repeats, int copies) {
  runtime::OpRunner runner(training.graph, microbatch);
  // `copies` models take turns, each keeping its activations, as the
  // calibration's passes do (measureKernelRates).
  struct Model {
    runtime::TensorMap state;
    runtime::TensorMap inputs;
    runtime::ValueTable values;
  };
  std::vector<Model> models(static_cast<std::size_t>(copies));
  for (int c = 0; c < copies; ++c) {
    runtime::initializeParameters(training.graph, 1 + c, models[static_cast<std::size_t>(c)].state);
    models[static_cast<std::size_t>(c)].inputs = runtime::syntheticData(1 + c)->batch(training.graph, microbatch, 0);
  }
  std::map<std::string, double> byKind;
  KernelProfile profile;
  profile.copies = copies;
  profile.perOp.assign(training.graph.ops().size(), 0.0);
  repeats = (repeats + copies - 1) / copies * copies;  // each model as often
  for (int r = 0; r < repeats; ++r) {
    Model& model = models[static_cast<std::size_t>(r % copies)];
    const runtime::TensorMap& state = model.state;
    const runtime::TensorMap& inputs = model.inputs;
    runtime::ValueTable& values = model.values;
    values.clear();
    for (ir::OpId id = 0; id < training.graph.ops().size(); ++id) {
      const ir::Op& op = training.graph.op(id);
      if (op.phase == ir::Phase::Update || op.kind == ir::OpKind::Input || op.kind == ir::OpKind::Parameter)
        continue;
      ir::OpId one[] = {id};
      auto start = Clock::now();
      runner.run(one, values, state, inputs, 1);
      double seconds = secondsSince(start) / repeats;
      byKind[ir::opName(op.kind)] += seconds;
      profile.perOp[id] += seconds;
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
  fmt::print("  kernels alone (one microbatch of {}, forward + backward, serial on one thread, {} model(s) taking "
             "turns): measured {:.5f} s, cost model {:.5f} s, ratio {:.2f}\n    by op kind:",
             microbatch, p.copies, p.seconds, p.predicted, p.seconds / p.predicted);
  for (std::size_t i = 0; i < std::min<std::size_t>(p.byKind.size(), 8); ++i)
    fmt::print(" {} {:.1f}%{}", p.byKind[i].second, 100 * p.byKind[i].first / p.seconds, i < 7 ? "," : "");
  fmt::print("\n");
}

// Per op kind of the training graph: the profile's time beside each op's own
// cost (ir::opCost of the training op, unfused, plus the kernel latency), so a kind whose
// kernels miss the model stands out. For MatMuls also the FLOPs at the
// calibrated GEMM rate, the rate the same shapes reach timed in a loop.
void printOpBreakdown(const KernelProfile& p, const ir::Graph& training, std::int64_t microbatch,
                      const ir::DeviceSpec& device, double gemmRate) {
  struct Row {
    int count = 0;
    double measured = 0, model = 0, flops = 0;
  };
  std::map<std::string, Row> rows;
  for (ir::OpId id = 0; id < training.ops().size(); ++id) {
    const ir::Op& op = training.op(id);
    if (op.phase == ir::Phase::Update || op.kind == ir::OpKind::Input || op.kind == ir::OpKind::Parameter)
      continue;
    ir::OpCost c = ir::opCost(training, id, microbatch);
    Row& row = rows[ir::opName(op.kind)];
    ++row.count;
    row.measured += p.perOp[id];
    ir::DeviceSpec units = device;  // as opComputeTime prices a kernel, unfused
    if (op.kind != ir::OpKind::MatMul && device.vectorFlops > 0) units.peakFlops = device.vectorFlops;
    row.model += passes::rooflineTime(c.flops, c.bytes(), units) + device.kernelLatency;
    row.flops += c.flops;
  }
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [kind, row] : rows) order.emplace_back(row.measured, kind);
  std::sort(order.rbegin(), order.rend());
  fmt::print("    {:<18} {:>4} {:>11} {:>11} {:>7} {:>10}\n", "op kind", "ops", "measured_us", "roofline_us",
             "ratio", "us/op");
  for (const auto& [measured, kind] : order) {
    const Row& row = rows[kind];
    fmt::print("    {:<18} {:>4} {:>11.1f} {:>11.1f} {:>7.2f} {:>10.2f}\n", kind, row.count, 1e6 * measured,
               1e6 * row.model, row.model > 0 ? measured / row.model : 0.0, 1e6 * measured / row.count);
  }
  const Row& mm = rows["matmul"];
  fmt::print("    matmul: {:.3f} GFLOP in {:.1f} us = {:.2f} GFLOP/s in the graph; at the calibrated {:.2f} GFLOP/s "
             "{:.1f} us\n",
             mm.flops / 1e9, 1e6 * mm.measured, mm.flops / mm.measured / 1e9, gemmRate / 1e9,
             1e6 * mm.flops / gemmRate);
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
  Calibration cal;
  double measured = 0;       // median wall seconds of a step
  double best = 0;           // fastest step
  double predicted = 0;      // the simulator's makespan
  double predictedBusy = 0;  // the simulator's compute seconds summed over devices
  double maxOverhead = 0, meanOverhead = 0;
  double modelFlops = 0;     // 3 × forward
  double trainingFlops = 0;  // forward + backward ops of the training graph
  std::vector<runtime::ParallelStepResult> steps;
  KernelProfile profile;
  ir::Graph trainingGraph;  // for the per-op breakdown
  ir::DeviceSpec device;    // the calibrated device of one thread on its own core
  ir::Program program;      // what ran, for the timelines
  std::vector<std::vector<runtime::sim::TimedInstruction>> simulatedTimeline;
};

// Per device, Σ (total − kernel − comm) / Σ total over the measured steps.
std::vector<double> overheadShares(const std::vector<runtime::ParallelStepResult>& steps) {
  std::vector<double> other(steps.front().devices.size()), total(other.size());
  for (const auto& step : steps)
    for (std::size_t d = 0; d < other.size(); ++d) {
      const runtime::DeviceTimes& t = step.devices[d];
      other[d] += t.totalSeconds - t.kernelSeconds - t.commSeconds - t.coreWaitSeconds;
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
Outcome run(const Workload& w, int steps, int profileRepeats, unsigned cores) {
  Outcome o;
  ir::Graph forward = trace(w.model());
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  o.cal.sgemm = measureSgemmRate(training.graph, w.microbatch(), 0.05);
  o.cal.rates = measureKernelRates(training.graph, w.microbatch(), devicesPerCore(w.devices, cores), 0.3);
  o.cal.bandwidth = measureElementwiseBandwidth(w.microbatch() * w.seq, w.hidden, 0.1);
  o.cal.kernelLatency = measureKernelLatency(0.05);
  ir::Cluster cluster = calibratedCpu(w.devices, cores, o.cal);
  o.cal.linkLatency = measureLinkLatency(w.microbatch() * w.seq * w.hidden * 4, 400);
  o.cal.coreHandoff = measureCoreHandoff(w.devices, static_cast<int>(cluster.hostCores), 200, 50e-6);
  cluster = calibratedCpu(w.devices, cores, o.cal);
  o.device = cluster.device;

  runtime::ParallelPlan parallel = runtime::parallelPlanOf(forward, passes::planTraining(forward, cluster, w.request));
  o.plan = runtime::parallelPlanText(parallel, w.batch);
  runtime::ParallelOptions options;
  options.batch = w.batch;
  options.hostCores = static_cast<int>(cluster.hostCores);
  runtime::ParallelTrainer trainer(training, parallel, options);
  auto simOptions = passes::simulatorOptions(cluster);
  simOptions.coreHandoff = o.cal.coreHandoff;
  simOptions.recordTimeline = true;
  auto simulated = runtime::sim::simulate(trainer.program(), simOptions);
  o.predicted = simulated.makespan;
  o.simulatedTimeline = simulated.timeline;
  o.program = trainer.program();
  for (double busy : simulated.computeBusy) o.predictedBusy += busy;

  measureSteps(trainer, training, w.batch, steps, o);
  o.modelFlops = 3 * forwardFlops(forward, w.batch);
  o.trainingFlops = trainingFlops(training.graph, w.batch);
  o.profile = profileKernels(training, forward, w.microbatch(), o.device, profileRepeats,
                             devicesPerCore(w.devices, cores));
  o.trainingGraph = training.graph;
  return o;
}

void printDevices(const std::vector<runtime::ParallelStepResult>& steps) {
  fmt::print("  per device, summed over the measured steps (comm includes waiting for peers, core_s is waiting for a "
             "host core):\n");
  fmt::print("    {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}  {:>7}\n", "device", "total_s", "kernel_s", "comm_s",
             "core_s", "other_s", "other%");
  for (std::size_t d = 0; d < steps.front().devices.size(); ++d) {
    runtime::DeviceTimes sum;
    for (const auto& step : steps) {
      sum.totalSeconds += step.devices[d].totalSeconds;
      sum.kernelSeconds += step.devices[d].kernelSeconds;
      sum.commSeconds += step.devices[d].commSeconds;
      sum.coreWaitSeconds += step.devices[d].coreWaitSeconds;
    }
    double other = sum.totalSeconds - sum.kernelSeconds - sum.commSeconds - sum.coreWaitSeconds;
    fmt::print("    {:>6} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f}  {:>6.1f}%\n", d, sum.totalSeconds,
               sum.kernelSeconds, sum.commSeconds, sum.coreWaitSeconds, other, 100 * other / sum.totalSeconds);
  }
}

// The simulated step above the measured step of median length, device by
// device, on one time scale: where the measured step loses its time.
void printTimelines(const Outcome& o) {
  std::vector<const runtime::ParallelStepResult*> bySeconds;
  for (const auto& step : o.steps) bySeconds.push_back(&step);
  std::sort(bySeconds.begin(), bySeconds.end(), [](auto* a, auto* b) { return a->seconds < b->seconds; });
  const runtime::ParallelStepResult& median = *bySeconds[bySeconds.size() / 2];
  const double span = std::max(median.seconds, o.predicted);
  fmt::print("  timelines, one column = {:.3f} ms (sim: simulated step; run: the measured step of median length):\n",
             1e3 * span / runtime::sim::kTimelineColumns);
  if (std::getenv("BENCH_RAW"))
    for (std::size_t d = 0; d < median.devices.size(); ++d)
      for (const auto& t : median.devices[d].timeline)
        fmt::print("RAW {} {:>3} {:8.3f} {:8.3f} {}\n", d, t.index, t.start * 1e3, t.end * 1e3,
                   ir::instructionText(o.program, static_cast<int>(d), o.program.devices[d].code[t.index]));
  for (std::size_t d = 0; d < median.devices.size(); ++d) {
    fmt::print("    {:>2} sim |{}|\n", d,
               runtime::sim::timelineRow(o.program, static_cast<int>(d), o.simulatedTimeline[d], span));
    fmt::print("    {:>2} run |{}|\n", d,
               runtime::sim::timelineRow(o.program, static_cast<int>(d), median.devices[d].timeline, span));
  }
}

void printOutcome(const Workload& w, const Outcome& o, int steps) {
  fmt::print("\n== {} ==\n", w.label);
  fmt::print("  model: {}, global batch {} ({} tokens/step)\n", w.model(), w.batch, w.batch * w.seq);
  fmt::print("  model FLOPs/step = 3 x forward (ir::opCost) = {:.3f} GFLOP; the training graph's forward + "
             "backward ops = {:.3f} GFLOP\n",
             o.modelFlops / 1e9, o.trainingFlops / 1e9);
  fmt::print("  plan: {} (planTraining on the calibrated cluster, then parallelPlanOf)\n", o.plan);
  fmt::print("  sgemm {:.2f} GFLOP/s single-thread over the training graph's {} MatMuls ({} distinct shapes, each "
             "timed in a loop of its own) at microbatch {}\n",
             o.cal.sgemm.flopsPerSecond / 1e9, o.cal.sgemm.matmuls, o.cal.sgemm.shapes, w.microbatch());
  fmt::print("  calibration (one thread, whole passes over a microbatch of {}'s forward and backward in graph order, "
             "{} model(s) taking turns as {} devices share each core):\n"
             "               sgemm {:.2f} GFLOP/s over the training graph's {} MatMuls;\n"
             "               the other {} kernels with FLOPs {:.2f} GFLOP/s (their ir::opCost FLOPs over their time);\n"
             "               element-wise Add {:.2f} GB/s on [{}, {}] f32;\n"
             "               {:.2f} us per kernel beyond its work (a one-element op through OpRunner);\n"
             "               {:.1f} us link latency (half a message round trip between two device threads);\n"
             "               {:.1f} us of core time per handoff of a core between devices\n",
             w.microbatch(), o.cal.rates.copies, o.cal.rates.copies, o.cal.rates.gemm.flopsPerSecond / 1e9,
             o.cal.rates.gemm.ops, o.cal.rates.vector.ops, o.cal.rates.vector.flopsPerSecond / 1e9,
             o.cal.bandwidth / 1e9, w.microbatch() * w.seq, w.hidden, 1e6 * o.cal.kernelLatency,
             1e6 * o.cal.linkLatency, 1e6 * o.cal.coreHandoff);
  fmt::print("  measured step: median {:.4f} s, best {:.4f} s over {} steps (after {} warm-up)\n", o.measured,
             o.best, steps, kWarmupSteps);
  fmt::print("  predicted step (simulator): {:.4f} s; compute summed over devices "
             "{:.4f} s; measured / predicted {:.2f}\n",
             o.predicted, o.predictedBusy, o.measured / o.predicted);
  printDevices(o.steps);
  printTimelines(o);
  printProfile(o.profile, w.microbatch());
  printOpBreakdown(o.profile, o.trainingGraph, w.microbatch(), o.device, o.cal.rates.gemm.flopsPerSecond);
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

struct TinyReport {
  Outcome o;                  // the round of median ratio
  std::vector<double> ratios;  // measured / predicted, per round
  double ratio = 0;            // their median
};

// `rounds` times: calibrate, plan, predict and measure. The machine's own
// speed drifts (a shared host: the same kernels alone took 1.0-1.5x the cost
// model from one minute to the next); each round compares a prediction with
// steps measured seconds after its calibration, and the median round is the
// figure. Its details are printed.
TinyReport reportTiny(const Workload& tiny, int steps, int rounds, unsigned cores) {
  std::vector<Outcome> outcomes;
  TinyReport r;
  for (int i = 0; i < rounds; ++i) {
    outcomes.push_back(run(tiny, steps, 20, cores));
    r.ratios.push_back(outcomes.back().measured / outcomes.back().predicted);
  }
  std::vector<std::size_t> order(outcomes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return r.ratios[a] < r.ratios[b]; });
  r.o = std::move(outcomes[order[order.size() / 2]]);
  r.ratio = median(r.ratios);
  printOutcome(tiny, r.o, steps);
  fmt::print("  measured / predicted in each of {} rounds (calibration, plan, prediction, {} steps): {:.2f}; "
             "median {:.2f} (the round above)\n",
             rounds, steps, fmt::join(r.ratios, ", "), r.ratio);
  fmt::print("  NOTE: {} virtual devices (threads) take turns on {} hardware threads (the runtime's CoreGate; the "
             "simulator's hostCores)\n",
             tiny.devices, cores);
  fmt::print("\n== 3. runtime overhead (outside kernels and communication), tiny GPT ==\n"
             "  max over devices {:.1f}%, mean {:.1f}%\n",
             100 * r.o.maxOverhead, 100 * r.o.meanOverhead);
  return r;
}

void summariseTiny(const TinyReport& r) {
  const Outcome& t = r.o;
  fmt::print("  tiny GPT step: measured / predicted, median of {} rounds {:.2f} (range {:.2f}-{:.2f}; the median "
             "round: measured {:.4f} s, best step {:.4f} s, predicted {:.4f} s) (target within 20%): {}\n",
             r.ratios.size(), r.ratio, *std::min_element(r.ratios.begin(), r.ratios.end()),
             *std::max_element(r.ratios.begin(), r.ratios.end()), t.measured, t.best, t.predicted,
             verdict(r.ratio >= 0.8 && r.ratio <= 1.2));
  fmt::print("    kernels alone, one thread, no runtime: {:.2f} x the cost model\n", t.profile.seconds / t.profile.predicted);
  fmt::print("  runtime overhead, tiny GPT: max {:.1f}%, mean {:.1f}% (target < 10%): {}\n",
             100 * t.maxOverhead, 100 * t.meanOverhead, verdict(t.maxOverhead < 0.10));
}

void summariseWide(const Outcome& w) {
  double share = w.modelFlops / w.measured / (2 * w.cal.sgemm.flopsPerSecond);
  fmt::print("  wide GPT on 2 devices: {:.1f}% of 2 x single-thread sgemm (target >= 50%): {}\n", 100 * share,
             verdict(share >= 0.5));
  fmt::print("    measured {:.4f} s (best {:.4f} s: {:.1f}%), predicted {:.4f} s, ratio {:.2f}\n", w.measured, w.best,
             100 * w.modelFlops / w.best / (2 * w.cal.sgemm.flopsPerSecond), w.predicted, w.measured / w.predicted);
  fmt::print("    kernels alone, one thread, no runtime: {:.2f} x the cost model; overhead max {:.1f}%, mean {:.1f}%\n",
             w.profile.seconds / w.profile.predicted, 100 * w.maxOverhead, 100 * w.meanOverhead);
}

}  // namespace

// bench_runtime [STEPS] [tiny|wide] [ROUNDS]: both workloads unless one is named.
int main(int argc, char** argv) {
  int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  std::string only = argc > 2 ? argv[2] : "";
  int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
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
  std::optional<TinyReport> tiny;
  std::optional<Outcome> wide;
  if (only != "wide") tiny = reportTiny(workloads[0], steps, rounds, cores);
  if (only != "tiny") {
    wide = run(workloads[1], steps, 2, cores);
    printOutcome(workloads[1], *wide, steps);
    fmt::print("  achieved {:.2f} GFLOP/s (model FLOPs / median step) = {:.1f}% of 2 x {:.2f} GFLOP/s\n",
               wide->modelFlops / wide->measured / 1e9,
               100 * wide->modelFlops / wide->measured / (2 * wide->cal.sgemm.flopsPerSecond),
               wide->cal.sgemm.flopsPerSecond / 1e9);
  }

  fmt::print("\n== summary ==\n  single-thread sgemm: {:.2f} GFLOP/s (1024^3)", squareRate / 1e9);
  if (tiny) fmt::print(", {:.2f} (tiny GPT shapes)", tiny->o.cal.sgemm.flopsPerSecond / 1e9);
  if (wide) fmt::print(", {:.2f} (wide GPT shapes)", wide->cal.sgemm.flopsPerSecond / 1e9);
  fmt::print("\n");
  if (tiny) summariseTiny(*tiny);
  if (wide) summariseWide(*wide);
  return 0;
}
