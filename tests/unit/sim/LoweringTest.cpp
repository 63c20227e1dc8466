// Lowered programs are valid: checked here independently of ir::checkProgram
// (which must accept them too) — every SEND has its RECV, every transient buffer
// is freed once after its last use, one UPDATE per device ends each step, the RUNs
// follow the schedule, cross-mesh transfers tile and all-gather, and gradients
// leave in buckets.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "ir/Program.h"
#include "passes/Lowering.h"
#include "passes/schedules/Schedules.h"
#include "runtime/sim/Simulator.h"
#include "tests/unit/sim/SimTestSupport.h"

using meshflow::ir::ActionKind;
using meshflow::ir::BufferId;
using meshflow::ir::Instruction;
using meshflow::ir::Opcode;
using meshflow::ir::Program;
using meshflow::passes::buildSchedule;
using meshflow::passes::LoweringError;
using meshflow::passes::lowerPipeline;
using meshflow::passes::PipelineDescription;
using meshflow::simtest::pipeline;

namespace {

PipelineDescription withBytes(PipelineDescription description, int64_t bucketBytes = 128) {
  for (auto& stage : description.stages) {
    stage.activationBytes = 100;
    stage.heldActivationBytes = 1000;
    stage.parameterBytes = 5000;
    stage.gradientBytes = 300;
    stage.updateSeconds = 0.5;
  }
  description.bucketBytes = bucketBytes;
  return description;
}

void checkMessagesPairUp(const Program& program) {
  // target buffer → (sender, receiver, bytes) seen from each side
  std::map<BufferId, std::tuple<int, int, int64_t>> sends;
  std::map<BufferId, std::tuple<int, int, int64_t>> recvs;
  for (int d = 0; d < program.deviceCount(); ++d) {
    const auto& code = program.devices[static_cast<size_t>(d)];
    for (const Instruction& in : code.code) {
      if (in.op == Opcode::kSend) {
        CHECK(sends.emplace(in.target, std::tuple(d, in.peer, in.bytes)).second);
      }
      if (in.op == Opcode::kRecv) {
        CHECK(recvs.emplace(code.defs(in)[0], std::tuple(in.peer, d, in.bytes)).second);
      }
    }
  }
  CHECK(sends == recvs);
}

void checkFreesFollowLastUse(const Program& program) {
  for (int d = 0; d < program.deviceCount(); ++d) {
    const auto& code = program.devices[static_cast<size_t>(d)];
    std::map<BufferId, size_t> lastTouch;
    std::map<BufferId, int> frees;
    std::set<BufferId> defined;
    for (size_t i = 0; i < code.code.size(); ++i) {
      const Instruction& in = code.code[i];
      if (in.op == Opcode::kFree) {
        const BufferId id = code.uses(in)[0];
        ++frees[id];
        CHECK(lastTouch.count(id) == 1);
        lastTouch[id] = i;
        continue;
      }
      for (BufferId id : code.uses(in)) {
        INFO("device " << d << " instruction " << i << " uses " << id);
        CHECK(frees[id] == 0);
        lastTouch[id] = i;
      }
      for (BufferId id : code.defs(in)) {
        CHECK(frees[id] == 0);
        lastTouch[id] = i;
        defined.insert(id);
      }
    }
    for (BufferId id : defined) {
      INFO("device " << d << " buffer " << id);
      const bool resident = program.buffers[id].resident();
      CHECK(frees[id] == (resident ? 0 : 1));
      if (!resident) CHECK(code.code[lastTouch[id]].op == Opcode::kFree);
    }
  }
}

void checkOneUpdateLast(const Program& program) {
  for (const auto& code : program.devices) {
    const auto updates = std::count_if(code.code.begin(), code.code.end(),
                                       [](const Instruction& in) { return in.op == Opcode::kUpdate; });
    CHECK(updates == 1);
    REQUIRE(!code.code.empty());
    CHECK(code.code.back().op == Opcode::kUpdate);
  }
}

// The RUNs of each device, pieces merged, are its rank's schedule.
void checkRunsFollowSchedule(const Program& program, const PipelineDescription& description) {
  auto schedule = buildSchedule({description.schedule, static_cast<int>(description.stages.size()),
                                 description.microbatches, description.chunks, 0});
  for (size_t rank = 0; rank < description.stages.size(); ++rank) {
    for (const auto& mesh : description.stages[rank].meshes) {
      for (int device : mesh) {
        std::vector<meshflow::ir::Action> runs;
        for (const Instruction& in : program.devices[static_cast<size_t>(device)].code) {
          if (in.op == Opcode::kRun && in.part == 0 && in.action != ActionKind::kRecompute)
            runs.push_back({in.action, in.microbatch, in.chunk});
        }
        CHECK(runs == schedule.ranks[rank]);
      }
    }
  }
}

void checkValid(const PipelineDescription& description) {
  Program program = lowerPipeline(description);
  CHECK_NOTHROW(meshflow::ir::checkProgram(program));
  checkMessagesPairUp(program);
  checkFreesFollowLastUse(program);
  checkOneUpdateLast(program);
  checkRunsFollowSchedule(program, description);
}

size_t countOps(const Program& program, int device, Opcode op) {
  const auto& code = program.devices[static_cast<size_t>(device)].code;
  return static_cast<size_t>(
      std::count_if(code.begin(), code.end(), [&](const Instruction& in) { return in.op == op; }));
}

}  // namespace

