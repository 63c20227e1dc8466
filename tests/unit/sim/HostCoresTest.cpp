// Devices that share host cores (SimulatorOptions::hostCores): a RUN or UPDATE
// also waits for a core, the earliest ready first, and keeps it for its whole
// duration — the rule the cpu runtime's CoreGate runs by.
#include <catch2/catch.hpp>

#include "ir/Program.h"
#include "passes/Lowering.h"
#include "runtime/sim/Simulator.h"
#include "tests/unit/sim/SimTestSupport.h"

using meshflow::ir::parseProgramText;
using meshflow::passes::lowerPipeline;
using meshflow::runtime::sim::simulate;
using meshflow::runtime::sim::SimulatorOptions;

namespace {

SimulatorOptions sharing(int cores, double handoff = 0) {
  SimulatorOptions options;
  options.hostCores = cores;
  options.coreHandoff = handoff;
  options.recordTimeline = true;
  return options;
}

// Four devices with one independent second of compute each.
const char* const kFourIndependent = R"(program devices=4
buffer 0 device=0 bytes=8 role=stash
buffer 1 device=1 bytes=8 role=stash
buffer 2 device=2 bytes=8 role=stash
buffer 3 device=3 bytes=8 role=stash
device 0:
  RUN F stage=0 chunk=0 mb=0 cost=1 def=0
device 1:
  RUN F stage=0 chunk=0 mb=0 cost=1 def=1
device 2:
  RUN F stage=0 chunk=0 mb=0 cost=1 def=2
device 3:
  RUN F stage=0 chunk=0 mb=0 cost=1 def=3
)";

// Device 0 computes 1 s and sends; device 1 computes 2 s on its own, then
// 1 s on what it received; device 2 computes 4 s.
const char* const kChain = R"(program devices=3
buffer 0 device=0 bytes=8 role=act-out
buffer 1 device=1 bytes=8 role=act-in
buffer 2 device=1 bytes=8 role=stash
buffer 3 device=1 bytes=8 role=stash
buffer 4 device=2 bytes=8 role=stash
device 0:
  RUN F stage=0 chunk=0 mb=0 cost=1 def=0
  SEND to=1 buf=0 target=1 bytes=8
device 1:
  RUN F stage=1 chunk=0 mb=1 cost=2 def=2
  RECV from=0 buf=1 bytes=8
  RUN F stage=1 chunk=0 mb=0 cost=1 use=1 def=3
device 2:
  RUN F stage=0 chunk=0 mb=0 cost=4 def=4
)";

}  // namespace

TEST_CASE("devices take turns on fewer host cores than devices", "[sim][cores]") {
  auto program = parseProgramText(kFourIndependent);
  CHECK(simulate(program).makespan == 1);
  CHECK(simulate(program, sharing(4)).makespan == 1);
  CHECK(simulate(program, sharing(8)).makespan == 1);
  auto two = simulate(program, sharing(2));
  CHECK(two.makespan == 2);
  // Ties go to the lower device: devices 0 and 1 first, then 2 and 3.
  CHECK(two.timeline[0][0].start == 0);
  CHECK(two.timeline[1][0].start == 0);
  CHECK(two.timeline[2][0].start == 1);
  CHECK(two.timeline[3][0].start == 1);
  CHECK(simulate(program, sharing(1)).makespan == 4);
  // Busy time is compute, not the wait for a core.
  for (double busy : two.computeBusy) CHECK(busy == 1);
}

TEST_CASE("a compute op waits for the earliest core, first ready first served", "[sim][cores]") {
  auto program = parseProgramText(kChain);
  // On their own cores: device 1 waits for the message until 1 s, runs its
  // second op from 2 s to 3 s; device 2 ends at 4 s.
  CHECK(simulate(program).makespan == 4);
  // On two cores: devices 0 and 1 start (lowest devices first); device 0 frees
  // its core at 1 s and device 2, ready since 0, takes it until 5 s. Device 1
  // keeps its turn: its second op is ready when its first ends, at 2 s, with
  // the core that first one frees.
  auto two = simulate(program, sharing(2));
  CHECK(two.makespan == 5);
  CHECK(two.timeline[2][0].start == 1);
  CHECK(two.timeline[1][2].start == 2);
  CHECK(two.timeline[1][2].end == 3);
  // One core: device 0 (0–1), device 1 (1–3); then device 2, ready since 0,
  // goes before device 1's second op, ready at 3 (3–7, then 7–8).
  auto one = simulate(program, sharing(1));
  CHECK(one.makespan == 8);
  CHECK(one.timeline[2][0].start == 3);
  CHECK(one.timeline[1][2].start == 7);
}

TEST_CASE("a device that waited for a core starts a handoff after it frees", "[sim][cores]") {
  auto program = parseProgramText(kChain);
  // Two cores, handoff 0.25 s: devices 0 and 1 start at 0 (free cores, no
  // handoff). Device 2, waiting since 0, gets device 0's core at 1 + 0.25 and
  // computes until 5.25. Device 1 keeps its core: its second op starts at 2.
  auto two = simulate(program, sharing(2, 0.25));
  CHECK(two.timeline[2][0].start == 1.25);
  CHECK(two.timeline[1][2].start == 2);
  CHECK(two.makespan == 5.25);
  // One core: device 1 waited (1.25–3.25), device 2 (3.5–7.5), device 1's
  // second op (7.75–8.75): three handoffs.
  auto one = simulate(program, sharing(1, 0.25));
  CHECK(one.timeline[1][0].start == 1.25);
  CHECK(one.timeline[2][0].start == 3.5);
  CHECK(one.timeline[1][2].start == 7.75);
  CHECK(one.makespan == 8.75);
  // On a core per device nothing is handed over.
  CHECK(simulate(program, sharing(3, 0.25)).makespan == 4);
}

TEST_CASE("a pipeline on shared cores is never faster than its compute over the cores",
          "[sim][cores]") {
  for (const auto& schedule : {"gpipe", "1f1b"}) {
    // 2 stages × 2 replicas: 4 devices.
    auto description = meshflow::simtest::pipeline(schedule, 2, 4, 1, 1.0, 2.0, 0, 2);
    auto program = lowerPipeline(description);
    auto own = simulate(program);
    auto shared = simulate(program, sharing(2));
    double busy = 0;
    for (double b : shared.computeBusy) busy += b;
    INFO(schedule);
    CHECK(shared.computeBusy == own.computeBusy);
    CHECK(shared.makespan >= busy / 2);
    CHECK(shared.makespan >= own.makespan);
    CHECK(simulate(program, sharing(4)).makespan == own.makespan);
  }
}
