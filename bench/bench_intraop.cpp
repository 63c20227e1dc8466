// Solve time of the intra-op pass on GPT-39B (Alpa's largest GPT: hidden 8192,
// 64 heads, sequence 1024, vocabulary 51200, 48 layers) on p3.16xlarge-like
// devices: one layer and the whole model, on a (1, 8) and a (2, 4) logical mesh.
// Alpa's global batch is 1024; the microbatch bound here is 8 (128 microbatches).
// Run by hand: ./bench/bench_intraop  (targets: < 1 s per layer, < 10 s model).
// The last rows put the 48-layer model under a binding per-device memory budget.
#include <fmt/format.h>

#include <chrono>
#include <initializer_list>
#include <string>
#include <utility>

#include "ir/Cluster.h"
#include "passes/IntraOpPass.h"
#include "tests/unit/graph/GraphBuilder.h"

using namespace meshflow;

namespace {

passes::IntraOpResult run(const char* what, const ir::Graph& g, std::array<std::int64_t, 2> submesh,
                          std::array<std::int64_t, 2> view,
                          const passes::IntraOpOptions& extra = {}) {
  ir::Cluster cluster = ir::p3_16xlarge(2);
  ir::LogicalMesh mesh = ir::logicalMesh(cluster, submesh, view);
  passes::IntraOpOptions options = extra;
  options.batch = 8;
  options.solver.timeBudgetSeconds = 10;
  auto start = std::chrono::steady_clock::now();
  passes::IntraOpResult r = passes::solveIntraOp(g, mesh, cluster.device, options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(
      "{:<14} submesh ({},{}) as ({},{}): {:5} ops -> {:4} nodes, {:4} edges, {:6} strategies, "
      "{} layers tied, residual {:3}; objective {:.4f} s{}; {:.1f} GiB; {:.3f} s to solve\n",
      what, submesh[0], submesh[1], view[0], view[1], r.graphOps, r.problemNodes, r.problemEdges,
      r.strategies, r.repeatedLayers, r.residualNodes, r.objective,
      r.optimal ? " (optimal)" : " (not proven optimal)", r.memory.total() / (1u << 30), seconds);
  return r;
}

}  // namespace

int main() {
  test::GptConfig layer{1, 8192, 64, 1024, 51200};
  test::GptConfig model{48, 8192, 64, 1024, 51200};
  ir::Graph one = test::buildGpt(layer);
  ir::Graph all = test::buildGpt(model);
  using Mesh = std::array<std::int64_t, 2>;
  std::initializer_list<std::pair<Mesh, Mesh>> meshes{
      {{1, 8}, {1, 8}}, {{1, 8}, {2, 4}}, {{2, 4}, {2, 4}}};
  for (auto [submesh, view] : meshes) {
    run("GPT-39B layer", one, submesh, view);
    run("GPT-39B model", all, submesh, view);
  }
  // A per-device memory budget between the memory of the plan without a budget
  // and that of a memory-lean plan (memory weighted at 1 s per byte).
  fmt::print("with a memory budget, `fraction` of the way from the lean plan's memory:\n");
  for (auto [submesh, view] : meshes) {
    passes::IntraOpOptions leanOptions;
    leanOptions.memoryWeight = 1.0;
    double free = run("  unbounded", all, submesh, view).memory.total();
    double lean = run("  lean", all, submesh, view, leanOptions).memory.total();
    for (double fraction : {0.25, 0.5, 0.75}) {
      passes::IntraOpOptions bounded;
      bounded.memoryBudget = lean + fraction * (free - lean);
      std::string label = fmt::format("  fraction {:.2f}", fraction);
      try {
        run(label.c_str(), all, submesh, view, bounded);
      } catch (const passes::ShardingError& e) {
        fmt::print("{}: error: {}\n", label, e.what());
      }
    }
  }
  return 0;
}
