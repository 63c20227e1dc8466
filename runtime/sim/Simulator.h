// The sim backend: runs an ir::Program on a virtual clock.
//
// Every device has three in-order streams — compute (RUN, UPDATE), comm (SEND and
// resharding collectives) and grad (gradient synchronisation) — that
// overlap wherever the data allows. An instruction starts when its stream is free
// and every buffer it uses is ready; it ends after its cost:
//
//   RUN, UPDATE   its `cost` in seconds.
//   SEND          α + bytes/β of the link between the two devices, on the sender's
//                 comm stream; the sender does not wait for the receiver (an
//                 eager send), and the data is at the peer when the SEND ends.
//   RECV          complete when its SEND's data has arrived. It occupies no stream:
//                 links are full duplex, so a device's incoming data never waits
//                 behind its own outgoing SENDs (the comm stream orders those).
//   collectives   start when every member of the group has reached the collective
//                 (stream free, inputs ready) and take the ring formula of
//                 passes/Collectives.h on the group's link: intra-node when every
//                 member is in one node, else inter-node.
//   FREE          takes no time.
//
// With SimulatorOptions::hostCores below the device count, RUN and UPDATE also
// need one of the host's cores (list scheduling, first ready first served); a
// device that waited for its core starts SimulatorOptions::coreHandoff after
// the core frees.
//
// Instructions are evaluated as soon as what decides their start is known (a
// dependency-driven discrete-event run), so the result does not depend on the
// order devices are visited. One pass first deals each device's instructions out
// to its stream queues and resolves every input to the op or RECV that produces
// it (StreamQueues.h); the run then only follows those queues, each stream
// sleeping until the one thing it waits for happens, so a step of thousands of
// devices and millions of instructions takes about a second (docs/simulator.md).
// A RECV without its SEND (or the reverse) is an ir::ProgramError naming both
// ends; a program whose devices wait on each other forever — a collective some
// member never reaches, a cycle of waits — is a SimulationError naming every
// blocked device, instruction and what it waits for.
//
// Memory: resident buffers (parameters, optimizer state, gradients) count from
// the start; any other buffer counts from the first instruction that defines it
// until its FREE, in program order, as a stream-ordered caching allocator sees it.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "ir/Program.h"

namespace meshflow::runtime::sim {

/// A link's latency α (seconds) and bandwidth (bytes per second, one direction).
/// The default link is free: no latency, infinite bandwidth.
struct Link {
  double latency = 0;
  double bandwidth = std::numeric_limits<double>::infinity();

  double transferSeconds(double bytes) const { return latency + bytes / bandwidth; }
};

struct SimulatorOptions {
  int devicesPerNode = 8;  // device d is in node d / devicesPerNode
  Link intraNode;
  Link interNode;
  bool recordTimeline = false;  // keep every instruction's start and end (see SimTrace.h)
  /// Host cores the devices share, as the cpu backend's devices share the
  /// machine's (runtime/cpu/CoreGate.h); 0: every device computes on its own.
  /// With fewer cores than devices a RUN or UPDATE also waits for a core: the
  /// compute instructions that are ready take the free cores in the order they
  /// became ready (ties: lower device first), each for its whole duration.
  int hostCores = 0;
  /// Seconds a core stays idle when it passes to a device that waited for it
  /// (the cpu runtime wakes that device's thread: microseconds, measured by
  /// bench_runtime). A device that finds a core free, or keeps its own, pays
  /// nothing. Only with hostCores.
  double coreHandoff = 0;
};

/// Bytes that crossed one directed device pair (P2P, and collectives counted as
/// ring traffic from each member to the next member of its group).
struct LinkVolume {
  int from = 0;
  int to = 0;
  double bytes = 0;
  bool interNode = false;
};

struct TimedInstruction {
  uint32_t index = 0;  // into the device's code
  double start = 0;
  double end = 0;
};

struct SimulationResult {
  double makespan = 0;                 // the step time: when the last instruction ends
  std::vector<double> computeBusy;     // per device: seconds of RUN and UPDATE
  std::vector<double> bubbleFraction;  // per device: (makespan − computeBusy) / makespan
  std::vector<int64_t> residentBytes;  // per device: parameters, optimizer state, gradients
  std::vector<int64_t> peakBytes;      // per device: resident + the most other bytes live
  double intraNodeBytes = 0;
  double interNodeBytes = 0;
  std::vector<LinkVolume> links;  // sorted by (from, to); pairs with traffic only
  /// When SimulatorOptions::recordTimeline: per device, every instruction but FREE,
  /// in program order.
  std::vector<std::vector<TimedInstruction>> timeline;
};

class SimulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Runs one step of `program`. Throws ir::ProgramError when SENDs and RECVs do
/// not pair up (ir::checkMessages's message), or when an instruction uses a buffer
/// another device defines or a collective names no group (ir::checkProgram's);
/// SimulationError on a deadlock or a collective that its members call
/// differently. Programs from passes/Lowering are assumed to satisfy
/// ir::checkProgram; run it first on a program from anywhere else.
SimulationResult simulate(const ir::Program& program, const SimulatorOptions& options = {});

/// Seconds of one collective of `bytes` (conventions as ir::Program) over `members`
/// devices on `link`, by the ring formulas of passes/Collectives.h.
double collectiveSeconds(ir::Opcode op, double bytes, int members, const Link& link);

}  // namespace meshflow::runtime::sim
