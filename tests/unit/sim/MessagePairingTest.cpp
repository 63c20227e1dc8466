// The simulator pairs each SEND with its RECV while it builds its stream queues,
// whichever end comes first in device order; a program whose messages do not pair
// up gets exactly ir::checkMessages's error, and one whose instructions reach into
// another device's buffers ir::checkProgram's.
#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "ir/Program.h"
#include "runtime/sim/Simulator.h"

using meshflow::ir::checkMessages;
using meshflow::ir::checkProgram;
using meshflow::ir::parseProgramText;
using meshflow::ir::Program;
using meshflow::ir::ProgramError;
using meshflow::runtime::sim::simulate;
using meshflow::runtime::sim::SimulationResult;
using meshflow::runtime::sim::SimulatorOptions;

namespace {

std::string programErrorOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const ProgramError& error) {
    return error.what();
  }
  return "";
}

// simulate's error for `text`, which must be checkMessages's.
std::string messageError(const char* text) {
  const Program program = parseProgramText(text);
  const std::string simulated = programErrorOf([&] { simulate(program); });
  CHECK(simulated == programErrorOf([&] { checkMessages(program); }));
  return simulated;
}

// 16 bytes over a link of 16 B/s: one second.
SimulatorOptions slowLinks() {
  SimulatorOptions options;
  options.intraNode = {0, 16};
  return options;
}

}  // namespace

TEST_CASE("messages pair whichever end the simulator meets first", "[sim][messages]") {
  // Device 0's SEND is met before the RECV it fills, device 0's RECV before the
  // SEND that fills it.
  const char* const text = R"(program devices=2
buffer 0 device=0 bytes=16 role=act-out
buffer 1 device=1 bytes=16 role=act-in
buffer 2 device=1 bytes=16 role=grad-out
buffer 3 device=0 bytes=16 role=grad-in
device 0:
  RUN F stage=0 chunk=0 mb=0 cost=1 def=0
  SEND to=1 buf=0 target=1 bytes=16
  RECV from=1 buf=3 bytes=16
  RUN B stage=0 chunk=0 mb=0 cost=1 use=3
device 1:
  RECV from=0 buf=1 bytes=16
  RUN F stage=1 chunk=0 mb=0 cost=1 use=1 def=2
  SEND to=0 buf=2 target=3 bytes=16
)";
  const Program program = parseProgramText(text);
  REQUIRE_NOTHROW(checkProgram(program));
  // F0 [0,1], send [1,2], F1 [2,3], send back [3,4], B0 [4,5].
  CHECK(simulate(program, slowLinks()).makespan == 5);
}

TEST_CASE("a received buffer redefined in place still pairs with its SEND", "[sim][messages]") {
  // Device 0's RECV is not the latest definition of buffer 0 by the time device 1's
  // SEND is paired: an in-place all-reduce redefines it.
  const char* const text = R"(program devices=2
group 0: 0
buffer 0 device=0 bytes=16 role=gradient
buffer 1 device=1 bytes=16 role=gradient
device 0:
  RECV from=1 buf=0 bytes=16
  ALL_REDUCE group=0 buf=0 bytes=16 stream=grad
  UPDATE stage=0 cost=1 use=0
device 1:
  SEND to=0 buf=1 target=0 bytes=16
)";
  const Program program = parseProgramText(text);
  REQUIRE_NOTHROW(checkProgram(program));
  CHECK(simulate(program, slowLinks()).makespan == 2);
}

TEST_CASE("unpaired messages are checkMessages's errors", "[sim][messages]") {
  CHECK(messageError(R"(program devices=2
buffer 0 device=0 bytes=8 role=act-out
buffer 1 device=1 bytes=8 role=act-in
device 0:
  RUN F stage=0 chunk=0 mb=0 cost=1 def=0
  SEND to=1 buf=0 target=1 bytes=8
device 1:
)") == "device 0 instruction 1 `SEND to=1 buf=0 target=1 bytes=8`: no device RECVs this SEND");

  // A second SEND of the same target, met before its RECV and after it.
  CHECK(messageError(R"(program devices=2
buffer 0 device=0 bytes=8 role=act-out
buffer 1 device=1 bytes=8 role=act-in
device 0:
  SEND to=1 buf=0 target=1 bytes=8
  SEND to=1 buf=0 target=1 bytes=8
device 1:
  RECV from=0 buf=1 bytes=8
)") == "device 0 instruction 1 `SEND to=1 buf=0 target=1 bytes=8`: a second SEND fills buffer 1");
  CHECK(messageError(R"(program devices=2
buffer 0 device=0 bytes=8 role=act-in
buffer 1 device=1 bytes=8 role=act-out
device 0:
  RECV from=1 buf=0 bytes=8
device 1:
  SEND to=0 buf=1 target=0 bytes=8
  SEND to=0 buf=1 target=0 bytes=8
)") == "device 1 instruction 1 `SEND to=0 buf=1 target=0 bytes=8`: a second SEND fills buffer 0");

  CHECK(messageError(R"(program devices=2
buffer 0 device=0 bytes=8 role=act-out
buffer 1 device=1 bytes=16 role=act-in
device 0:
  SEND to=1 buf=0 target=1 bytes=8
device 1:
  RECV from=0 buf=1 bytes=16
)") == "device 1 instruction 0 `RECV from=0 buf=1 bytes=16`: does not match device 0 "
       "instruction 0 `SEND to=1 buf=0 target=1 bytes=8`");

  // The RECV comes first in device order and names the wrong sender.
  CHECK(!messageError(R"(program devices=3
buffer 0 device=0 bytes=8 role=act-in
buffer 1 device=2 bytes=8 role=act-out
device 0:
  RECV from=1 buf=0 bytes=8
device 1:
device 2:
  SEND to=0 buf=1 target=0 bytes=8
)")
             .empty());

  // The SEND fills a buffer that a RECV on another device defines.
  CHECK(!messageError(R"(program devices=3
buffer 0 device=0 bytes=8 role=act-out
buffer 1 device=2 bytes=8 role=act-in
device 0:
  SEND to=1 buf=0 target=1 bytes=8
device 1:
device 2:
  RECV from=0 buf=1 bytes=8
)")
             .empty());
}

TEST_CASE("a use of another device's buffer is checkProgram's error", "[sim][messages]") {
  const Program program = parseProgramText(R"(program devices=2
buffer 0 device=0 bytes=8 role=act-out
device 0:
  RUN F stage=0 chunk=0 mb=0 cost=1 def=0
device 1:
  RUN F stage=1 chunk=0 mb=0 cost=1 use=0
)");
  const std::string message = programErrorOf([&] { simulate(program); });
  CHECK(!message.empty());
  CHECK(message == programErrorOf([&] { checkProgram(program); }));
}
