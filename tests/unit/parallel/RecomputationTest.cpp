// What a recomputing stage keeps and reruns (passes/Recomputation.h), on a
// small GPT cut into two stages.
#include <set>

#include "ParallelModels.h"
#include "passes/Planner.h"
#include "passes/Recomputation.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

std::int64_t bytesOf(const ir::Graph& g, const std::vector<ir::ValueId>& values) {
  std::int64_t total = 0;
  for (ir::ValueId v : values) total += g.value(v).type.elements(4) * 4;
  return total;
}

bool isSquareScores(const ir::Graph& g, ir::ValueId v) {
  const auto& shape = g.value(v).type.shape;
  return shape.size() == 4 && shape[2] == shape[3];
}

}  // namespace

TEST_CASE("recomputation keeps less and reruns what it dropped", "[parallel][recompute]") {
  ir::Graph forward =
      traceModel("", "gpt(layers = 2, hidden = 16, heads = 2, seq = 8, vocab = 24)");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  auto partition = passes::partitionStages(training, evenStages(forward, 2), 2);
  const ir::Graph& g = training.graph;

  for (const passes::StagePiece& piece : partition.stages) {
    auto none = passes::planRecomputation(g, piece, passes::Recompute::kNone);
    CHECK(none.kept == piece.stash);
    CHECK(none.rerun.empty());
    CHECK(none.rebuilt.empty());

    auto full = passes::planRecomputation(g, piece, passes::Recompute::kFull);
    auto selective = passes::planRecomputation(g, piece, passes::Recompute::kSelective);
    // Full keeps only what came from an earlier stage; selective drops only scores.
    const std::set<ir::OpId> here(piece.forward.begin(), piece.forward.end());
    for (ir::ValueId v : full.kept) CHECK(here.count(g.value(v).producer) == 0);
    for (ir::ValueId v : selective.rebuilt) CHECK(isSquareScores(g, v));
    CHECK(!selective.rebuilt.empty());
    CHECK(bytesOf(g, full.kept) < bytesOf(g, selective.kept));
    CHECK(bytesOf(g, selective.kept) < bytesOf(g, piece.stash));
    // kept ∪ rebuilt covers the stash, and the rerun ops are forward ops of the stage.
    for (const auto* r : {&full, &selective}) {
      std::set<ir::ValueId> covered(r->kept.begin(), r->kept.end());
      covered.insert(r->rebuilt.begin(), r->rebuilt.end());
      for (ir::ValueId v : piece.stash) CHECK(covered.count(v) == 1);
      for (ir::OpId id : r->rerun) CHECK(here.count(id) == 1);
      CHECK(std::is_sorted(r->rerun.begin(), r->rerun.end()));
    }
    CHECK(selective.rerun.size() < full.rerun.size());
  }
  // The first stage reads only the tokens, which a rerun binds again.
  auto first = passes::planRecomputation(g, partition.stages[0], passes::Recompute::kFull);
  CHECK(first.kept.empty());
}

TEST_CASE("per-layer recomputation checkpoints each layer and reruns it before its backward",
          "[parallel][recompute]") {
  ir::Graph forward =
      traceModel("", "gpt(layers = 3, hidden = 16, heads = 2, seq = 8, vocab = 24)");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  auto partition = passes::partitionStages(training, evenStages(forward, 1), 1);
  const ir::Graph& g = training.graph;
  const passes::StagePiece& piece = partition.stages[0];
  const std::vector<int> layerOf = passes::planLayers(forward, 0).layerOfOp;
  auto whole = passes::planRecomputation(g, piece, passes::Recompute::kFull);
  for (auto mode : {passes::Recompute::kFull, passes::Recompute::kSelective}) {
    auto r = passes::planRecomputation(g, piece, mode, layerOf);
    INFO(passes::recomputeName(mode));
    REQUIRE(r.layers.size() >= 3);
    // R reruns one layer: the last one that rebuilds anything.
    CHECK(r.rerun == r.layers.back());
    std::set<int> layersOfRerun;
    for (ir::OpId id : r.rerun) layersOfRerun.insert(layerOf[id]);
    CHECK(layersOfRerun.size() == 1);
    // B runs every other layer's rerun, each before the first op that reads
    // what it rebuilds, and every backward op once, in order.
    const std::set<ir::OpId> forwardOps(piece.forward.begin(), piece.forward.end());
    std::vector<ir::OpId> backwardOnly;
    std::size_t rerunOps = 0;
    std::set<ir::ValueId> made(r.kept.begin(), r.kept.end());
    for (ir::OpId id : r.rerun)
      for (ir::ValueId v : g.op(id).outputs) made.insert(v);
    for (ir::OpId id : r.backward) {
      const bool rerun = forwardOps.count(id) > 0;
      rerunOps += rerun ? 1 : 0;
      if (!rerun) backwardOnly.push_back(id);
      for (ir::ValueId v : g.op(id).inputs)
        if (std::binary_search(r.rebuilt.begin(), r.rebuilt.end(), v)) CHECK(made.count(v) == 1);
      for (ir::ValueId v : g.op(id).outputs) made.insert(v);
    }
    CHECK(backwardOnly == piece.backward);
    std::size_t layered = 0;
    for (const auto& layer : r.layers) layered += layer.size();
    CHECK(rerunOps + r.rerun.size() == layered);
  }
  // Full keeps the layers' inputs besides the stage's: more than keeping the
  // stage's alone, less than the stash.
  auto full = passes::planRecomputation(g, piece, passes::Recompute::kFull, layerOf);
  CHECK(bytesOf(g, full.kept) > bytesOf(g, whole.kept));
  CHECK(bytesOf(g, full.kept) < bytesOf(g, piece.stash));
}

TEST_CASE("recompute modes parse and print", "[parallel][recompute]") {
  for (const char* name : {"none", "selective", "full"})
    CHECK(passes::recomputeName(*passes::parseRecompute(name)) == std::string(name));
  CHECK_FALSE(passes::parseRecompute("sometimes").has_value());
}
