// The Program's text form prints and parses back, and checkProgram catches the
// structural mistakes a backend could not survive.
#include <catch2/catch.hpp>
#include <string>

#include "ir/Program.h"
#include "passes/Lowering.h"
#include "tests/unit/sim/SimTestSupport.h"

using meshflow::ir::checkProgram;
using meshflow::ir::parseProgramText;
using meshflow::ir::Program;
using meshflow::ir::ProgramError;
using meshflow::ir::programText;
using meshflow::passes::lowerPipeline;
using meshflow::passes::PipelineDescription;

namespace {

// Every kind of instruction, written by hand in the canonical form.
const char* const kHandWritten = R"(program devices=2
group 0: 0 1
group 1: 1
buffer 0 device=0 bytes=64 role=stash
buffer 1 device=0 bytes=16 role=act-out
buffer 2 device=1 bytes=16 role=act-in
buffer 3 device=1 bytes=64 role=stash
buffer 4 device=0 bytes=32 role=gradient
buffer 5 device=1 bytes=32 role=gradient
buffer 6 device=0 bytes=128 role=parameters
buffer 7 device=1 bytes=128 role=parameters
buffer 8 device=1 bytes=8 role=tile
buffer 9 device=1 bytes=16 role=act-in
device 0:
  RUN F stage=0 chunk=0 mb=0 cost=0.5 def=0,1
  SEND to=1 buf=1 target=2 bytes=16
  FREE buf=1
  RUN B stage=0 chunk=0 mb=0 part=0/2 cost=0.25 use=0 def=4
  ALL_REDUCE group=0 buf=4 bytes=32 stream=grad
  RUN B stage=0 chunk=0 mb=0 part=1/2 cost=0.25 use=0
  FREE buf=0
  UPDATE stage=0 cost=0.125 use=4,6 def=6
device 1:
  RECV from=0 buf=2 bytes=16
  RUN F stage=1 chunk=1 mb=0 cost=1e-06 use=2 def=3,8
  ALL_GATHER group=1 use=8 def=9 bytes=16
  REDUCE_SCATTER group=1 buf=9 bytes=16
  FREE buf=2
  FREE buf=8
  FREE buf=9
  RUN W stage=1 chunk=1 mb=0 cost=3 use=3 def=5
  ALL_REDUCE group=0 buf=5 bytes=32 stream=grad
  FREE buf=3
  UPDATE stage=1 cost=0.125 use=5,7 def=7
)";

PipelineDescription withBytes(PipelineDescription description) {
  for (auto& stage : description.stages) {
    stage.activationBytes = 100;
    stage.heldActivationBytes = 1000;
    stage.parameterBytes = 5000;
    stage.gradientBytes = 300;
  }
  description.bucketBytes = 128;
  return description;
}

}  // namespace

TEST_CASE("a hand-written program prints back exactly as written", "[sim][program-text]") {
  Program program = parseProgramText(kHandWritten);
  CHECK(programText(program) == kHandWritten);
  CHECK(program.instructionCount() == 19);
  CHECK(program.devices[1].code[1].cost == 1e-06);
}

TEST_CASE("lowered programs round-trip through their text", "[sim][program-text]") {
  using meshflow::simtest::pipeline;
  const PipelineDescription cases[] = {
      withBytes(pipeline("1f1b", 3, 5, 1, 1, 2, 0, 2)),
      withBytes(pipeline("interleaved", 2, 4, 2, 1, 2, 0, 1, {2, 4})),
      withBytes(pipeline("zbv", 2, 3, 2, 1.5, 2, 0.75, 2, {1, 2})),
      withBytes(pipeline("gpipe", 2, 2, 1, 0.1, 0.2)),
  };
  for (const PipelineDescription& description : cases) {
    INFO(description.schedule);
    Program program = lowerPipeline(description);
    const std::string text = programText(program);
    Program parsed = parseProgramText(text);
    CHECK(parsed == program);
    CHECK(programText(parsed) == text);
  }
}

TEST_CASE("malformed program text names its line", "[sim][program-text]") {
  CHECK_THROWS_WITH(parseProgramText("program devices=1\ndevice 0:\n  JUMP x=1\n"),
                    "program text line 3: unknown instruction 'JUMP'");
  CHECK_THROWS_WITH(parseProgramText("program devices=1\ndevice 0:\n  RUN F stage=0 chunk=0 mb=0\n"),
                    "program text line 3: missing cost=");
  CHECK_THROWS_WITH(parseProgramText("program devices=1\n  FREE buf=0\n"),
                    "program text line 2: an instruction before any 'device N:' header");
  CHECK_THROWS_WITH(parseProgramText("program devices=1\nbuffer 1 device=0 bytes=4 role=stash\n"),
                    "program text line 2: buffers must be numbered in order; expected 0");
}

TEST_CASE("checkProgram accepts valid programs and names what is broken",
          "[sim][program-check]") {
  CHECK_NOTHROW(checkProgram(parseProgramText(kHandWritten)));

  std::string useAfterFree = kHandWritten;
  useAfterFree.replace(useAfterFree.find("  FREE buf=0\n"), 13, "  FREE buf=0\n  RUN W stage=0 chunk=0 mb=0 cost=1 use=0\n");
  CHECK_THROWS_WITH(checkProgram(parseProgramText(useAfterFree)),
                    "device 0 instruction 7 `RUN W stage=0 chunk=0 mb=0 cost=1 use=0`: uses "
                    "buffer 0 after its FREE");

  std::string noSend = kHandWritten;
  noSend.erase(noSend.find("  SEND to=1 buf=1 target=2 bytes=16\n"), 36);
  CHECK_THROWS_WITH(checkProgram(parseProgramText(noSend)),
                    "device 1 instruction 0 `RECV from=0 buf=2 bytes=16`: no SEND fills buffer 2");

  std::string wrongBytes = kHandWritten;
  wrongBytes.replace(wrongBytes.find("RECV from=0 buf=2 bytes=16"), 26, "RECV from=0 buf=2 bytes=17");
  CHECK_THROWS_WITH(checkProgram(parseProgramText(wrongBytes)),
                    "device 1 instruction 0 `RECV from=0 buf=2 bytes=17`: does not match device 0 "
                    "instruction 1 `SEND to=1 buf=1 target=2 bytes=16`");

  std::string doubleFree = kHandWritten;
  doubleFree.replace(doubleFree.find("  FREE buf=0\n"), 13, "  FREE buf=0\n  FREE buf=0\n");
  CHECK_THROWS_WITH(checkProgram(parseProgramText(doubleFree)),
                    "device 0 instruction 7 `FREE buf=0`: frees buffer 0, which is not live");

  std::string missingMember = kHandWritten;
  missingMember.erase(missingMember.find("  ALL_REDUCE group=0 buf=5 bytes=32 stream=grad\n"), 48);
  CHECK_THROWS_WITH(checkProgram(parseProgramText(missingMember)),
                    "device 0 instruction 4 `ALL_REDUCE group=0 buf=4 bytes=32 stream=grad`: "
                    "collective 0 on group 0 differs between devices 0 and 1");
}
