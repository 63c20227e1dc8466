// Simulates one training step of GPT-1T on 3072 A100s as Megatron-LM ran it
// (Narayanan et al. 2021, Table 1: 64 pipeline stages × 8-way tensor parallel ×
// 6-way data parallel, global batch 3072, so 512 microbatches of 1 sequence per
// pipeline, 1F1B) and reports how long lowering and simulation take (target: the
// simulation under 2 s) and the simulated figures. Each phase is timed by the wall
// clock and by the processor time this process used: on a shared machine the two
// part, and the processor time is what the code costs.
//
// Costs: the dense-GPT FLOP formula with full activation recomputation (shared
// reference hardware.md), 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per step, split
// F : B = 1 : 3 (B includes the recomputed forward), divided evenly over the 64
// stages and 8 tensor-parallel devices, at an assumed 55% of the A100's 312
// TFLOP/s bf16 peak. Bytes (rough): bf16 activations s·h·2 per boundary; with
// recomputation a device keeps each layer's input (2 layers per stage); 14 B per
// parameter for bf16 weights plus fp32 Adam state, 4 B per parameter of fp32
// gradients. Links: NVLink3 300 GB/s inside a node (5 µs), 25 GB/s per GPU
// between nodes (10 µs); each 8-GPU node holds one stage of one replica.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <numeric>

#include "passes/Lowering.h"
#include "runtime/sim/Simulator.h"

namespace {

using meshflow::passes::PipelineDescription;
using meshflow::passes::StageDescription;

constexpr double kSeq = 2048;
constexpr double kHidden = 25600;
constexpr double kLayers = 128;
constexpr double kVocab = 51200;
constexpr double kParameters = 1008e9;
constexpr int kStages = 64;
constexpr int kTensor = 8;
constexpr int kReplicas = 6;
constexpr int kMicrobatches = 512;
constexpr double kPeakFlops = 312e12;
constexpr double kEfficiency = 0.55;

// Wall-clock and processor seconds of one phase: on a shared machine the wall
// clock also counts time other processes took, the processor time does not.
struct Stopwatch {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  std::clock_t cpu = std::clock();

  double wallSeconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  }
  double cpuSeconds() const { return static_cast<double>(std::clock() - cpu) / CLOCKS_PER_SEC; }
};

PipelineDescription gpt1t() {
  const double stepFlopsPerSequence =
      96 * kSeq * kLayers * kHidden * kHidden *
      (1 + kSeq / (6 * kHidden) + kVocab / (16 * kLayers * kHidden));
  const double perDevice = stepFlopsPerSequence / (kStages * kTensor) / (kPeakFlops * kEfficiency);
  const double parametersPerDevice = kParameters / (kStages * kTensor);
  StageDescription stage;
  stage.forwardSeconds = perDevice / 4;
  stage.backwardSeconds = perDevice * 3 / 4;
  stage.updateSeconds = parametersPerDevice * 18 / 2039e9;  // read and write the state once
  stage.activationBytes = static_cast<int64_t>(kSeq * kHidden * 2);
  stage.heldActivationBytes = static_cast<int64_t>(kLayers / kStages * kSeq * kHidden * 2);
  stage.parameterBytes = static_cast<int64_t>(parametersPerDevice * 14);
  stage.gradientBytes = static_cast<int64_t>(parametersPerDevice * 4);

  PipelineDescription description;
  description.schedule = "1f1b";
  description.microbatches = kMicrobatches;
  description.stages.assign(kStages, stage);
  int next = 0;
  for (int replica = 0; replica < kReplicas; ++replica) {
    for (int rank = 0; rank < kStages; ++rank) {
      std::vector<int> mesh(kTensor);
      std::iota(mesh.begin(), mesh.end(), next);
      next += kTensor;
      description.stages[static_cast<size_t>(rank)].meshes.push_back(mesh);
    }
  }
  return description;
}

}  // namespace

int main() {
  const PipelineDescription description = gpt1t();
  Stopwatch watch;
  meshflow::ir::Program program = meshflow::passes::lowerPipeline(description);
  const double lowering = watch.wallSeconds();
  const double loweringCpu = watch.cpuSeconds();

  meshflow::runtime::sim::SimulatorOptions options;
  options.devicesPerNode = 8;
  options.intraNode = {5e-6, 300e9};
  options.interNode = {10e-6, 25e9};
  watch = Stopwatch();
  meshflow::runtime::sim::SimulationResult result =
      meshflow::runtime::sim::simulate(program, options);
  const double simulation = watch.wallSeconds();
  const double simulationCpu = watch.cpuSeconds();

  const double meanBubble =
      std::accumulate(result.bubbleFraction.begin(), result.bubbleFraction.end(), 0.0) /
      static_cast<double>(result.bubbleFraction.size());
  const int64_t peak = *std::max_element(result.peakBytes.begin(), result.peakBytes.end());
  const int64_t firstStagePeak = result.peakBytes.front();
  const int64_t lastStagePeak = result.peakBytes[(kStages - 1) * kTensor];
  fmt::print("GPT-1T, {} GPUs: {} stages x {}-way TP x {}-way DP, {} microbatches, 1f1b\n",
             program.deviceCount(), kStages, kTensor, kReplicas, kMicrobatches);
  fmt::print("program: {} instructions, {} buffers\n", program.instructionCount(),
             program.buffers.size());
  fmt::print(
      "lowering: {:.3f} s (cpu {:.3f} s)   simulation: {:.3f} s (cpu {:.3f} s; target < 2 s)\n",
      lowering, loweringCpu, simulation, simulationCpu);
  fmt::print("simulated step time: {:.2f} s\n", result.makespan);
  fmt::print("bubble fraction: {:.4f} on device 0, {:.4f} mean; (p-1)/(m+p-1) = {:.4f}\n",
             result.bubbleFraction[0], meanBubble,
             static_cast<double>(kStages - 1) / (kMicrobatches + kStages - 1));
  fmt::print(
      "peak memory: {:.1f} GB max (stage 0 {:.1f} GB, stage 63 {:.1f} GB; resident {:.1f} GB)\n",
      peak / 1e9, firstStagePeak / 1e9, lastStagePeak / 1e9, result.residentBytes[0] / 1e9);
  fmt::print("traffic: {:.1f} GB intra-node, {:.1f} GB inter-node\n", result.intraNodeBytes / 1e9,
             result.interNodeBytes / 1e9);
  const double modelFlops = 3072.0 * 96 * kSeq * kLayers * kHidden * kHidden *
                            (1 + kSeq / (6 * kHidden) + kVocab / (16 * kLayers * kHidden));
  fmt::print("achieved: {:.0f} TFLOP/s per GPU (Megatron measured 163)\n",
             modelFlops / result.makespan / program.deviceCount() / 1e12);
  return 0;
}
