// The simulator's view of a Program: each device's instructions dealt out to the
// queues of its three streams, each op with its duration on the simulated links
// and the waits that can block it, every wait resolved to the op or RECV whose
// completion it waits for, every SEND to the RECV it completes.
//
// FREE takes no time and a RECV is completed by its SEND, so neither joins a
// queue. A use waits for the buffer's latest definition before it in program
// order (ir::checkProgram allows a redefinition only by an in-place collective,
// which itself waits for the one before), except when nothing can make it wait:
// the buffer was never defined before (parameters, or a gradient before its first
// bucket), or its latest definition is earlier on the same stream, which has
// finished it by the time it gets here. Resolving the rest to producers once lets
// the simulator follow each device's own ops and RECVs, which it visits in order,
// and never look at a table of every buffer or at the instructions themselves.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ir/Program.h"
#include "runtime/sim/Simulator.h"

namespace meshflow::runtime::sim {

constexpr int kStreams = 3;  // compute, comm, grad (ir::Stream)
constexpr uint8_t kRecvSource = kStreams;

/// A use that can block: it is ready once op `position` of the device's stream
/// `source` has run, or, from kRecvSource, once the device's RECV number `position`
/// is complete. (A buffer lives on one device, so its producer is on the user's.)
struct Wait {
  uint32_t position = 0;
  uint16_t operand = 0;  // which use of the instruction it is, for error messages
  uint8_t source = 0;
};

/// One instruction of a stream's queue.
struct StreamOp {
  /// Its duration (a collective's once every member has arrived) until it runs;
  /// the simulator then keeps the time it ended here.
  double time = 0;
  uint32_t index = 0;     // into the device's code
  int32_t peer = -1;      // a SEND's receiver, a collective's group
  uint32_t delivery = 0;  // a SEND: the number of the RECV it completes on the peer
  uint16_t waitCount = 0;
  ir::Opcode op = ir::Opcode::kRun;
};

/// A stream's ops in program order, and their waits: op by op, each op's in operand
/// order, so op k's waits follow those of ops 0..k-1.
struct StreamQueue {
  std::vector<StreamOp> ops;
  std::vector<Wait> waits;
};

struct DeviceQueues {
  std::array<StreamQueue, kStreams> streams;
  std::vector<uint32_t> recvs;  // the device's RECVs in program order: instruction indices
};

/// Builds the queues device by device, so that a caller can measure each device
/// while its code is still in cache. SENDs are paired with their RECVs on the way:
/// whichever end comes second finds the first through the target buffer.
class StreamQueueBuilder {
 public:
  StreamQueueBuilder(const ir::Program& program, const SimulatorOptions& options);
  ~StreamQueueBuilder();

  /// Devices must come in order 0, 1, …
  void addDevice(int device);
  /// Throws ir::ProgramError: ir::checkMessages's when SENDs and RECVs do not pair
  /// up, ir::checkProgram's when an instruction uses a buffer that another device
  /// defines or a collective names a group that does not exist.
  std::vector<DeviceQueues> finish();

 private:
  struct Definitions;
  struct ReceiveEnd;
  struct SendEnd;

  void reserve(int device);
  void addRecv(int device, uint32_t index);
  void addOp(int device, uint32_t index);
  void defineAll(const ir::Instruction& in, const ir::DeviceCode& code, uint32_t source,
                 uint32_t position);
  double secondsOf(int device, const ir::Instruction& in) const;
  void addSend(const SendEnd& send);
  void pairWithParked(int device, uint32_t number, const ir::Instruction& recv,
                      ir::BufferId buffer);
  void pair(const SendEnd& send, uint32_t number);
  uint32_t receiveOf(int device, ir::BufferId buffer) const;
  bool allPaired();

  const ir::Program& program_;
  const SimulatorOptions& options_;
  std::vector<Link> groupLinks_;      // per group
  std::vector<Definitions> seen_;     // per buffer
  std::vector<DeviceQueues> queues_;  // per device
  // Per device, per RECV: what it expects of its SEND. A SEND that comes after its
  // RECV reads this, in the order the RECVs were built, rather than the RECV itself,
  // which is scattered through a device's code and long out of cache.
  std::vector<std::vector<ReceiveEnd>> receives_;
  // SENDs whose RECV has not come yet; seen_ of their target points here. Entries
  // are reused, so the list holds only the messages in flight across the pass.
  std::vector<SendEnd> parked_;
  std::vector<uint32_t> freeParked_;
  std::vector<SendEnd> late_;  // SENDs whose target something else defines: paired at the end
  size_t receiveCount_ = 0;
  size_t pairedCount_ = 0;
  bool unpaired_ = false;   // some SEND or RECV cannot pair
  bool malformed_ = false;  // a use of another device's buffer, or a collective without a group
};

}  // namespace meshflow::runtime::sim
