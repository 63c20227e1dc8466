// Placement with Z3: packing, crossings, pins, exclusions and their conflicts.
#include <catch2/catch.hpp>

#include "passes/Placement.h"

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
                    "exclusions");
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

}  // namespace
}  // namespace meshflow::passes
