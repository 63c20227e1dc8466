// Mixed precision on the cpu backend: the tiny and the wide GPT in f32, bf16
// and f16, each on a 1-device plan and as 2 data-parallel replicas — the
// median step time and each device's measured peak memory (by category).
//
//   bench_precision [STEPS]   (default 10 measured steps after 2 warm-up steps)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "bench/BenchModels.h"
#include "passes/Autodiff.h"
#include "passes/Planner.h"
#include "runtime/data/DataSource.h"
#include "runtime/parallel/ParallelTrainer.h"
#include "runtime/parallel/PlanExecution.h"

using namespace meshflow;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmupSteps = 2;

struct Measured {
  double step = 0;              // median seconds
  runtime::MemoryStats memory;  // device 0's largest peak
};

Measured measure(const std::string& model, int devices, int steps) {
  ir::Graph forward = bench::trace(model);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  passes::PlanRequest request;
  request.globalBatch = 16;
  request.stages = 1;
  request.dataParallel = devices;
  request.microbatches = 1;
  request.maxTensorParallel = 1;
  ir::Plan plan = passes::planTraining(forward, bench::cpuCluster(devices), request);
  runtime::ParallelOptions options;
  options.batch = request.globalBatch;
  runtime::ParallelTrainer trainer(training, runtime::parallelPlanOf(forward, plan), options);
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 1, state);
  trainer.setState(state);
  auto data = runtime::syntheticData(1);
  std::vector<double> times;
  Measured m;
  for (int step = 1; step <= kWarmupSteps + steps; ++step) {
    auto inputs = data->batch(training.graph, options.batch, step - 1);
    auto start = Clock::now();
    auto result = trainer.step(inputs, step);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (step <= kWarmupSteps) continue;
    times.push_back(seconds);
    if (result.memory[0].peak > m.memory.peak) m.memory = result.memory[0];
  }
  std::sort(times.begin(), times.end());
  m.step = times[times.size() / 2];
  return m;
}

std::string mib(std::int64_t bytes) { return fmt::format("{:.2f}", double(bytes) / (1 << 20)); }

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  struct Model {
    const char* label;
    const char* shape;
  };
  const Model models[] = {{"tiny", "layers = 2, hidden = 64, heads = 4, seq = 64, vocab = 96"},
                          {"wide", "layers = 4, hidden = 512, heads = 8, seq = 64, vocab = 512"}};
  fmt::print(
      "median step and device 0's peak memory (MiB: total = params + grads + opt + act + comm), "
      "batch 16,"
      " Adam, {} steps after {} warm-up\n",
      steps, kWarmupSteps);
  fmt::print("{:<6} {:<11} {:<5} {:>9} {:>8}   {:>7} = {} + {} + {} + {} + {}\n", "model", "plan",
             "dtype", "step ms", "vs f32", "peak", "par", "grad", "opt", "act", "comm");
  for (const Model& model : models)
    for (int devices : {1, 2}) {
      double f32Step = 0;
      for (const char* dtype : {"f32", "bf16", "f16"}) {
        Measured m =
            measure(fmt::format("gpt({}, dtype = {})", model.shape, dtype), devices, steps);
        if (std::string(dtype) == "f32") f32Step = m.step;
        const auto& b = m.memory.peakBreakdown;
        fmt::print("{:<6} {:<11} {:<5} {:>9.1f} {:>8.2f}   {:>7} = {} + {} + {} + {} + {}\n",
                   model.label, devices == 1 ? "1 device" : "2 replicas", dtype, 1e3 * m.step,
                   m.step / f32Step, mib(m.memory.peak), mib(b[0]), mib(b[1]), mib(b[2]), mib(b[3]),
                   mib(b[4]));
      }
    }
  return 0;
}
