// How long the inter-op stage DP takes as layers and clusters grow, on
// synthetic cost tables. Prints one row per problem; not a timed test.
//
// The tables imitate what the cost model produces: a stage's latency is its
// work divided over its devices, plus communication that grows with the mesh
// and jumps once the mesh spans nodes; three logical-mesh configs trade
// compute efficiency against communication. With limits, max_n_succ_stages
// comes from a per-device memory budget the way 1F1B holds activations.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "passes/StageSolver.h"

namespace {

using meshflow::passes::solveStages;
using meshflow::passes::StageError;
using meshflow::passes::StageProblem;
using meshflow::passes::StageSolution;
using meshflow::passes::SubmeshShape;

constexpr int kDevicesPerNode = 8;
constexpr int kConfigs = 3;

// Alpa's "power_of_two" space: (1,1), (1,2), (1,4), (1,8), then (2,8), (4,8) …
// With `wholeNodes`, only the whole-node shapes (1,8), (2,8), (4,8) ….
std::vector<SubmeshShape> submeshSpace(int nodes, bool wholeNodes) {
  std::vector<SubmeshShape> shapes;
  for (int m = wholeNodes ? kDevicesPerNode : 1; m <= kDevicesPerNode; m *= 2)
    shapes.push_back({1, m});
  for (int n = 2; n <= nodes; n *= 2) shapes.push_back({n, kDevicesPerNode});
  return shapes;
}

double layerWork(int layer) { return 1.0 + 0.5 * ((layer * 37) % 7) / 7.0; }

double stageLatency(double work, int layers, SubmeshShape shape, int config) {
  int devices = shape.devices();
  double compute = work / devices * (1.0 + 0.03 * config * std::log2(devices));
  double inNode = 0.002 * layers * std::log2(devices) * (config == 0 ? 1.0 : 0.4);
  double acrossNodes = shape.nodes > 1 ? 0.01 * layers * (config == 2 ? 0.3 : 1.0) : 0.0;
  return compute + inNode + acrossNodes;
}

// The most stages after this one that fit in memory: parameters sharded over
// the devices, and one microbatch of activations per stage in flight under 1F1B.
int successorLimit(int layers, SubmeshShape shape) {
  double budget = 40.0;
  double params = 2.0 * layers / shape.devices();
  double activations = 0.5 * layers / shape.devices() + 0.02 * layers;
  double room = budget - params;
  return room < activations ? -1 : static_cast<int>(room / activations) - 1;
}

StageProblem syntheticProblem(int layers, int nodes, bool wholeNodes, bool limits) {
  std::vector<SubmeshShape> shapes = submeshSpace(nodes, wholeNodes);
  StageProblem p = StageProblem::make(layers, 64, nodes, kDevicesPerNode, shapes, kConfigs);
  if (limits) p.maxSuccStages.assign(p.cost.size(), StageProblem::kUnlimited);
  for (int i = 0; i < layers; ++i) {
    double work = 0;
    for (int j = i; j < layers; ++j) {
      work += layerWork(j);
      for (int s = 0; s < static_cast<int>(shapes.size()); ++s)
        for (int g = 0; g < kConfigs; ++g) {
          p.at(i, j, s, g) = stageLatency(work, j - i + 1, shapes[s], g);
          if (limits) p.maxSuccStages[p.index(i, j, s, g)] = successorLimit(j - i + 1, shapes[s]);
        }
    }
  }
  return p;
}

void benchOne(int layers, int nodes, bool wholeNodes, bool limits) {
  StageProblem p = syntheticProblem(layers, nodes, wholeNodes, limits);
  auto start = std::chrono::steady_clock::now();
  std::string outcome;
  StageSolution s;
  try {
    s = solveStages(p);
    outcome = std::to_string(s.stages.size()) + " stages, cost " + std::to_string(s.cost);
  } catch (const StageError& e) {
    outcome = e.what();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%4d %5dx%d %6d %-10s %-6s %3zu %7lld %6lld %10.4f  %s\n", layers, nodes,
              kDevicesPerNode, nodes * kDevicesPerNode, wholeNodes ? "nodes" : "alpa",
              limits ? "k" : "-", p.submeshes.size(), static_cast<long long>(s.distinctCosts),
              static_cast<long long>(s.dpRuns), seconds, outcome.c_str());
  std::fflush(stdout);
}

}  // namespace

int main() {
  std::printf("%4s %7s %6s %-10s %-6s %3s %7s %6s %10s  %s\n", "L", "cluster", "devs", "space",
              "limits", "S", "t_max", "runs", "seconds", "result");
  const int kLayers[] = {16, 32, 64};
  const int kNodes[] = {1, 8, 64, 384};
  for (bool limits : {false, true})
    for (int nodes : kNodes)
      for (int layers : kLayers)
        for (bool wholeNodes : {false, true}) benchOne(layers, nodes, wholeNodes, limits);
}
