// Solve time of the intra-op pass on GPT-39B (Alpa's largest GPT: hidden 8192,
// 64 heads, sequence 1024, vocabulary 51200, 48 layers) on p3.16xlarge-like
// devices: one layer and the whole model, on a (1, 8) and a (2, 4) logical mesh.
// Alpa's global batch is 1024; the microbatch bound here is 8 (128 microbatches).
// Run by hand: ./bench/bench_intraop  (targets: < 1 s per layer, < 10 s model).
#include <fmt/format.h>

#include <chrono>

#include "ir/Cluster.h"
#include "passes/IntraOpPass.h"
#include "tests/unit/graph/GraphBuilder.h"

using namespace meshflow;

namespace {

void run(const char* what, const ir::Graph& g, std::array<std::int64_t, 2> submesh,
         std::array<std::int64_t, 2> view) {
  ir::Cluster cluster = ir::p3_16xlarge(2);
  ir::LogicalMesh mesh = ir::logicalMesh(cluster, submesh, view);
  passes::IntraOpOptions options;
  options.batch = 8;
  options.solver.timeBudgetSeconds = 10;
  auto start = std::chrono::steady_clock::now();
  passes::IntraOpResult r = passes::solveIntraOp(g, mesh, cluster.device, options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(
      "{:<14} submesh ({},{}) as ({},{}): {:5} ops -> {:4} nodes, {:4} edges, {:6} strategies, "
      "{} layers tied, residual {:3}; objective {:.4f} s{}; {:.3f} s to solve\n",
      what, submesh[0], submesh[1], view[0], view[1], r.graphOps, r.problemNodes, r.problemEdges,
      r.strategies, r.repeatedLayers, r.residualNodes, r.objective,
      r.optimal ? " (optimal)" : " (not proven optimal)", seconds);
}

}  // namespace

int main() {
  test::GptConfig layer{1, 8192, 64, 1024, 51200};
  test::GptConfig model{48, 8192, 64, 1024, 51200};
  ir::Graph one = test::buildGpt(layer);
  ir::Graph all = test::buildGpt(model);
  for (auto [submesh, view] :
       {std::pair{std::array<std::int64_t, 2>{1, 8}, std::array<std::int64_t, 2>{1, 8}},
        std::pair{std::array<std::int64_t, 2>{1, 8}, std::array<std::int64_t, 2>{2, 4}},
        std::pair{std::array<std::int64_t, 2>{2, 4}, std::array<std::int64_t, 2>{2, 4}}}) {
    run("GPT-39B layer", one, submesh, view);
    run("GPT-39B model", all, submesh, view);
  }
  return 0;
}
