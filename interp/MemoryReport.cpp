#include "interp/MemoryReport.h"

#include <fmt/format.h>

namespace meshflow::interp {
namespace {

Value bytesValue(double bytes) { return Value::quantity(bytes, Dimension{1, 0, 0}); }

std::string breakdownText(const runtime::MemoryBreakdown& breakdown) {
  std::string text;
  for (std::size_t c = 0; c < runtime::kMemoryCategories; ++c)
    if (breakdown[c] > 0)
      text += fmt::format("{}{} {}", text.empty() ? "" : ", ",
                          runtime::memoryCategoryName(static_cast<runtime::MemoryCategory>(c)),
                          runtime::bytesText(double(breakdown[c])));
  return text;
}

}  // namespace

std::optional<std::string> MemoryReport::add(std::int64_t step,
                                             const std::vector<runtime::MemoryStats>& devices) {
  if (peaks_.size() < devices.size()) peaks_.resize(devices.size());
  std::optional<std::string> warning;
  for (std::size_t d = 0; d < devices.size(); ++d) {
    if (devices[d].peak > peaks_[d].peak) peaks_[d] = devices[d];
    const double predicted = d < predicted_.size() ? predicted_[d] : 0;
    const double peak = double(devices[d].peak);
    if (warned_ || predicted <= 0 || peak <= kWarnAbove * predicted ||
        peak - predicted <= kWarnFloorBytes)
      continue;
    warned_ = true;
    warning = fmt::format(
        "warning: device {} held {} at its peak in step {}, {:.0f}% more than the plan's {} ({})\n",
        d, runtime::bytesText(double(devices[d].peak)), step,
        (double(devices[d].peak) / predicted - 1) * 100, runtime::bytesText(predicted),
        breakdownText(devices[d].peakBreakdown));
  }
  return warning;
}

int MemoryReport::busiest() const {
  int best = -1;
  for (std::size_t d = 0; d < peaks_.size(); ++d)
    if (best < 0 || peaks_[d].peak > peaks_[static_cast<std::size_t>(best)].peak)
      best = static_cast<int>(d);
  return best;
}

std::string MemoryReport::progressText() const {
  const int d = busiest();
  if (d < 0) return "";
  const auto i = static_cast<std::size_t>(d);
  std::string text = fmt::format("  peak {}/device", runtime::bytesText(double(peaks_[i].peak)));
  if (i < predicted_.size() && predicted_[i] > 0)
    text += fmt::format(" (planned {})", runtime::bytesText(predicted_[i]));
  return text;
}

void MemoryReport::addFields(Evaluator& ev,
                             std::vector<std::pair<std::string, Value>>& fields) const {
  if (peaks_.empty()) return;
  double predicted = 0;
  for (double p : predicted_) predicted = std::max(predicted, p);
  std::vector<Value> devices;
  for (std::size_t d = 0; d < peaks_.size(); ++d) {
    const runtime::MemoryStats& s = peaks_[d];
    std::vector<std::pair<std::string, Value>> record = {
        {"device", Value::integer(static_cast<std::int64_t>(d))},
        {"peak", bytesValue(double(s.peak))},
        {"predicted", bytesValue(d < predicted_.size() ? predicted_[d] : 0)}};
    for (std::size_t c = 0; c < runtime::kMemoryCategories; ++c) {
      std::string name = runtime::memoryCategoryName(static_cast<runtime::MemoryCategory>(c));
      for (char& ch : name) ch = ch == ' ' ? '_' : ch;
      record.emplace_back(name, bytesValue(double(s.peakBreakdown[c])));
    }
    devices.push_back(ev.makeRecord(std::move(record)));
  }
  fields.emplace_back("peak_memory",
                      bytesValue(double(peaks_[static_cast<std::size_t>(busiest())].peak)));
  fields.emplace_back("predicted_memory", bytesValue(predicted));
  fields.emplace_back("device_memory", ev.makeList(std::move(devices)));
}

}  // namespace meshflow::interp