TEST_CASE("lowered programs are valid for every kind, mesh shape and replica count",
          "[sim][lowering]") {
  struct Case {
    const char* kind;
    int p, m, v;
    double w;
  };
  const Case cases[] = {{"gpipe", 3, 4, 1, 0},       {"1f1b", 4, 6, 1, 0},
                        {"interleaved", 2, 4, 2, 0}, {"interleaved", 3, 6, 3, 0},
                        {"zb-h1", 3, 5, 1, 1},       {"zbv", 3, 6, 2, 1},
                        {"1f1b", 1, 3, 1, 0},        {"interleaved", 1, 2, 2, 0}};
  for (const Case& c : cases) {
    for (int replicas : {1, 2}) {
      for (bool mixedMeshes : {false, true}) {
        std::vector<int> sizes;
        for (int r = 0; r < c.p; ++r) sizes.push_back(mixedMeshes ? 1 + (r % 3) * (r % 3) : 1);
        INFO(c.kind << " p=" << c.p << " m=" << c.m << " v=" << c.v << " replicas=" << replicas
                    << " mixed=" << mixedMeshes);
        checkValid(withBytes(pipeline(c.kind, c.p, c.m, c.v, 1, 2, c.w, replicas, sizes)));
        PipelineDescription recomputing = withBytes(pipeline(c.kind, c.p, c.m, c.v, 1, 2, c.w, replicas, sizes));
        for (auto& stage : recomputing.stages) {
          stage.recompute = true;
          stage.recomputeSeconds = 0.5;
          stage.recomputeBytes = 800;
        }
        checkValid(recomputing);
      }
    }
  }
}

TEST_CASE("a recomputing rank reruns forward work before each backward", "[sim][lowering][recompute]") {
  for (const char* kind : {"gpipe", "1f1b", "zb-h1", "zbv"}) {
    INFO(kind);
    const bool split = std::string(kind).rfind("zb", 0) == 0;
    PipelineDescription description = withBytes(pipeline(kind, 2, 3, kind == std::string("zbv") ? 2 : 1, 1, 2, 1));
    for (auto& stage : description.stages) {
      stage.recompute = true;
      stage.recomputeSeconds = 0.25;
      stage.recomputeBytes = 600;
    }
    Program program = lowerPipeline(description);
    const int chunks = kind == std::string("zbv") ? 2 : 1;
    for (int d = 0; d < program.deviceCount(); ++d) {
      const auto& code = program.devices[static_cast<size_t>(d)];
      int recomputes = 0;
      for (size_t i = 0; i < code.code.size(); ++i) {
        const Instruction& in = code.code[i];
        if (in.op != Opcode::kRun || in.action != ActionKind::kRecompute) continue;
        ++recomputes;
        // R reads the stash its forward defined and defines the rebuilt part.
        REQUIRE(code.uses(in).size() == 1);
        CHECK(program.buffers[code.uses(in)[0]].bytes == 1000 / chunks);
        REQUIRE(code.defs(in).size() == 1);
        const BufferId rebuilt = code.defs(in)[0];
        CHECK(program.buffers[rebuilt].bytes == 600 / chunks);
        CHECK(in.cost == Approx(0.25 / chunks));
        // The next RUN is the backward of the same microbatch and chunk, which reads both.
        const Instruction& next = code.code[i + 1];
        CHECK(next.op == Opcode::kRun);
        CHECK(next.action == (split ? ActionKind::kInputGrad : ActionKind::kBackward));
        CHECK(next.microbatch == in.microbatch);
        CHECK(next.chunk == in.chunk);
        CHECK(std::count(code.uses(next).begin(), code.uses(next).end(), rebuilt) == 1);
        if (next.parts == 1) CHECK(next.cost == Approx(((split ? 1.0 : 2.0) - 0.25) / chunks));
      }
      CHECK(recomputes == 3 * chunks);
    }
  }
}

