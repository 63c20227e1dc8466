// Placement: packing, crossings, pins, exclusions and their conflicts, through
// placeStages (the ordered search, then Z3) and through the Z3 exact-cover model
// alone, both checked against brute force on small clusters.
#include <algorithm>
#include <catch2/catch.hpp>
#include <optional>
#include <random>

#include "passes/Placement.h"
#include "passes/PlacementEncoding.h"

namespace meshflow::passes {
namespace {

ir::Cluster cluster(std::int64_t nodes, std::int64_t perNode) {
  ir::Cluster c;
  c.nodes = nodes;
  c.devicesPerNode = perNode;
  return c;
}

using Devices = std::vector<std::vector<int>>;

PlacementRequest request(std::vector<SubmeshShape> stages, std::vector<PlacementPin> pins = {},
                         std::vector<int> excluded = {}) {
  PlacementRequest r;
  r.stages = std::move(stages);
  r.pins = std::move(pins);
  r.excluded = std::move(excluded);
  return r;
}

TEST_CASE("sub-node stages pack into one node in order", "[plan][placement]") {
  Placement p = placeStages(cluster(1, 8), request({{1, 4}, {1, 2}, {1, 1}, {1, 1}}));
  CHECK(p.devices == Devices{{0, 1, 2, 3}, {4, 5}, {6}, {7}});
  CHECK(p.crossNodeBoundaries == 0);
}

TEST_CASE("whole-node stages take consecutive nodes", "[plan][placement]") {
  Placement p = placeStages(cluster(4, 2), request({{2, 2}, {1, 2}, {1, 1}, {1, 1}}));
  CHECK(p.devices == Devices{{0, 1, 2, 3}, {4, 5}, {6}, {7}});
  // (2, 2) and (1, 2) take whole nodes, so two boundaries leave a node; the
  // two single devices share node 3.
  CHECK(p.crossNodeBoundaries == 2);
}

TEST_CASE("adjacent stages share nodes before ids are smallest", "[plan][placement]") {
  // Sizes 2, 1, 2, 1, 2 on two nodes of 4: only {s1, s2, s3} and {s0, s4} on a
  // node each gives two crossings; first-fit in order would give three.
  Placement p = placeStages(cluster(2, 4), request({{1, 2}, {1, 1}, {1, 2}, {1, 1}, {1, 2}}));
  CHECK(p.crossNodeBoundaries == 2);
  CHECK(p.devices == Devices{{0, 1}, {4}, {6, 7}, {5}, {2, 3}});
}

TEST_CASE("pins are honoured", "[plan][placement]") {
  Placement p = placeStages(cluster(1, 8), request({{1, 4}, {1, 4}}, {{0, {5}}}));
  CHECK(p.devices == Devices{{4, 5, 6, 7}, {0, 1, 2, 3}});

  Placement q =
      placeStages(cluster(2, 4), request({{1, 2}, {1, 2}, {1, 4}}, {{2, {0, 1, 2, 3}}, {1, {6}}}));
  CHECK(q.devices == Devices{{4, 5}, {6, 7}, {0, 1, 2, 3}});
}

TEST_CASE("conflicting pins are reported with both named", "[plan][placement]") {
  // Devices 0 and 1 are in the same aligned slot of two; the pin of stage 2 on
  // device 7 is compatible with each and is left out of the report.
  PlacementRequest r = request({{1, 2}, {1, 2}, {1, 4}}, {{2, {7}}, {0, {0}}, {1, {1}}});
  CHECK_THROWS_AS(placeStages(cluster(2, 4), r), PlacementError);
  CHECK_THROWS_WITH(placeStages(cluster(2, 4), r),
                    "no placement honours these hints together: pin of stage 0 on devices [0]; "
                    "pin of stage 1 on devices [1]");
}

TEST_CASE("a pin alone can be impossible", "[plan][placement]") {
  // A (1, 2) stage is aligned to even offsets: devices 1 and 2 are never together.
  CHECK_THROWS_WITH(placeStages(cluster(1, 4), request({{1, 2}, {1, 2}}, {{0, {1, 2}}})),
                    "no placement honours the pin of stage 0 on devices [1, 2]");
}

TEST_CASE("excluded devices are left out", "[plan][placement]") {
  Placement p = placeStages(cluster(2, 4), request({{1, 4}}, {}, {0, 1, 2, 3}));
  CHECK(p.devices == Devices{{4, 5, 6, 7}});

  Placement q = placeStages(cluster(1, 8), request({{1, 4}, {1, 2}, {1, 1}}, {}, {1}));
  CHECK(q.devices == Devices{{4, 5, 6, 7}, {2, 3}, {0}});
}

TEST_CASE("a pin on an excluded device names both", "[plan][placement]") {
  PlacementRequest r = request({{1, 4}, {1, 2}, {1, 1}}, {{0, {3}}}, {3});
  CHECK_THROWS_WITH(placeStages(cluster(1, 8), r),
                    "no placement honours these hints together: pin of stage 0 on devices [3]; "
                    "exclusion of device 3");
}

TEST_CASE("exclusions can make the shapes unpackable", "[plan][placement]") {
  // Excluding one device of each node leaves no whole node for (1, 4) ... but
  // the count still matches: 8 - 2 = 6 = 4 + 2.
  PlacementRequest r = request({{1, 4}, {1, 2}}, {}, {0, 4});
  CHECK_THROWS_WITH(placeStages(cluster(2, 4), r),
                    "no placement honours these hints together: exclusion of device 0; "
                    "exclusion of device 4");
}

TEST_CASE("shapes must cover exactly the available devices", "[plan][placement]") {
  CHECK_THROWS_WITH(placeStages(cluster(1, 8), request({{1, 4}})),
                    "the stages' submeshes cover 4 devices, but 8 are available after 0 "
                    "exclusions; a placement uses every device that is not excluded (exclude "
                    "the ones to leave idle)");
  CHECK_THROWS_WITH(placeStages(cluster(1, 4), request({{1, 4}}, {}, {2})),
                    "the stages' submeshes need 4 devices, but only 3 are available after 1 "
                    "exclusion");
}

TEST_CASE("invalid shapes, pins and exclusions are refused", "[plan][placement]") {
  CHECK_THROWS_WITH(placeStages(cluster(2, 4), request({{2, 2}, {1, 4}})),
                    "stage 0: submesh (2, 2) spans nodes without taking whole nodes");
  CHECK_THROWS_WITH(placeStages(cluster(1, 8), request({{1, 3}, {1, 5}})),
                    "stage 0: submesh (1, 3) does not fit a 1x8 cluster");
  CHECK_THROWS_WITH(placeStages(cluster(1, 2), request({{1, 2}}, {{1, {0}}})),
                    "pin of stage 1: there are 1 stages");
  CHECK_THROWS_WITH(placeStages(cluster(1, 2), request({{1, 2}}, {{0, {2}}})),
                    "pin of stage 0: device 2 is not in the 2-device cluster");
  CHECK_THROWS_WITH(placeStages(cluster(1, 2), request({{1, 1}}, {}, {-1})),
                    "exclusion of device -1: not in the 2-device cluster");
}

TEST_CASE("placement is deterministic", "[plan][placement]") {
  PlacementRequest r = request({{1, 1}, {1, 1}, {1, 2}, {1, 4}, {2, 4}});
  Placement first = placeStages(cluster(4, 4), r);
  CHECK(first.devices == Devices{{0}, {1}, {2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
  CHECK(first.crossNodeBoundaries == 2);
  for (int i = 0; i < 3; ++i) {
    Placement again = placeStages(cluster(4, 4), r);
    CHECK(again.devices == first.devices);
    CHECK(again.crossNodeBoundaries == first.crossNodeBoundaries);
  }
}

std::vector<int> firstIds(const Placement& p) {
  std::vector<int> firsts;
  for (const std::vector<int>& ids : p.devices) firsts.push_back(ids.front());
  return firsts;
}

// Every valid placement, the best by (crossings, first ids): the semantics
// placeStages promises, by enumeration.
class BruteForce {
 public:
  BruteForce(const ir::Cluster& c, const PlacementRequest& r)
      : cluster_(c), request_(r), used_(std::size_t(c.deviceCount()), false) {
    for (int d : r.excluded) used_[std::size_t(d)] = true;
  }

  std::optional<std::pair<int, std::vector<int>>> best() {
    visit(0);
    return best_;
  }

 private:
  void visit(std::size_t s) {
    if (s == request_.stages.size()) {
      std::pair<int, std::vector<int>> key{
          placement::countCrossings(cluster_, request_.stages, firsts_), firsts_};
      if (!best_ || key < *best_) best_ = key;
      return;
    }
    int size = request_.stages[s].devices();
    for (int start : placement::startsOf(cluster_, request_.stages[s])) {
      bool ok = true;
      for (int d = start; d < start + size; ++d) ok &= !used_[std::size_t(d)];
      for (const PlacementPin& pin : request_.pins)
        if (std::size_t(pin.stage) == s)
          for (int d : pin.devices) ok &= start <= d && d < start + size;
      if (!ok) continue;
      for (int d = start; d < start + size; ++d) used_[std::size_t(d)] = true;
      firsts_.push_back(start);
      visit(s + 1);
      firsts_.pop_back();
      for (int d = start; d < start + size; ++d) used_[std::size_t(d)] = false;
    }
  }

  const ir::Cluster& cluster_;
  const PlacementRequest& request_;
  std::vector<bool> used_;
  std::vector<int> firsts_;
  std::optional<std::pair<int, std::vector<int>>> best_;
};

// A random request that some placement meets: nodes are cut into runs of whole
// nodes and aligned pieces, a few pieces become exclusions, and the stages come
// in shuffled order. Pins are drawn from the stage's own devices or, now and
// then, from anywhere, which may make the request impossible.
PlacementRequest randomRequest(std::mt19937& rng, std::int64_t nodes, std::int64_t perNode) {
  PlacementRequest r;
  std::vector<std::vector<int>> pieces;  // each stage's devices in the hidden placement
  for (int k = 0; k < nodes;) {
    int run = 1 + int(rng() % std::uint32_t(nodes - k));
    if (rng() % 2 == 0) {
      r.stages.push_back({run, int(perNode)});
      std::vector<int> ids;
      for (int d = k * int(perNode); d < (k + run) * int(perNode); ++d) ids.push_back(d);
      pieces.push_back(ids);
      k += run;
      continue;
    }
    // Split node k into aligned pieces, largest first, each size dividing M.
    int offset = 0;
    while (offset < perNode) {
      std::vector<int> sizes;
      for (int m = 1; m < perNode; ++m)
        if (perNode % m == 0 && offset % m == 0 && offset + m <= perNode) sizes.push_back(m);
      int m = sizes[rng() % sizes.size()];
      int first = k * int(perNode) + offset;
      if (rng() % 6 == 0) {
        for (int d = first; d < first + m; ++d) r.excluded.push_back(d);
      } else {
        r.stages.push_back({1, m});
        std::vector<int> ids;
        for (int d = first; d < first + m; ++d) ids.push_back(d);
        pieces.push_back(ids);
      }
      offset += m;
    }
    ++k;
  }
  std::vector<std::size_t> order(r.stages.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  std::vector<SubmeshShape> shuffled;
  for (std::size_t i : order) shuffled.push_back(r.stages[i]);
  r.stages = shuffled;
  for (int p = order.empty() ? 0 : int(rng() % 3); p > 0; --p) {
    int s = int(rng() % order.size());
    const std::vector<int>& own = pieces[order[std::size_t(s)]];
    int device =
        rng() % 3 == 0 ? int(rng() % std::uint32_t(nodes * perNode)) : own[rng() % own.size()];
    r.pins.push_back({s, {device}});
  }
  return r;
}

// The hints an error message names: each pin (one device, as randomRequest
// makes them) and exclusion whose name appears in it.
PlacementRequest namedHints(const PlacementRequest& r, const std::string& message) {
  PlacementRequest named = r;
  named.pins.clear();
  named.excluded.clear();
  auto appears = [&](const std::string& name) {
    for (std::size_t at = message.find(name); at != std::string::npos;
         at = message.find(name, at + 1)) {
      std::size_t end = at + name.size();
      if (end == message.size() || message[end] == ';') return true;
    }
    return false;
  };
  for (const PlacementPin& pin : r.pins)
    if (appears("pin of stage " + std::to_string(pin.stage) + " on devices [" +
                std::to_string(pin.devices[0]) + "]"))
      named.pins.push_back(pin);
  for (int d : r.excluded)
    if (appears("exclusion of device " + std::to_string(d))) named.excluded.push_back(d);
  return named;
}

// The named hints conflict, and dropping any one of them resolves the conflict.
void checkMinimalConflict(const ir::Cluster& c, const PlacementRequest& r,
                          const std::string& message) {
  INFO(message);
  PlacementRequest named = namedHints(r, message);
  REQUIRE(named.pins.size() + named.excluded.size() > 0);
  CHECK_FALSE(BruteForce(c, named).best());
  for (std::size_t i = 0; i < named.pins.size(); ++i) {
    PlacementRequest fewer = named;
    fewer.pins.erase(fewer.pins.begin() + long(i));
    CHECK(BruteForce(c, fewer).best());
  }
  for (std::size_t i = 0; i < named.excluded.size(); ++i) {
    PlacementRequest fewer = named;
    fewer.excluded.erase(fewer.excluded.begin() + long(i));
    CHECK(BruteForce(c, fewer).best());
  }
}

TEST_CASE("placements match brute force on random small requests", "[plan][placement]") {
  std::mt19937 rng(7);
  int impossible = 0, searched = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::int64_t nodes = 1 + rng() % 3, perNode = std::vector<int>{2, 4, 6}[rng() % 3];
    PlacementRequest r = randomRequest(rng, nodes, perNode);
    // Brute force enumerates orders of like stages: keep it to a few stages.
    if (r.stages.empty() || r.stages.size() > 7) continue;
    INFO("trial " << trial);
    std::optional<std::pair<int, std::vector<int>>> expected =
        BruteForce(cluster(nodes, perNode), r).best();
    if (!expected) {
      ++impossible;
      CHECK_THROWS_AS(placeStages(cluster(nodes, perNode), r), PlacementError);
      try {
        placement::solveExactCover(cluster(nodes, perNode), r);
        FAIL("no error for an impossible request");
      } catch (const PlacementError& e) {
        checkMinimalConflict(cluster(nodes, perNode), r, e.what());
      }
      continue;
    }
    ++searched;
    Placement p = placeStages(cluster(nodes, perNode), r);
    CHECK(p.crossNodeBoundaries == expected->first);
    CHECK(firstIds(p) == expected->second);
    Placement z = placement::solveExactCover(cluster(nodes, perNode), r);
    CHECK(z.crossNodeBoundaries == expected->first);
    CHECK(firstIds(z) == expected->second);
  }
  // The generator must exercise both outcomes.
  CHECK(impossible > 10);
  CHECK(searched > 120);
}

// Both placeStages and the Z3 model alone give `starts` and `crossings`.
void checkBothPaths(const ir::Cluster& c, const PlacementRequest& r, const std::vector<int>& starts,
                    int crossings) {
  Placement p = placeStages(c, r);
  CHECK(firstIds(p) == starts);
  CHECK(p.crossNodeBoundaries == crossings);
  Placement z = placement::solveExactCover(c, r);
  CHECK(firstIds(z) == starts);
  CHECK(z.crossNodeBoundaries == crossings);
}

TEST_CASE("a shared node and whole nodes, as the planning notes measured", "[plan][placement]") {
  // (1, 1), (1, 1), (1, 2), (1, 4) share node 0; each later stage takes a node.
  for (int nodes : {4, 16, 64}) {
    PlacementRequest r = request({{1, 1}, {1, 1}, {1, 2}, {1, 4}});
    std::vector<int> starts = {0, 1, 2, 4};
    for (int k = 1; k < nodes; ++k) {
      r.stages.push_back({1, 8});
      starts.push_back(8 * k);
    }
    INFO(nodes << " nodes");
    if (nodes <= 16) {
      checkBothPaths(cluster(nodes, 8), r, starts, nodes - 1);
    } else {
      Placement p = placeStages(cluster(nodes, 8), r);
      CHECK(firstIds(p) == starts);
      CHECK(p.crossNodeBoundaries == nodes - 1);
    }
  }
}

TEST_CASE("Megatron's 64 stages of 6 nodes on 384 nodes", "[plan][placement]") {
  PlacementRequest r = request(std::vector<SubmeshShape>(64, {6, 8}));
  Placement p = placeStages(cluster(384, 8), r);
  REQUIRE(p.devices.size() == 64);
  for (int s = 0; s < 64; ++s) {
    CHECK(p.devices[std::size_t(s)].front() == 48 * s);
    CHECK(p.devices[std::size_t(s)].size() == 48);
  }
  CHECK(p.crossNodeBoundaries == 63);
}

TEST_CASE("a pinned stage keeps its nodes free of earlier stages", "[plan][placement]") {
  // Stage 10 must hold device 0, so it takes nodes 0-5; stages 0-9 follow it.
  std::vector<int> starts;
  for (int s = 0; s < 64; ++s) starts.push_back(s < 10 ? 48 * (s + 1) : s == 10 ? 0 : 48 * s);
  PlacementRequest r = request(std::vector<SubmeshShape>(64, {6, 8}), {{10, {0}}});
  Placement p = placeStages(cluster(384, 8), r);
  CHECK(firstIds(p) == starts);
  CHECK(p.crossNodeBoundaries == 63);

  // The same on 48 nodes, where Z3 alone takes a moment.
  std::vector<int> small = {48, 0, 96, 144, 192, 240, 288, 336};
  checkBothPaths(cluster(48, 8), request(std::vector<SubmeshShape>(8, {6, 8}), {{1, {0}}}), small,
                 7);
}

TEST_CASE("excluded nodes split the whole-node stages", "[plan][placement]") {
  // Nodes 100 and 101 are excluded: stage 16 and later skip them, and the
  // last stage, of 4 nodes, fills nodes 96-99.
  PlacementRequest r = request(std::vector<SubmeshShape>(63, {6, 8}));
  r.stages.push_back({4, 8});
  for (int d = 800; d < 816; ++d) r.excluded.push_back(d);
  std::vector<int> starts;
  for (int s = 0; s < 63; ++s) starts.push_back(s < 16 ? 48 * s : 816 + 48 * (s - 16));
  starts.push_back(768);
  Placement p = placeStages(cluster(384, 8), r);
  CHECK(firstIds(p) == starts);
  CHECK(p.crossNodeBoundaries == 63);
}

TEST_CASE("packing in order can fail where a placement exists", "[plan][placement]") {
  // Node 2 is excluded: the single node must go to node 3 so that both pairs
  // of nodes stay together.
  PlacementRequest r = request({{1, 8}, {2, 8}, {2, 8}}, {}, {16, 17, 18, 19, 20, 21, 22, 23});
  checkBothPaths(cluster(6, 8), r, {24, 0, 32}, 2);
}

TEST_CASE("sub-node stages that cannot meet the crossing bound go to Z3", "[plan][placement]") {
  // 4, 2, 4, 2, 4 devices on two nodes of 8: the bound says one crossing, but
  // the best is two, with the middle three stages on one node.
  PlacementRequest r = request({{1, 4}, {1, 2}, {1, 4}, {1, 2}, {1, 4}});
  std::optional<std::pair<int, std::vector<int>>> expected = BruteForce(cluster(2, 8), r).best();
  REQUIRE(expected);
  CHECK(expected->first == 2);
  CHECK(placement::crossingsLowerBound(cluster(2, 8), r.stages) == 1);
  checkBothPaths(cluster(2, 8), r, expected->second, 2);
  CHECK(expected->second == std::vector<int>{0, 8, 12, 10, 4});
}

// Each device of the cluster in exactly one stage, each stage a valid start.
void checkCover(const ir::Cluster& c, const PlacementRequest& r, const Placement& p) {
  REQUIRE(p.devices.size() == r.stages.size());
  std::vector<int> owners(std::size_t(c.deviceCount()), 0);
  for (std::size_t s = 0; s < r.stages.size(); ++s) {
    std::vector<int> starts = placement::startsOf(c, r.stages[s]);
    CHECK(std::find(starts.begin(), starts.end(), p.devices[s].front()) != starts.end());
    for (int d : p.devices[s]) ++owners[std::size_t(d)];
  }
  CHECK(std::all_of(owners.begin(), owners.end(), [](int n) { return n == 1; }));
}

std::vector<SubmeshShape> interleavedRun(int nodes) {
  std::vector<SubmeshShape> shapes;
  for (int k = 0; k < nodes / 2; ++k)
    for (SubmeshShape s : {SubmeshShape{1, 4}, {1, 2}, {1, 4}, {1, 2}, {1, 4}}) shapes.push_back(s);
  return shapes;
}

TEST_CASE("sub-node stages among many whole-node ones are placed node by node",
          "[plan][placement]") {
  // bench_placement's interleaved-large: 40 sub-node stages that cannot meet
  // the crossing bound, then 88 stages of 5 or 4 nodes on 384 nodes. The
  // sub-node stages are placed as on 16 nodes alone, the others follow.
  PlacementRequest r = request(interleavedRun(16));
  Placement alone = placeStages(cluster(16, 8), r);
  std::vector<int> starts = firstIds(alone);
  for (int i = 0, node = 16; i < 88; node += i++ < 16 ? 5 : 4) {
    r.stages.push_back({i < 16 ? 5 : 4, 8});
    starts.push_back(8 * node);
  }
  Placement p = placeStages(cluster(384, 8), r);
  checkCover(cluster(384, 8), r, p);
  CHECK(firstIds(p) == starts);
  CHECK(p.crossNodeBoundaries == alone.crossNodeBoundaries + 88);

  // Runs of sub-node stages between whole-node ones: as few crossings as the
  // Z3 model alone finds.
  PlacementRequest mixed = request({{2, 8}});
  for (SubmeshShape s : interleavedRun(4)) mixed.stages.push_back(s);
  for (SubmeshShape s : {SubmeshShape{1, 8}, {3, 8}}) mixed.stages.push_back(s);
  for (SubmeshShape s : interleavedRun(4)) mixed.stages.push_back(s);
  mixed.stages.push_back({2, 8});
  ir::Cluster c = cluster(2 + 4 + 1 + 3 + 4 + 2, 8);
  Placement q = placeStages(c, mixed);
  checkCover(c, mixed, q);
  CHECK(q.crossNodeBoundaries == placement::solveExactCover(c, mixed).crossNodeBoundaries);
}

}  // namespace
}  // namespace meshflow::passes
