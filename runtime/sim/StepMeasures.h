// What a simulated step's figures owe to the program alone, not to timing:
// memory per device and bytes per link. Both follow each device's program order,
// so they are measured device by device beside the building of the stream queues,
// while the device's code is in cache.
#pragma once

#include <utility>
#include <vector>

#include "ir/Program.h"
#include "runtime/sim/Simulator.h"

namespace meshflow::runtime::sim {

class StepMeasures {
 public:
  StepMeasures(const ir::Program& program, const SimulatorOptions& options);

  /// Devices must come in order 0, 1, …
  void addDevice(int device);

  /// Fills residentBytes and peakBytes — resident buffers count from the start, any
  /// other buffer from the first instruction that defines it until its FREE, in
  /// program order, as a stream-ordered caching allocator sees it — and links,
  /// intraNodeBytes and interNodeBytes: each SEND's bytes, and each collective as
  /// ring traffic from every member to the next member of its group.
  void finish(SimulationResult& result);

 private:
  void measurePeak(int device);
  void measureTraffic(int device);
  void addTraffic(int from, int to, double bytes);
  void addRingShare(int device, const ir::Instruction& in);
  int positionIn(int group, int device) const;

  const ir::Program& program_;
  const SimulatorOptions& options_;
  std::vector<int64_t> resident_;
  std::vector<int64_t> peak_;
  std::vector<bool> allocated_;  // per buffer
  // Per group, (device, position in the group) sorted by device: a group may hold
  // every device of the program.
  std::vector<std::vector<std::pair<int, int>>> positions_;
  std::vector<LinkVolume> links_;  // by sender, each sender's peers in order of first traffic
  size_t firstLink_ = 0;           // the current sender's first entry in links_
};

}  // namespace meshflow::runtime::sim
