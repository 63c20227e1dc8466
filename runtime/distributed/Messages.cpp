#include "runtime/distributed/Messages.h"

#include "runtime/distributed/TrainingJob.h"

namespace meshflow::runtime::distributed {

using nlohmann::json;

std::string encode(const json& message) {
  std::vector<std::uint8_t> bytes = json::to_msgpack(message);
  return {bytes.begin(), bytes.end()};
}

json decode(std::string_view bytes) {
  try {
    json message = json::from_msgpack(bytes.begin(), bytes.end());
    if (!message.is_object()) throw JobFormatError("a control message that is not an object");
    return message;
  } catch (const json::exception& e) {
    throw JobFormatError(std::string("an unreadable control message: ") + e.what());
  }
}

json okReply(json fields) {
  fields["ok"] = true;
  return fields;
}

json errorReply(const std::string& message, bool aborted) {
  return {{"ok", false}, {"error", message}, {"aborted", aborted}};
}

json stepReport(const ParallelStepResult& result, int device) {
  const auto d = static_cast<std::size_t>(device);
  json report = {{"loss_sum", result.lossSum}, {"losses", result.losses}, {"moe_dropped", result.moeDropped}};
  if (d < result.devices.size()) {
    const DeviceTimes& t = result.devices[d];
    report["times"] = {t.kernelSeconds, t.commSeconds, t.coreWaitSeconds, t.totalSeconds};
    json timeline = json::array();
    for (const sim::TimedInstruction& i : t.timeline) timeline.push_back({i.index, i.start, i.end});
    report["timeline"] = std::move(timeline);
  }
  if (d < result.memory.size()) {
    const MemoryStats& m = result.memory[d];
    report["memory"] = {{"allocated", m.allocated}, {"peak", m.peak},        {"breakdown", m.peakBreakdown},
                        {"cached", m.cached},       {"allocations", m.allocations}, {"reused", m.reused}};
  }
  return report;
}

void addStepReport(ParallelStepResult& result, const json& report, int device) {
  const auto d = static_cast<std::size_t>(device);
  result.lossSum += report.at("loss_sum").get<double>();
  result.losses += report.at("losses").get<int>();
  result.moeDropped += report.at("moe_dropped").get<double>();
  if (report.contains("times") && d < result.devices.size()) {
    const json& t = report["times"];
    DeviceTimes& times = result.devices[d];
    times.kernelSeconds = t.at(0).get<double>();
    times.commSeconds = t.at(1).get<double>();
    times.coreWaitSeconds = t.at(2).get<double>();
    times.totalSeconds = t.at(3).get<double>();
    times.timeline.clear();
    for (const json& i : report.at("timeline"))
      times.timeline.push_back({i.at(0).get<std::uint32_t>(), i.at(1).get<double>(), i.at(2).get<double>()});
  }
  if (report.contains("memory") && d < result.memory.size()) {
    const json& m = report["memory"];
    MemoryStats& stats = result.memory[d];
    stats.allocated = m.at("allocated").get<std::int64_t>();
    stats.peak = m.at("peak").get<std::int64_t>();
    stats.peakBreakdown = m.at("breakdown").get<MemoryBreakdown>();
    stats.cached = m.at("cached").get<std::int64_t>();
    stats.allocations = m.at("allocations").get<std::int64_t>();
    stats.reused = m.at("reused").get<std::int64_t>();
  }
}

}  // namespace meshflow::runtime::distributed
