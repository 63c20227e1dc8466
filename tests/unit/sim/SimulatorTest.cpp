// The simulator reproduces the closed forms of shared/reference/schedules.md and
// the exact list-execution timing of passes/schedules; gradient buckets overlap
// the last backward; deadlocks and mismatches are errors that name the devices.
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "ir/Program.h"
#include "passes/Lowering.h"
#include "passes/schedules/ScheduleTiming.h"
#include "passes/schedules/Schedules.h"
#include "runtime/sim/SimTrace.h"
#include "runtime/sim/Simulator.h"
#include "tests/unit/sim/SimTestSupport.h"

using meshflow::ir::Opcode;
using meshflow::ir::parseProgramText;
using meshflow::ir::Program;
using meshflow::passes::lowerPipeline;
using meshflow::passes::PipelineDescription;
using meshflow::passes::Rational;
using meshflow::runtime::sim::simulate;
using meshflow::runtime::sim::SimulationError;
using meshflow::runtime::sim::SimulationResult;
using meshflow::runtime::sim::SimulatorOptions;
using meshflow::simtest::pipeline;

namespace {

// Times whose sums are exact in binary floating point, so "equal" means equal.
const std::pair<double, double> kTimes[] = {{1, 2}, {1, 1}, {0.5, 1.5}, {0.25, 3}};

SimulationResult simulatePipeline(const PipelineDescription& description,
                                  const SimulatorOptions& options = {}) {
  return simulate(lowerPipeline(description), options);
}

}  // namespace

TEST_CASE("GPipe and 1F1B take (m+p-1)(tF+tB) and idle (p-1)(tF+tB) on every device",
          "[sim][closed-form]") {
  for (const char* kind : {"gpipe", "1f1b"}) {
    for (int p = 1; p <= 5; ++p) {
      for (int m = 1; m <= 9; ++m) {
        for (auto [f, b] : kTimes) {
          INFO(kind << " p=" << p << " m=" << m << " tF=" << f << " tB=" << b);
          SimulationResult result = simulatePipeline(pipeline(kind, p, m, 1, f, b));
          CHECK(result.makespan == (m + p - 1) * (f + b));
          for (int d = 0; d < p; ++d) {
            CHECK(result.computeBusy[static_cast<size_t>(d)] == m * (f + b));
            CHECK(result.makespan - result.computeBusy[static_cast<size_t>(d)] == (p - 1) * (f + b));
          }
        }
      }
    }
  }
  // The reference example: p=4, m=8, tF=1, tB=2 takes 33 with bubble 3/11.
  SimulationResult example = simulatePipeline(pipeline("1f1b", 4, 8, 1, 1, 2));
  CHECK(example.makespan == 33);
  CHECK(example.bubbleFraction[0] == Approx(3.0 / 11).epsilon(1e-15));
}

TEST_CASE("interleaved 1F1B takes m(tF+tB) + (p-1)(tF+tB)/v", "[sim][closed-form]") {
  CHECK(simulatePipeline(pipeline("interleaved", 4, 8, 2, 1, 2)).makespan == 28.5);
  for (int p : {2, 4}) {
    for (int v : {2, 4}) {
      for (int m : {p, 2 * p, 3 * p}) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        CHECK(simulatePipeline(pipeline("interleaved", p, m, v, 1, 2)).makespan ==
              m * 3.0 + (p - 1) * 3.0 / v);
      }
    }
  }
}

TEST_CASE("the simulator times every kind exactly as the schedule evaluator does",
          "[sim][closed-form]") {
  // With a P2P latency no larger than the shortest action, a device's sends never
  // queue behind each other, so the latency adds exactly as the evaluator adds it.
  struct Case {
    const char* kind;
    int p, m, v;
  };
  const Case cases[] = {{"gpipe", 3, 5, 1},       {"1f1b", 4, 7, 1},  {"interleaved", 3, 6, 2},
                        {"interleaved", 2, 4, 3}, {"zb-h1", 4, 8, 1}, {"zbv", 3, 7, 2},
                        {"zbv", 4, 8, 2}};
  for (const Case& c : cases) {
    for (double latency : {0.0, 0.25}) {
      INFO(c.kind << " p=" << c.p << " m=" << c.m << " v=" << c.v << " latency=" << latency);
      meshflow::passes::TimingOptions timing;
      timing.times = {3, 6, 3};  // divisible by every v below, so exact
      timing.p2pLatency = latency == 0 ? Rational(0) : Rational(1, 4);
      auto expected =
          meshflow::passes::timeSchedule(meshflow::passes::buildSchedule({c.kind, c.p, c.m, c.v, 0}), timing);
      SimulatorOptions options;
      options.intraNode.latency = latency;
      options.devicesPerNode = 64;
      SimulationResult result = simulatePipeline(pipeline(c.kind, c.p, c.m, c.v, 3, 6, 3), options);
      CHECK(result.makespan == expected.makespan.toDouble());
      for (int d = 0; d < c.p; ++d) {
        CHECK(result.computeBusy[static_cast<size_t>(d)] == expected.busy[static_cast<size_t>(d)].toDouble());
      }
    }
  }
}

