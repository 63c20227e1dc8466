// The Program: per device, an ordered instruction stream that a backend runs
// without ever seeing the graph.
//
// Instructions name buffers by id. Every buffer lives on one device and has a size
// in bytes; resident buffers (parameters with their optimizer state, gradients)
// exist for the whole step, the others are allocated by the first instruction that
// defines them and released by a FREE. A buffer is defined once, except that an
// in-place collective (an all-reduce of a gradient bucket) uses and redefines it.
//
// Each instruction runs on one of a device's three streams, which overlap where
// the data allows: RUN and UPDATE on the compute stream; SEND, RECV and the
// collectives of resharding on the comm stream; gradient synchronisation on the
// grad stream (its own NCCL communicator in a real run, so a bucket never waits
// behind a pipeline transfer). FREE is bookkeeping and takes no time.
//
// A SEND names the buffer it sends from and the buffer on the peer it fills; that
// target buffer is the message's identity, and the matching RECV defines it.
//
// Text form (prints with programText(), parses back with parseProgramText()):
//
//   program devices=2
//   group 0: 0 1
//   buffer 0 device=0 bytes=64 role=stash
//   buffer 1 device=0 bytes=16 role=act-out
//   buffer 2 device=1 bytes=16 role=act-in
//   device 0:
//     RUN F stage=0 chunk=0 mb=0 cost=0.5 def=0,1
//     SEND to=1 buf=1 target=2 bytes=16
//     FREE buf=1
//   device 1:
//     RECV from=0 buf=2 bytes=16
//     ...
//
// Collectives read `ALL_REDUCE group=0 buf=5 bytes=1024 stream=grad`, and an
// ALL_GATHER names its input and output: `ALL_GATHER group=1 use=7 def=8 bytes=64`.
// A RUN that is one of several pieces of the same work (a backward split so that
// gradient buckets can leave early) carries `part=k/K`.
//
// Activation recomputation: a stage that recomputes keeps a smaller stash from
// its forward (its inputs under "full", all but the attention scores under
// "selective"); a `RUN R` before its B (or I) reruns forward work on that stash
// and defines a second stash buffer with what it rebuilt, which the backward
// reads and frees with the first.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ir/PipelineSchedule.h"

namespace meshflow::ir {

using BufferId = uint32_t;

enum class Opcode : uint8_t {
  kRun,
  kSend,
  kRecv,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kFree,
  kUpdate,
};

enum class Stream : uint8_t { kCompute, kComm, kGrad };

/// What a buffer holds; it decides whether the buffer is resident.
enum class BufferRole : uint8_t {
  kActivationIn,   // a stage's input activation, received from the previous stage
  kStash,          // activations a forward keeps for its backward
  kActivationOut,  // a stage's output activation, to send to the next stage
  kGradIn,         // the gradient of a stage's output, received from the next stage
  kGradOut,        // the gradient of a stage's input, to send to the previous stage
  kTile,           // one tile of a cross-mesh transfer, before the all-gather
  kGradient,       // a bucket of weight gradients (resident)
  kParameters,     // parameters and optimizer state (resident)
};

struct Buffer {
  int64_t bytes = 0;
  int32_t device = 0;
  BufferRole role = BufferRole::kStash;

  bool resident() const { return role == BufferRole::kGradient || role == BufferRole::kParameters; }
  bool operator==(const Buffer&) const = default;
};

/// One instruction. Fields that an opcode does not use stay at their defaults.
struct Instruction {
  Opcode op = Opcode::kRun;
  ActionKind action = ActionKind::kForward;  // RUN: F, B, I or W
  Stream stream = Stream::kCompute;
  uint8_t chunk = 0;        // RUN: the rank's model chunk
  uint16_t part = 0;        // RUN: this piece's index when the work is split into pieces
  uint16_t parts = 1;       // RUN: the number of pieces
  int32_t stage = 0;        // RUN, UPDATE: the pipeline stage (virtual stage for RUN)
  int32_t microbatch = 0;   // RUN
  int32_t peer = -1;        // SEND: receiver; RECV: sender; collectives: group id
  BufferId target = 0;      // SEND: the buffer on the peer that the data fills
  uint32_t operandBegin = 0;  // into DeviceCode::operands: uses, then defs
  uint16_t useCount = 0;
  uint16_t defCount = 0;
  int64_t bytes = 0;  // SEND, RECV, collectives (see ir::Collective bytes conventions below)
  double cost = 0;    // RUN, UPDATE: seconds

  bool operator==(const Instruction&) const = default;
};

/// A device's stream; operands of all its instructions share one array.
struct DeviceCode {
  std::vector<Instruction> code;
  std::vector<BufferId> operands;

  std::span<const BufferId> uses(const Instruction& in) const {
    return {operands.data() + in.operandBegin, in.useCount};
  }
  std::span<const BufferId> defs(const Instruction& in) const {
    return {operands.data() + in.operandBegin + in.useCount, in.defCount};
  }
  bool operator==(const DeviceCode&) const = default;
};

/// Collective byte conventions (as passes/Collectives.h): all-reduce and all-to-all
/// the buffer each member holds; all-gather the gathered buffer each member ends
/// with; reduce-scatter the buffer each member starts with; broadcast the buffer.
struct Program {
  std::vector<Buffer> buffers;           // by BufferId
  std::vector<std::vector<int>> groups;  // device groups of collectives, by id
  std::vector<DeviceCode> devices;       // devices[d]: device d's instructions in order

  explicit Program(int deviceCount = 0) : devices(static_cast<size_t>(deviceCount)) {}

  int deviceCount() const { return static_cast<int>(devices.size()); }
  BufferId addBuffer(int device, int64_t bytes, BufferRole role);
  int addGroup(std::vector<int> devices);
  /// Appends `in` to `device`'s stream with its operands; returns its index.
  size_t append(int device, Instruction in, std::span<const BufferId> uses,
                std::span<const BufferId> defs);
  size_t instructionCount() const;

  bool operator==(const Program&) const = default;
};

std::string_view opcodeName(Opcode op);     // RUN, SEND, ALL_REDUCE, …
std::string_view streamName(Stream stream);  // compute, comm, grad
std::string_view bufferRoleName(BufferRole role);
bool isCollective(Opcode op);

/// One line describing an instruction, as in the text form (without indentation).
std::string instructionText(const Program& program, int device, const Instruction& in);

/// The canonical text of a program (see the file comment).
std::string programText(const Program& program);

/// A malformed program text or a structurally broken program.
class ProgramError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses the text programText() writes; throws ProgramError naming the line.
Program parseProgramText(std::string_view text);

/// Checks that SENDs and RECVs pair up: every SEND's target is defined by exactly one
/// RECV on the peer, from the sender, with the same bytes, and every RECV has its
/// SEND. Throws ProgramError naming both devices and instructions. Linear time.
void checkMessages(const Program& program);

/// Checks what any backend relies on and throws ProgramError naming the device, the
/// instruction index and its text when it fails: operands exist and live on the
/// instruction's device; no use before a definition or after a FREE; FREE only of
/// non-resident buffers, once; a buffer is redefined only by an in-place collective;
/// every SEND has exactly one RECV of its target on the peer, from this device, with
/// the same bytes, and every RECV a SEND; collective groups exist, contain the
/// device, and every member calls the same sequence of collectives on a group.
void checkProgram(const Program& program);

}  // namespace meshflow::ir