TEST_CASE("between meshes of different sizes, tiles travel and the receivers all-gather",
          "[sim][lowering][resharding]") {
  // Stage 0 on devices {0,1}, stage 1 on {2,3,4,5}: the 100-byte activation is cut
  // into four 25-byte tiles, tile i from device i mod 2 to device 2+i, then
  // all-gathered over {2,3,4,5}; gradients go back as two 50-byte tiles, tile i
  // from device 2+i, all-gathered over {0,1}.
  Program program = lowerPipeline(withBytes(pipeline("gpipe", 2, 1, 1, 1, 2, 0, 1, {2, 4})));
  const auto& sender = program.devices[0];
  std::vector<std::pair<int, int64_t>> sends;
  for (const Instruction& in : sender.code) {
    if (in.op == Opcode::kSend) sends.emplace_back(in.peer, in.bytes);
  }
  CHECK(sends == std::vector<std::pair<int, int64_t>>{{2, 25}, {4, 25}});
  for (int device = 2; device <= 5; ++device) {
    CHECK(countOps(program, device, Opcode::kAllGather) == 1);
    CHECK(countOps(program, device, Opcode::kRecv) == 1);
  }
  CHECK(countOps(program, 4, Opcode::kSend) == 0);  // only devices 2 and 3 send gradient tiles
  CHECK(countOps(program, 2, Opcode::kSend) == 1);
  CHECK(countOps(program, 0, Opcode::kAllGather) == 1);
  const Instruction& gather = *std::find_if(
      program.devices[3].code.begin(), program.devices[3].code.end(),
      [](const Instruction& in) { return in.op == Opcode::kAllGather; });
  CHECK(gather.bytes == 100);
  CHECK(program.groups[static_cast<size_t>(gather.peer)] == std::vector<int>{2, 3, 4, 5});
}

TEST_CASE("gradients leave in buckets, each all-reduced across the replicas",
          "[sim][lowering][buckets]") {
  // 300 gradient bytes in buckets of at most 128: three buckets of 100 bytes; the
  // last backward runs as three pieces, each followed by its bucket's all-reduce.
  PipelineDescription description = withBytes(pipeline("1f1b", 2, 3, 1, 1, 2, 0, 2), 128);
  Program program = lowerPipeline(description);
  for (int device = 0; device < 4; ++device) {
    const auto& code = program.devices[static_cast<size_t>(device)];
    for (const Instruction& in : code.code) {
      if (in.op == Opcode::kAllReduce) {
        CHECK(in.stream == meshflow::ir::Stream::kGrad);
        CHECK(in.bytes == 100);
      }
    }
    CHECK(countOps(program, device, Opcode::kAllReduce) == 3);
  }
  const auto& code = program.devices[0];
  std::vector<std::string> lastBackward;
  for (size_t i = 0; i < code.code.size(); ++i) {
    const Instruction& in = code.code[i];
    if ((in.op == Opcode::kRun && in.parts == 3) || in.op == Opcode::kAllReduce) {
      lastBackward.push_back(meshflow::ir::instructionText(program, 0, in));
    }
  }
  // Device 0 is rank 0 of replica 0; device 2 is rank 0 of replica 1.
  const Instruction& reduce = *std::find_if(
      code.code.begin(), code.code.end(),
      [](const Instruction& in) { return in.op == Opcode::kAllReduce; });
  CHECK(program.groups[static_cast<size_t>(reduce.peer)] == std::vector<int>{0, 2});
  REQUIRE(lastBackward.size() == 6);
  CHECK(lastBackward[0].rfind("RUN B stage=0 chunk=0 mb=2 part=0/3 cost=0.6666666666666666", 0) == 0);
  CHECK(lastBackward[1].rfind("ALL_REDUCE", 0) == 0);
  CHECK(lastBackward[2].rfind("RUN B stage=0 chunk=0 mb=2 part=1/3", 0) == 0);
  CHECK(lastBackward[5].rfind("ALL_REDUCE", 0) == 0);
}

