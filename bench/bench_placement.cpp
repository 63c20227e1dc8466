// How long placement takes as stages and clusters grow. Prints one row per
// problem; not a timed test.
//
// The "alpa" rows have the stage counts the planning notes measured the old
// encoding on (whose shapes were not recorded): one node shared by sub-node
// stages (1, 1), (1, 1), (1, 2), (1, 4), then one whole-node stage (1, 8) per
// remaining node, so 4×8 has 7 stages, 16×8 has 19 and 64×8 has 67. The
// "megatron" row is the 3072-GPU configuration: 64 stages of 6 whole nodes. The
// others exercise the Z3 path at scale: exclusions and pins that rule out the
// constructive placement, and many sub-node stages whose node sharing matters.
//
// Usage: bench_placement [NAME]   (only the problems whose name contains NAME;
//                                  the slow ones run only when named)
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "passes/Placement.h"
#include "passes/PlacementEncoding.h"

namespace {

using meshflow::passes::Placement;
using meshflow::passes::PlacementError;
using meshflow::passes::PlacementPin;
using meshflow::passes::PlacementRequest;
using meshflow::passes::placeStages;
using meshflow::passes::SubmeshShape;
using meshflow::passes::placement::solveExactCover;

constexpr int kPerNode = 8;

std::vector<int> firstIds(const Placement& placement) {
  std::vector<int> firsts;
  for (const std::vector<int>& ids : placement.devices) firsts.push_back(ids.front());
  return firsts;
}

struct Problem {
  std::string name;
  int nodes = 1;
  PlacementRequest request;
  bool z3Alone = true;  // also time the Z3 model alone (minutes on some requests)
  bool slow = false;    // run only when named on the command line
};

std::vector<SubmeshShape> sharedNodeThenWholeNodes(int nodes) {
  std::vector<SubmeshShape> shapes = {{1, 1}, {1, 1}, {1, 2}, {1, 4}};
  for (int k = 1; k < nodes; ++k) shapes.push_back({1, kPerNode});
  return shapes;
}

Problem alpa(int nodes) { return {"alpa", nodes, {sharedNodeThenWholeNodes(nodes), {}, {}}}; }

Problem megatron() {
  PlacementRequest r;
  r.stages.assign(64, {6, kPerNode});
  return {"megatron", 384, r};
}

// 128 stages: the shared node, then whole-node stages of 3 or 4 nodes.
Problem alpaLarge() {
  std::vector<SubmeshShape> shapes = {{1, 1}, {1, 1}, {1, 2}, {1, 4}};
  for (int i = 0; i < 124; ++i) shapes.push_back({i % 11 == 5 ? 4 : 3, kPerNode});
  return {"alpa-large", 384, {shapes, {}, {}}, false};
}

// Two failed nodes in the middle are excluded; the stages use the other 382.
Problem excludedNodes() {
  PlacementRequest r;
  r.stages.assign(63, {6, kPerNode});
  r.stages.push_back({4, kPerNode});
  for (int d = 100 * kPerNode; d < 102 * kPerNode; ++d) r.excluded.push_back(d);
  return {"excluded", 384, r};
}

// The Megatron shapes with stage 10 pinned to device 0: in-order packing must
// leave nodes 0-5 to it.
Problem pinned() {
  PlacementRequest r;
  r.stages.assign(64, {6, kPerNode});
  r.pins.push_back({10, {0}});
  return {"pinned", 384, r};
}

// Only sub-node stages, four per node: (1, 4), (1, 2), (1, 1), (1, 1) repeated.
Problem subNode(int nodes) {
  PlacementRequest r;
  for (int k = 0; k < nodes; ++k)
    for (SubmeshShape s : {SubmeshShape{1, 4}, {1, 2}, {1, 1}, {1, 1}}) r.stages.push_back(s);
  return {"sub-node", nodes, r, nodes <= 8};
}

// Seconds taken by `place`, and its answer or error message.
template <typename Place>
std::pair<double, std::string> timed(Place place) {
  auto start = std::chrono::steady_clock::now();
  std::string outcome;
  try {
    Placement placement = place();
    outcome = fmt::format("{} crossings, starts [{}]", placement.crossNodeBoundaries,
                          fmt::join(firstIds(placement), ", "));
  } catch (const PlacementError& e) {
    outcome = e.what();
  }
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), outcome};
}

// placeStages, which takes the first-fit placement when it is provably optimal,
// beside the Z3 exact-cover model alone on the same request.
// Sub-node stages of 4, 2, 4, 2, 4 devices repeated: no placement meets the
// crossing bound, so the search gives up and Z3 has to find which stages share
// a node. On 384×8 the interleaved run fills 16 nodes and 88 stages of 4 or 5
// whole nodes fill the rest: placeStages solves it node by node (2-3 s; before
// that step it did not finish in 15 minutes), Z3 alone is not timed.
std::vector<SubmeshShape> interleavedRun(int nodes) {
  std::vector<SubmeshShape> shapes;
  for (int k = 0; k < nodes / 2; ++k)
    for (SubmeshShape s : {SubmeshShape{1, 4}, {1, 2}, {1, 4}, {1, 2}, {1, 4}}) shapes.push_back(s);
  return shapes;
}

Problem interleaved(int nodes) {
  PlacementRequest r;
  r.stages = interleavedRun(nodes);
  return {"interleaved", nodes, r};
}

Problem interleavedLarge() {
  PlacementRequest r;
  r.stages = interleavedRun(16);
  for (int i = 0; i < 88; ++i) r.stages.push_back({i < 16 ? 5 : 4, kPerNode});
  return {"interleaved-large", 384, r, false};
}

// Two pins that cannot hold together: the error names both.
Problem conflicting() {
  PlacementRequest r;
  r.stages.assign(64, {6, kPerNode});
  r.pins = {{0, {0}}, {1, {1}}};
  return {"conflicting-pins", 384, r};
}

void run(const Problem& p) {
  meshflow::ir::Cluster cluster;
  cluster.nodes = p.nodes;
  cluster.devicesPerNode = kPerNode;
  auto [seconds, outcome] = timed([&] { return placeStages(cluster, p.request); });
  auto [z3Seconds, z3Outcome] = p.z3Alone
                                    ? timed([&] { return solveExactCover(cluster, p.request); })
                                    : std::pair<double, std::string>{-1, outcome};
  std::string summary = outcome.substr(0, outcome.find(','));
  fmt::print("{:<18} {:>4} {:>5}x{} {:>4} {:>4} {:>9.4f} {:>9}  {}{}\n", p.name,
             p.request.stages.size(), p.nodes, kPerNode, p.request.pins.size(),
             p.request.excluded.size(), seconds,
             z3Seconds < 0 ? std::string("-") : fmt::format("{:.4f}", z3Seconds),
             outcome.size() > 60 ? summary : outcome,
             z3Outcome == outcome ? "" : "; Z3 DIFFERS: " + z3Outcome);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string only = argc > 1 ? argv[1] : "";
  fmt::print("{:<18} {:>4} {:>7} {:>4} {:>4} {:>9} {:>9}  {}\n", "problem", "S", "cluster", "pins",
             "excl", "seconds", "z3 only", "result");
  for (const Problem& p :
       {alpa(4), alpa(16), alpa(64), subNode(4), subNode(16), interleaved(4), interleaved(16),
        megatron(), alpaLarge(), excludedNodes(), pinned(), conflicting(), interleavedLarge()})
    if (p.slow ? p.name == only : p.name.find(only) != std::string::npos) run(p);
}
