// One small case worked out by hand: step time, bubble, peak memory and link
// volume, asserted exactly.
#include <catch2/catch.hpp>

#include "passes/Lowering.h"
#include "runtime/sim/Simulator.h"
#include "tests/unit/sim/SimTestSupport.h"

using meshflow::passes::lowerPipeline;
using meshflow::passes::PipelineDescription;
using meshflow::runtime::sim::simulate;
using meshflow::runtime::sim::SimulationResult;
using meshflow::runtime::sim::SimulatorOptions;

// 2 stages × 2 data-parallel replicas, one device per stage and replica:
//   replica 0: stage 0 on device 0, stage 1 on device 1   (node 0)
//   replica 1: stage 0 on device 2, stage 1 on device 3   (node 1)
// 1F1B, m = 4. Every stage: F = 1 s, B = 2 s, update 0.5 s; activation 100 B,
// held per in-flight microbatch 1000 B, parameters + optimizer 10000 B,
// gradients 400 B in buckets of 200 B (two buckets, so the last backward runs as
// two 1 s pieces).
// Links: intra-node α = 0, 200 B/s, so a 100 B transfer takes T = 0.5 s;
// inter-node α = 0.25 s, 400 B/s, so a bucket's ring all-reduce over 2 devices
// takes 2·(1/2)·200/400 + 2·1·0.25 = 0.5 + 0.5 = 1 s.
//
// Orders: rank 0 F0 F1 B0 F2 B1 F3 B2 B3; rank 1 F0 B0 F1 B1 F2 B2 F3 B3. The
// replicas are symmetric; replica 0, times in seconds (compute | comm):
//   dev0 F0 [0,1]      SEND a0 [1,1.5]
//   dev0 F1 [1,2]      SEND a1 [2,2.5]
//   dev1 F0 [1.5,2.5]  (a0 arrived at 1.5)
//   dev1 B0 [2.5,4.5]  SEND g0 [4.5,5]
//   dev1 F1 [4.5,5.5]  (a1 arrived at 2.5)
//   dev1 B1 [5.5,7.5]  SEND g1 [7.5,8]
//   dev0 B0 [5,7]      (g0 at 5)
//   dev0 F2 [7,8]      SEND a2 [8,8.5]
//   dev0 B1 [8,10]     (g1 at 8)
//   dev1 F2 [8.5,9.5]  dev1 B2 [9.5,11.5]  SEND g2 [11.5,12]
//   dev0 F3 [10,11]    SEND a3 [11,11.5]
//   dev1 F3 [11.5,12.5]
//   dev1 B3 pieces [12.5,13.5] [13.5,14.5]; buckets all-reduce [13.5,14.5]
//        [14.5,15.5] (grad stream); SEND g3 [14.5,15]; UPDATE [15.5,16]
//   dev0 B2 [12,14]    (g2 at 12)
//   dev0 B3 pieces [15,16] [16,17] (g3 at 15); all-reduce [16,17] [17,18];
//        UPDATE [18,18.5]
// Step time 18.5 s. Compute per device 4·1 + 4·2 + 0.5 = 12.5 s, so every
// bubble is 6/18.5 = 12/37. The first bucket of dev0 starts at 16, before its
// last backward ends at 17.
//
// Memory (program order): resident 10000 + 400 = 10400 B on every device.
//   rank 0: after F1 two stashes (2000) and a1 (100) are live before a1 is sent
//           and freed; later peaks (RECV g + two stashes) are the same:
//           10400 + 2000 + 100 = 12500.
//   rank 1: RECV a (100) + stash (1000) at F, or stash + grad-out (100) at B:
//           10400 + 1000 + 100 = 11500.
// Volume: per replica 4 activations + 4 gradients of 100 B inside its node
// (800 B, both replicas 1600 B); across nodes each of the 4 buckets per device
// pair sends 200·(2·1/2) = 200 B each way: 4 devices × 2 buckets × 200 = 1600 B.
TEST_CASE("2 stages x 2 replicas, 1F1B, m=4: step time, bubble and memory by hand",
          "[sim][hand]") {
  PipelineDescription description = meshflow::simtest::pipeline("1f1b", 2, 4, 1, 1, 2, 0, 2);
  for (auto& stage : description.stages) {
    stage.updateSeconds = 0.5;
    stage.activationBytes = 100;
    stage.heldActivationBytes = 1000;
    stage.parameterBytes = 10000;
    stage.gradientBytes = 400;
  }
  description.bucketBytes = 200;
  SimulatorOptions options;
  options.devicesPerNode = 2;
  options.intraNode = {0, 200};
  options.interNode = {0.25, 400};
  options.recordTimeline = true;
  auto program = lowerPipeline(description);
  SimulationResult result = simulate(program, options);

  CHECK(result.makespan == 18.5);
  for (int d = 0; d < 4; ++d) {
    CHECK(result.computeBusy[static_cast<size_t>(d)] == 12.5);
    CHECK(result.bubbleFraction[static_cast<size_t>(d)] == 6 / 18.5);
    CHECK(result.residentBytes[static_cast<size_t>(d)] == 10400);
  }
  CHECK(result.peakBytes == std::vector<int64_t>{12500, 11500, 12500, 11500});
  CHECK(result.intraNodeBytes == 1600);
  CHECK(result.interNodeBytes == 1600);

  // dev0's first all-reduce: [16, 17]; its last backward piece ends at 17.
  const auto& code = program.devices[0].code;
  std::vector<std::pair<double, double>> reduces;
  double lastPieceEnd = 0;
  for (const auto& timed : result.timeline[0]) {
    const auto& in = code[timed.index];
    if (in.op == meshflow::ir::Opcode::kAllReduce) reduces.emplace_back(timed.start, timed.end);
    if (in.op == meshflow::ir::Opcode::kRun && in.parts == 2) lastPieceEnd = timed.end;
  }
  CHECK(reduces == std::vector<std::pair<double, double>>{{16, 17}, {17, 18}});
  CHECK(lastPieceEnd == 17);
}
