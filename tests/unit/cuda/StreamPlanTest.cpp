// The stream/event plan of a device's code: cross-stream waits for reads after
// writes, writes after reads and writes after writes, the latest per stream
// only, and no event within a stream.
#include <catch2/catch.hpp>

#include "runtime/cuda/StreamPlan.h"

namespace cuda = meshflow::runtime::cuda;
namespace ir = meshflow::ir;

namespace {

ir::Instruction on(ir::Opcode op, ir::Stream stream) {
  ir::Instruction in;
  in.op = op;
  in.stream = stream;
  return in;
}

}  // namespace

TEST_CASE("a send waits for the forward that wrote its buffer; a rewrite waits for the send", "[cuda][streams]") {
  ir::Program p(1);
  const ir::BufferId act = p.addBuffer(0, 64, ir::BufferRole::kActivationOut);
  const ir::BufferId other = p.addBuffer(0, 64, ir::BufferRole::kStash);
  const ir::BufferId in = p.addBuffer(0, 64, ir::BufferRole::kActivationIn);
  p.append(0, on(ir::Opcode::kRecv, ir::Stream::kComm), {}, std::vector<ir::BufferId>{in});       // 0
  p.append(0, on(ir::Opcode::kRun, ir::Stream::kCompute), std::vector<ir::BufferId>{in},
           std::vector<ir::BufferId>{act});                                                       // 1: waits 0
  p.append(0, on(ir::Opcode::kSend, ir::Stream::kComm), std::vector<ir::BufferId>{act}, {});      // 2: waits 1
  p.append(0, on(ir::Opcode::kRun, ir::Stream::kCompute), {}, std::vector<ir::BufferId>{other});  // 3: nothing
  p.append(0, on(ir::Opcode::kRun, ir::Stream::kCompute), {}, std::vector<ir::BufferId>{act});    // 4: waits 2
  const auto plan = cuda::planStreams(p.devices[0]);
  REQUIRE(plan.size() == 5);
  CHECK(plan[0].waitFor.empty());
  CHECK(plan[1].waitFor == std::vector<std::size_t>{0});
  CHECK(plan[2].waitFor == std::vector<std::size_t>{1});
  CHECK(plan[3].waitFor.empty());
  CHECK(plan[4].waitFor == std::vector<std::size_t>{2});  // write after read: the send must have read it
  CHECK(plan[0].recordEvent);
  CHECK(plan[1].recordEvent);
  CHECK(plan[2].recordEvent);
  CHECK_FALSE(plan[3].recordEvent);
  CHECK_FALSE(plan[4].recordEvent);
  CHECK(plan[2].stream == ir::Stream::kComm);
}

TEST_CASE("the update waits once per stream, for the latest all-reduce", "[cuda][streams]") {
  ir::Program p(1);
  const ir::BufferId g1 = p.addBuffer(0, 64, ir::BufferRole::kGradient);
  const ir::BufferId g2 = p.addBuffer(0, 64, ir::BufferRole::kGradient);
  const ir::BufferId w = p.addBuffer(0, 64, ir::BufferRole::kParameters);
  p.append(0, on(ir::Opcode::kRun, ir::Stream::kCompute), std::vector<ir::BufferId>{w},
           std::vector<ir::BufferId>{g1, g2});                                                             // 0
  p.append(0, on(ir::Opcode::kAllReduce, ir::Stream::kGrad), std::vector<ir::BufferId>{g1},
           std::vector<ir::BufferId>{g1});                                                                 // 1
  p.append(0, on(ir::Opcode::kAllReduce, ir::Stream::kGrad), std::vector<ir::BufferId>{g2},
           std::vector<ir::BufferId>{g2});                                                                 // 2
  p.append(0, on(ir::Opcode::kUpdate, ir::Stream::kCompute), std::vector<ir::BufferId>{g1, g2, w},
           std::vector<ir::BufferId>{w});                                                                  // 3
  const auto plan = cuda::planStreams(p.devices[0]);
  CHECK(plan[1].waitFor == std::vector<std::size_t>{0});
  CHECK(plan[2].waitFor == std::vector<std::size_t>{0});
  CHECK(plan[3].waitFor == std::vector<std::size_t>{2});  // 2 follows 1 on the grad stream
  CHECK_FALSE(plan[1].recordEvent);
  CHECK(plan[2].recordEvent);
}
