// What train() says about memory: each device's measured peak over the run
// beside the plan's prediction, in the progress line, a warning when a device
// holds more than 10% (and more than 1 MiB) over its prediction, and the
// returned record (docs/training.md, "Memory"). The floor keeps tiny models,
// whose few KiB of temporaries are a large share, from warning every run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "interp/Evaluator.h"
#include "runtime/memory/DeviceMemory.h"

namespace meshflow::interp {

class MemoryReport {
 public:
  /// `predicted`: the plan's peak bytes per device (0 where the plan puts nothing).
  explicit MemoryReport(std::vector<double> predicted) : predicted_(std::move(predicted)) {}

  /// Takes one step's measurements; returns a warning line (newline-ended) the
  /// first time a device exceeds its prediction by more than 10%.
  std::optional<std::string> add(std::int64_t step,
                                 const std::vector<runtime::MemoryStats>& devices);
  /// " · peak 1.20 MiB/device (planned 1.10 MiB)"; empty before any measurement.
  std::string progressText() const;
  /// The record fields: peak_memory, predicted_memory and device_memory (a
  /// record per device: device, peak, predicted and the peak's breakdown).
  void addFields(Evaluator& ev, std::vector<std::pair<std::string, Value>>& fields) const;

  static constexpr double kWarnAbove = 1.10;
  static constexpr double kWarnFloorBytes = 1 << 20;

 private:
  int busiest() const;

  std::vector<double> predicted_;
  std::vector<runtime::MemoryStats> peaks_;  // per device, the largest peak of any step
  bool warned_ = false;
};

}  // namespace meshflow::interp