TEST_CASE("a gradient bucket is all-reduced while the last backward still runs",
          "[sim][buckets]") {
  PipelineDescription description = pipeline("1f1b", 2, 4, 1, 1, 2, 0, 2);
  for (auto& stage : description.stages) stage.gradientBytes = 4000;
  description.bucketBytes = 1000;  // four buckets per device
  SimulatorOptions options;
  options.recordTimeline = true;
  options.interNode = {0.01, 1e6};
  options.intraNode = {0.01, 1e6};
  Program program = lowerPipeline(description);
  SimulationResult result = simulate(program, options);
  for (int device = 0; device < program.deviceCount(); ++device) {
    const auto& code = program.devices[static_cast<size_t>(device)].code;
    double firstReduceStart = -1;
    double lastBackwardEnd = 0;
    for (const auto& timed : result.timeline[static_cast<size_t>(device)]) {
      const auto& in = code[timed.index];
      if (in.op == Opcode::kAllReduce && firstReduceStart < 0) firstReduceStart = timed.start;
      if (in.op == Opcode::kRun && in.parts > 1) lastBackwardEnd = std::max(lastBackwardEnd, timed.end);
    }
    INFO("device " << device);
    CHECK(firstReduceStart >= 0);
    CHECK(firstReduceStart < lastBackwardEnd);
  }
}

TEST_CASE("a cycle of waits is a deadlock naming each device and instruction",
          "[sim][deadlock]") {
  // Each device's forward needs what the other sends only after its own forward.
  const char* const text = R"(program devices=2
buffer 0 device=0 bytes=8 role=act-in
buffer 1 device=0 bytes=8 role=act-out
buffer 2 device=1 bytes=8 role=act-in
buffer 3 device=1 bytes=8 role=act-out
device 0:
  RECV from=1 buf=0 bytes=8
  RUN F stage=0 chunk=0 mb=0 cost=1 use=0 def=1
  SEND to=1 buf=1 target=2 bytes=8
device 1:
  RECV from=0 buf=2 bytes=8
  RUN F stage=1 chunk=0 mb=0 cost=1 use=2 def=3
  SEND to=0 buf=3 target=0 bytes=8
)";
  CHECK_THROWS_WITH(
      simulate(parseProgramText(text)),
      "deadlock: 2 devices can never finish:\n"
      "  device 0 instruction 1 `RUN F stage=0 chunk=0 mb=0 cost=1 use=0 def=1` waits for buffer 0 "
      "from its SEND, device 1 instruction 2 `SEND to=0 buf=3 target=0 bytes=8`\n"
      "  device 0 instruction 2 `SEND to=1 buf=1 target=2 bytes=8` waits for buffer 1 from device 0 "
      "instruction 1 `RUN F stage=0 chunk=0 mb=0 cost=1 use=0 def=1`\n"
      "  device 1 instruction 1 `RUN F stage=1 chunk=0 mb=0 cost=1 use=2 def=3` waits for buffer 2 "
      "from its SEND, device 0 instruction 2 `SEND to=1 buf=1 target=2 bytes=8`\n"
      "  device 1 instruction 2 `SEND to=0 buf=3 target=0 bytes=8` waits for buffer 3 from device 1 "
      "instruction 1 `RUN F stage=1 chunk=0 mb=0 cost=1 use=2 def=3`");
}

TEST_CASE("mismatched messages and collectives are errors, never hangs", "[sim][deadlock]") {
  const char* const unmatched = R"(program devices=2
buffer 0 device=1 bytes=8 role=act-in
device 0:
device 1:
  RECV from=0 buf=0 bytes=8
)";
  CHECK_THROWS_WITH(simulate(parseProgramText(unmatched)),
                    "device 1 instruction 0 `RECV from=0 buf=0 bytes=8`: no SEND fills buffer 0");

  const char* const absent = R"(program devices=2
group 0: 0 1
buffer 0 device=0 bytes=8 role=gradient
device 0:
  ALL_REDUCE group=0 buf=0 bytes=8 stream=grad
device 1:
)";
  CHECK_THROWS_WITH(simulate(parseProgramText(absent)),
                    "deadlock: 1 device can never finish:\n  device 0 instruction 0 `ALL_REDUCE "
                    "group=0 buf=0 bytes=8 stream=grad` waits for device(s) 1 to join group 0");

  const char* const different = R"(program devices=2
group 0: 0 1
buffer 0 device=0 bytes=8 role=gradient
buffer 1 device=1 bytes=8 role=gradient
device 0:
  ALL_REDUCE group=0 buf=0 bytes=8
device 1:
  ALL_REDUCE group=0 buf=1 bytes=16
)";
  CHECK_THROWS_AS(simulate(parseProgramText(different)), SimulationError);
  CHECK_THROWS_WITH(simulate(parseProgramText(different)),
                    Catch::Contains("collective mismatch on group 0: device 0 instruction 0"));
}

TEST_CASE("the trace has compute, comm and grad rows per device", "[sim][trace]") {
  PipelineDescription description = pipeline("1f1b", 2, 2, 1, 1, 2, 0, 2);
  for (auto& stage : description.stages) {
    stage.activationBytes = 1000;
    stage.gradientBytes = 1000;
  }
  SimulatorOptions options;
  options.recordTimeline = true;
  options.intraNode = {0, 1e6};
  Program program = lowerPipeline(description);
  SimulationResult result = simulate(program, options);
  nlohmann::json trace = meshflow::runtime::sim::simulationTrace(program, result);
  std::set<std::pair<int, int>> rows;
  std::set<std::string> names;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    rows.emplace(event["pid"].get<int>(), event["tid"].get<int>());
    names.insert(event["name"].get<std::string>());
  }
  for (int d = 0; d < 4; ++d) {
    CHECK(rows.count({d, 0}) == 1);
    CHECK(rows.count({d, 1}) == 1);
    CHECK(rows.count({d, 2}) == 1);
  }
  for (const char* name : {"F0", "B1", "send→1", "recv←0", "all-reduce", "update"}) {
    CHECK(names.count(name) == 1);
  }
  CHECK(trace["traceEvents"][0]["name"] == "process_name");
  CHECK_THROWS_AS(meshflow::runtime::sim::simulationTrace(program, simulate(program)),
                  SimulationError);
}
