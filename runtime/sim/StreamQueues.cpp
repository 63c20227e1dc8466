#include "runtime/sim/StreamQueues.h"

#include <algorithm>
#include <limits>

namespace meshflow::runtime::sim {
namespace {

using ir::BufferId;
using ir::DeviceCode;
using ir::Instruction;
using ir::Opcode;

// Definitions::latest encodes a source as device * kSources + stream (or kRecvSource).
constexpr uint32_t kSources = kRecvSource + 1;
constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
// Definitions::latest of a buffer that a parked SEND fills; position is its entry.
constexpr uint32_t kParked = kNone - 1;
constexpr int32_t kClaimed = -1;

int nodeOf(int device, const SimulatorOptions& options) {
  return device / std::max(1, options.devicesPerNode);
}

const Link& groupLink(const std::vector<int>& group, const SimulatorOptions& options) {
  for (int member : group) {
    if (nodeOf(member, options) != nodeOf(group[0], options)) return options.interNode;
  }
  return options.intraNode;
}

}  // namespace

// Per buffer while the pass runs: where its latest definition ran, as a source and
// the op or RECV number there; kNone before the first, kParked before the first
// when a SEND waits for the RECV that defines it.
struct StreamQueueBuilder::Definitions {
  uint32_t latest = kNone;
  uint32_t position = 0;
};

// What a RECV expects of its SEND.
struct StreamQueueBuilder::ReceiveEnd {
  int64_t bytes = 0;
  int32_t from = 0;  // kClaimed once its SEND is found, so that a second one does not match
};

// A SEND, and where its op is.
struct StreamQueueBuilder::SendEnd {
  int64_t bytes = 0;
  BufferId target = 0;
  int32_t device = 0;
  int32_t peer = 0;
  uint32_t stream = 0;
  uint32_t op = 0;
};

StreamQueueBuilder::StreamQueueBuilder(const ir::Program& program, const SimulatorOptions& options)
    : program_(program),
      options_(options),
      seen_(program.buffers.size()),
      queues_(program.devices.size()),
      receives_(program.devices.size()) {
  groupLinks_.reserve(program.groups.size());
  for (const std::vector<int>& group : program.groups)
    groupLinks_.push_back(groupLink(group, options));
}

StreamQueueBuilder::~StreamQueueBuilder() = default;

void StreamQueueBuilder::addDevice(int device) {
  const DeviceCode& code = program_.devices[static_cast<size_t>(device)];
  reserve(device);
  for (uint32_t i = 0; i < code.code.size(); ++i) {
    const Opcode op = code.code[i].op;
    if (op == Opcode::kRecv) {
      addRecv(device, i);
    } else if (op != Opcode::kFree) {
      addOp(device, i);
    }
  }
}

// Sizes the device's queues before they fill: growing them by doubling would touch
// twice the memory, and fresh memory costs a page fault per page.
void StreamQueueBuilder::reserve(int device) {
  const DeviceCode& code = program_.devices[static_cast<size_t>(device)];
  std::array<size_t, kStreams> ops{};
  std::array<size_t, kStreams> uses{};
  size_t recvs = 0;
  for (const Instruction& in : code.code) {
    if (in.op == Opcode::kRecv) ++recvs;
    if (in.op == Opcode::kRecv || in.op == Opcode::kFree) continue;
    ++ops[static_cast<size_t>(in.stream)];
    uses[static_cast<size_t>(in.stream)] += in.useCount;
  }
  DeviceQueues& queues = queues_[static_cast<size_t>(device)];
  for (size_t s = 0; s < kStreams; ++s) {
    queues.streams[s].ops.reserve(ops[s]);
    queues.streams[s].waits.reserve(uses[s]);  // at most; pages never written cost nothing
  }
  queues.recvs.reserve(recvs);
  receives_[static_cast<size_t>(device)].reserve(recvs);
}

void StreamQueueBuilder::addRecv(int device, uint32_t index) {
  const DeviceCode& code = program_.devices[static_cast<size_t>(device)];
  const Instruction& in = code.code[index];
  std::vector<uint32_t>& recvs = queues_[static_cast<size_t>(device)].recvs;
  const auto number = static_cast<uint32_t>(recvs.size());
  recvs.push_back(index);
  receives_[static_cast<size_t>(device)].push_back({in.bytes, in.peer});
  ++receiveCount_;
  pairWithParked(device, number, in, code.defs(in)[0]);
  defineAll(in, code, static_cast<uint32_t>(device) * kSources + kRecvSource, number);
}

// Appends instruction `index` to its stream's queue with the uses that can block it.
void StreamQueueBuilder::addOp(int device, uint32_t index) {
  const DeviceCode& code = program_.devices[static_cast<size_t>(device)];
  const Instruction& in = code.code[index];
  StreamQueue& queue = queues_[static_cast<size_t>(device)].streams[static_cast<size_t>(in.stream)];
  const uint32_t firstSource = static_cast<uint32_t>(device) * kSources;
  const uint32_t source = firstSource + static_cast<uint32_t>(in.stream);
  StreamOp op;
  op.time = secondsOf(device, in);
  op.index = index;
  op.peer = in.peer;
  op.op = in.op;
  if (ir::isCollective(in.op) && static_cast<size_t>(in.peer) >= program_.groups.size()) {
    malformed_ = true;
  }
  const size_t firstWait = queue.waits.size();
  const std::span<const BufferId> uses = code.uses(in);
  for (size_t k = 0; k < uses.size(); ++k) {
    const Definitions& defs = seen_[uses[k]];
    if (defs.latest >= kParked || defs.latest == source) continue;
    malformed_ = malformed_ || defs.latest < firstSource || defs.latest >= firstSource + kSources;
    queue.waits.push_back(
        {defs.position, static_cast<uint16_t>(k), static_cast<uint8_t>(defs.latest % kSources)});
  }
  op.waitCount = static_cast<uint16_t>(queue.waits.size() - firstWait);
  queue.ops.push_back(op);
  const auto position = static_cast<uint32_t>(queue.ops.size() - 1);
  if (in.op == Opcode::kSend) {
    addSend({in.bytes, in.target, device, in.peer, static_cast<uint32_t>(in.stream), position});
  }
  defineAll(in, code, source, position);
}

void StreamQueueBuilder::defineAll(const Instruction& in, const DeviceCode& code, uint32_t source,
                                   uint32_t position) {
  for (BufferId id : code.defs(in)) seen_[id] = {source, position};
}

double StreamQueueBuilder::secondsOf(int device, const Instruction& in) const {
  const auto bytes = static_cast<double>(in.bytes);
  switch (in.op) {
    case Opcode::kRun:
    case Opcode::kUpdate:
      return in.cost;
    case Opcode::kSend: {
      const bool sameNode = nodeOf(device, options_) == nodeOf(in.peer, options_);
      return (sameNode ? options_.intraNode : options_.interNode).transferSeconds(bytes);
    }
    default: {
      const auto group = static_cast<size_t>(in.peer);
      if (group >= program_.groups.size()) return 0;  // malformed; finish() says so
      return collectiveSeconds(in.op, bytes, static_cast<int>(program_.groups[group].size()),
                               groupLinks_[group]);
    }
  }
}

// Pairs a SEND with its RECV if that came already, else parks it where the RECV will
// find it. Either way the pair must be what ir::checkMessages asks: one SEND per
// target, one RECV of it on the peer, from the sender, with the same bytes.
void StreamQueueBuilder::addSend(const SendEnd& send) {
  if (send.target >= seen_.size() || send.peer < 0 || send.peer >= program_.deviceCount()) {
    unpaired_ = true;
    return;
  }
  Definitions& target = seen_[send.target];
  if (target.latest == static_cast<uint32_t>(send.peer) * kSources + kRecvSource) {
    pair(send, target.position);
  } else if (target.latest == kNone) {
    auto entry = static_cast<uint32_t>(parked_.size());
    if (freeParked_.empty()) {
      parked_.push_back(send);
    } else {
      entry = freeParked_.back();
      freeParked_.pop_back();
      parked_[entry] = send;
    }
    target = {kParked, entry};
  } else if (target.latest == kParked) {
    unpaired_ = true;  // a second SEND fills the buffer
  } else {
    late_.push_back(send);  // the target is defined otherwise too; look at the end
  }
}

void StreamQueueBuilder::pairWithParked(int device, uint32_t number, const Instruction& recv,
                                        BufferId buffer) {
  const Definitions& target = seen_[buffer];
  if (target.latest != kParked) return;
  const SendEnd& send = parked_[target.position];
  freeParked_.push_back(target.position);
  if (send.peer != device) {
    unpaired_ = true;
    return;
  }
  pair(send, number);
}

// Points `send` at RECV `number` of its peer, which must expect it and be unclaimed.
void StreamQueueBuilder::pair(const SendEnd& send, uint32_t number) {
  std::vector<ReceiveEnd>& receives = receives_[static_cast<size_t>(send.peer)];
  if (number >= receives.size() || receives[number].from != send.device ||
      receives[number].bytes != send.bytes) {
    unpaired_ = true;
    return;
  }
  receives[number].from = kClaimed;
  ++pairedCount_;
  queues_[static_cast<size_t>(send.device)].streams[send.stream].ops[send.op].delivery = number;
}

// The number of the RECV on `device` that defines `buffer`, kNone when none does.
uint32_t StreamQueueBuilder::receiveOf(int device, BufferId buffer) const {
  const DeviceCode& code = program_.devices[static_cast<size_t>(device)];
  const std::vector<uint32_t>& recvs = queues_[static_cast<size_t>(device)].recvs;
  for (uint32_t number = 0; number < recvs.size(); ++number) {
    if (code.defs(code.code[recvs[number]])[0] == buffer) return number;
  }
  return kNone;
}

bool StreamQueueBuilder::allPaired() {
  for (const SendEnd& send : late_) pair(send, receiveOf(send.peer, send.target));
  late_.clear();
  return !unpaired_ && parked_.size() == freeParked_.size() && pairedCount_ == receiveCount_;
}

std::vector<DeviceQueues> StreamQueueBuilder::finish() {
  if (!allPaired()) {
    ir::checkMessages(program_);  // throws the message naming both ends
    throw ir::ProgramError("SENDs and RECVs do not pair up");
  }
  if (malformed_) {
    ir::checkProgram(program_);  // throws the message naming the instruction
    throw ir::ProgramError("an instruction uses a buffer of another device or no group");
  }
  return std::move(queues_);
}

}  // namespace meshflow::runtime::sim
