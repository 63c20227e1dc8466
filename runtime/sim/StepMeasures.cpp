#include "runtime/sim/StepMeasures.h"

#include <algorithm>

namespace meshflow::runtime::sim {

using ir::BufferId;
using ir::Instruction;
using ir::Opcode;

StepMeasures::StepMeasures(const ir::Program& program, const SimulatorOptions& options)
    : program_(program),
      options_(options),
      resident_(program.devices.size(), 0),
      peak_(program.devices.size(), 0),
      allocated_(program.buffers.size(), false) {
  for (const ir::Buffer& buffer : program.buffers) {
    if (buffer.resident()) resident_[static_cast<size_t>(buffer.device)] += buffer.bytes;
  }
  positions_.reserve(program.groups.size());
  for (const std::vector<int>& group : program.groups) {
    std::vector<std::pair<int, int>> members;
    for (size_t i = 0; i < group.size(); ++i) members.emplace_back(group[i], static_cast<int>(i));
    std::sort(members.begin(), members.end());
    positions_.push_back(std::move(members));
  }
}

void StepMeasures::addDevice(int device) {
  measurePeak(device);
  measureTraffic(device);
}

void StepMeasures::measurePeak(int device) {
  const ir::DeviceCode& code = program_.devices[static_cast<size_t>(device)];
  int64_t live = resident_[static_cast<size_t>(device)];
  int64_t peak = live;
  for (const Instruction& in : code.code) {
    if (in.op == Opcode::kFree) {
      live -= program_.buffers[code.uses(in)[0]].bytes;
      continue;
    }
    for (BufferId def : code.defs(in)) {
      if (program_.buffers[def].resident() || allocated_[def]) continue;
      allocated_[def] = true;
      live += program_.buffers[def].bytes;
    }
    peak = std::max(peak, live);
  }
  peak_[static_cast<size_t>(device)] = peak;
}

void StepMeasures::measureTraffic(int device) {
  firstLink_ = links_.size();
  for (const Instruction& in : program_.devices[static_cast<size_t>(device)].code) {
    if (in.op == Opcode::kSend) {
      addTraffic(device, in.peer, static_cast<double>(in.bytes));
    } else if (ir::isCollective(in.op)) {
      addRingShare(device, in);
    }
  }
}

void StepMeasures::addTraffic(int from, int to, double bytes) {
  if (bytes <= 0) return;
  // A device talks to few peers, so a short list beats a hash map here.
  for (size_t i = firstLink_; i < links_.size(); ++i) {
    if (links_[i].to == to) {
      links_[i].bytes += bytes;
      return;
    }
  }
  const int perNode = std::max(1, options_.devicesPerNode);
  links_.push_back({from, to, bytes, from / perNode != to / perNode});
}

// Ring traffic: each member of the group sends the next member this much (a
// broadcast's chain stops at the last member).
void StepMeasures::addRingShare(int device, const Instruction& in) {
  const std::vector<int>& group = program_.groups[static_cast<size_t>(in.peer)];
  const size_t n = group.size();
  const int position = positionIn(in.peer, device);
  if (n < 2 || position < 0) return;
  const auto next = static_cast<size_t>(position) + 1;
  const double bytes = static_cast<double>(in.bytes);
  if (in.op == Opcode::kBroadcast) {
    if (next < n) addTraffic(device, group[next], bytes);
    return;
  }
  double perMember = (static_cast<double>(n) - 1) / static_cast<double>(n) * bytes;
  if (in.op == Opcode::kAllReduce) perMember *= 2;
  addTraffic(device, group[next % n], perMember);
}

int StepMeasures::positionIn(int group, int device) const {
  const std::vector<std::pair<int, int>>& members = positions_[static_cast<size_t>(group)];
  auto it = std::lower_bound(members.begin(), members.end(), std::pair(device, -1));
  return it != members.end() && it->first == device ? it->second : -1;
}

void StepMeasures::finish(SimulationResult& result) {
  result.residentBytes = resident_;
  result.peakBytes = peak_;
  for (const LinkVolume& link : links_) {
    (link.interNode ? result.interNodeBytes : result.intraNodeBytes) += link.bytes;
  }
  std::sort(links_.begin(), links_.end(), [](const LinkVolume& a, const LinkVolume& b) {
    return std::pair(a.from, a.to) < std::pair(b.from, b.to);
  });
  result.links = std::move(links_);
}

}  // namespace meshflow::runtime::sim