TEST_CASE("a sharded optimizer reduce-scatters its buckets and all-gathers its parameters",
          "[sim][lowering][zero]") {
  // Two replicas of a 2-rank 1F1B pipeline, 300 gradient bytes in buckets of
  // 128: each of the three buckets is reduce-scattered (not all-reduced) over
  // the replicas, and the UPDATE is followed by an in-place ALL_GATHER of the
  // parameters buffer over the same group. The simulator prices both.
  PipelineDescription plain = withBytes(pipeline("1f1b", 2, 3, 1, 1, 2, 0, 2), 128);
  PipelineDescription sharded = plain;
  for (auto& stage : sharded.stages) stage.shardOptimizer = true;
  Program program = lowerPipeline(sharded);
  CHECK_NOTHROW(meshflow::ir::checkProgram(program));
  checkMessagesPairUp(program);
  checkFreesFollowLastUse(program);
  for (int device = 0; device < 4; ++device) {
    INFO("device " << device);
    const auto& code = program.devices[static_cast<size_t>(device)];
    CHECK(countOps(program, device, Opcode::kAllReduce) == 0);
    CHECK(countOps(program, device, Opcode::kReduceScatter) == 3);
    CHECK(countOps(program, device, Opcode::kAllGather) == 1);
    REQUIRE(code.code.size() >= 2);
    const Instruction& update = code.code[code.code.size() - 2];
    const Instruction& gather = code.code.back();
    CHECK(update.op == Opcode::kUpdate);
    CHECK(gather.op == Opcode::kAllGather);
    CHECK(gather.stream == meshflow::ir::Stream::kGrad);
    CHECK(gather.bytes == 300);
    REQUIRE(gather.useCount == 1);
    CHECK(code.uses(gather)[0] == code.defs(update)[0]);
    CHECK(code.defs(gather)[0] == code.defs(update)[0]);
    CHECK(program.buffers[code.uses(gather)[0]].role == meshflow::ir::BufferRole::kParameters);
    for (const Instruction& in : code.code)
      if (in.op == Opcode::kReduceScatter) {
        CHECK(in.bytes == 100);
        CHECK(program.groups[static_cast<size_t>(in.peer)] == program.groups[static_cast<size_t>(gather.peer)]);
      }
  }
  CHECK(program.groups[static_cast<size_t>(program.devices[0].code.back().peer)] == std::vector<int>{0, 2});
  // A reduce-scatter moves half an all-reduce's bytes; the all-gather moves
  // the parameters once: 3 × 50 + 150 against 3 × 100 bytes per device.
  meshflow::runtime::sim::SimulatorOptions options;
  options.intraNode = {0, 100};
  options.interNode = {0, 100};
  auto withShards = meshflow::runtime::sim::simulate(program, options);
  auto without = meshflow::runtime::sim::simulate(lowerPipeline(plain), options);
  CHECK(withShards.makespan > 0);
  CHECK(withShards.intraNodeBytes + withShards.interNodeBytes ==
        Approx(without.intraNodeBytes + without.interNodeBytes));
  // One replica has nothing to shard over: the flag changes nothing.
  PipelineDescription single = withBytes(pipeline("1f1b", 2, 3, 1, 1, 2, 0, 1), 128);
  PipelineDescription singleSharded = single;
  for (auto& stage : singleSharded.stages) stage.shardOptimizer = true;
  CHECK(lowerPipeline(singleSharded) == lowerPipeline(single));
}

TEST_CASE("inconsistent descriptions are rejected with the rule they break",
          "[sim][lowering][errors]") {
  PipelineDescription twice = pipeline("1f1b", 2, 2, 1, 1, 2);
  twice.stages[1].meshes[0] = {0};
  CHECK_THROWS_AS(lowerPipeline(twice), LoweringError);
  CHECK_THROWS_WITH(lowerPipeline(twice), "device 0 appears in more than one mesh");

  PipelineDescription replicas = pipeline("1f1b", 2, 2, 1, 1, 2, 0, 2);
  replicas.stages[1].meshes.pop_back();
  CHECK_THROWS_WITH(lowerPipeline(replicas), "stage 1 has 1 replicas, stage 0 has 2");

  PipelineDescription zb = pipeline("zb-h1", 2, 2, 1, 1, 2, 3);
  CHECK_THROWS_WITH(lowerPipeline(zb),
                    "stage 0: weightGradSeconds exceeds backwardSeconds; the backward is I + W");

  PipelineDescription rerun = pipeline("1f1b", 2, 2, 1, 1, 2);
  rerun.stages[1].recompute = true;
  rerun.stages[1].recomputeSeconds = 3;
  CHECK_THROWS_WITH(lowerPipeline(rerun), "stage 1: recomputeSeconds must be within backwardSeconds");
  PipelineDescription rerunI = pipeline("zb-h1", 2, 2, 1, 1, 2, 1.5);
  rerunI.stages[0].recompute = true;
  rerunI.stages[0].recomputeSeconds = 1;
  CHECK_THROWS_WITH(lowerPipeline(rerunI), "stage 0: recomputeSeconds exceeds the input-gradient part of "
                                           "backwardSeconds (R runs before I)");

  CHECK_THROWS_WITH(lowerPipeline(pipeline("interleaved", 4, 6, 2, 1, 2)),
                    "interleaved needs microbatches to be a multiple of the group size 4, got 6");
}
