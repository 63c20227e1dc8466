// libFuzzer target: the stage problem JSON of `meshflow solve-stages`, read and
// solved as the command does. A StageError is the expected outcome of a bad
// file; a crash, an escaped exception, a hang, an unbounded allocation or a
// solution that breaks the problem's rules is a bug.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "passes/StageProblemJson.h"
#include "passes/StageSolver.h"
#include "tests/fuzz/FuzzCheck.h"

namespace {

using namespace meshflow;
using fuzz::require;

bool close(double a, double b) {
  return a == b || std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}

// The stages cover the layers in order, take exactly the cluster's devices,
// cost what the table says, and add up to the reported cost.
void checkSolution(const passes::StageProblem& p, const passes::StageSolution& s) {
  require(!s.stages.empty(), "a solution has a stage");
  int nextLayer = 0;
  std::int64_t devices = 0;
  double sum = 0, max = 0;
  for (const passes::Stage& stage : s.stages) {
    require(stage.firstLayer == nextLayer && stage.endLayer > stage.firstLayer,
            "stages cover the layers in order");
    require(stage.submesh >= 0 && static_cast<std::size_t>(stage.submesh) < p.submeshes.size() &&
                stage.config >= 0 && stage.config < p.configs,
            "a stage's submesh and config exist");
    const double latency = p.at(stage.firstLayer, stage.endLayer - 1, stage.submesh, stage.config);
    require(std::isfinite(latency) && close(latency, stage.latency),
            "a stage's latency is the table's");
    devices += p.submeshes[stage.submesh].devices();
    sum += latency;
    max = std::max(max, latency);
    nextLayer = stage.endLayer;
  }
  require(nextLayer == p.layers, "the stages end at the last layer");
  require(devices == std::int64_t{p.nodes} * p.devicesPerNode, "the stages take every device");
  require(close(s.cost, sum + (p.microbatches - 1) * max), "the cost is sum + (B - 1) max");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  passes::StageProblem problem;
  try {
    problem = passes::parseStageProblemText(text);
  } catch (const passes::StageError&) {
    return 0;
  }
  const nlohmann::json printed = passes::stageProblemToJson(problem);
  require(passes::stageProblemToJson(passes::parseStageProblem(printed)) == printed,
          "a printed problem reads back the same");
  try {
    passes::StageSolution solution = passes::solveStages(problem);
    checkSolution(problem, solution);
    passes::stageSolutionToJson(solution).dump();
  } catch (const passes::StageError&) {
  }
  return 0;
}
