#include "interp/Units.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <optional>
#include <string>

#include "ir/Plan.h"

namespace meshflow::interp {
namespace {

constexpr Dimension kBytes{1, 0, 0};
constexpr Dimension kSeconds{0, 1, 0};
constexpr Dimension kFlop{0, 0, 1};
constexpr Dimension kFlopPerSecond{0, -1, 1};

struct NamedUnit {
  std::string_view name;
  double scale;
  Dimension dimension;
};

constexpr std::array kUnits = {
    NamedUnit{"B", 1, kBytes},          NamedUnit{"KB", 1e3, kBytes},
    NamedUnit{"MB", 1e6, kBytes},       NamedUnit{"GB", 1e9, kBytes},
    NamedUnit{"TB", 1e12, kBytes},      NamedUnit{"PB", 1e15, kBytes},
    NamedUnit{"KiB", 1024.0, kBytes},   NamedUnit{"MiB", 1048576.0, kBytes},
    NamedUnit{"GiB", 1073741824.0, kBytes}, NamedUnit{"TiB", 1099511627776.0, kBytes},
    NamedUnit{"b", 1.0 / 8, kBytes},    NamedUnit{"Kb", 1e3 / 8, kBytes},
    NamedUnit{"Mb", 1e6 / 8, kBytes},   NamedUnit{"Gb", 1e9 / 8, kBytes},
    NamedUnit{"Tb", 1e12 / 8, kBytes},
    NamedUnit{"s", 1, kSeconds},        NamedUnit{"ms", 1e-3, kSeconds},
    NamedUnit{"us", 1e-6, kSeconds},    NamedUnit{"ns", 1e-9, kSeconds},
    NamedUnit{"FLOP", 1, kFlop},        NamedUnit{"KFLOP", 1e3, kFlop},
    NamedUnit{"MFLOP", 1e6, kFlop},     NamedUnit{"GFLOP", 1e9, kFlop},
    NamedUnit{"TFLOP", 1e12, kFlop},    NamedUnit{"PFLOP", 1e15, kFlop},
    NamedUnit{"FLOPS", 1, kFlopPerSecond},     NamedUnit{"KFLOPS", 1e3, kFlopPerSecond},
    NamedUnit{"MFLOPS", 1e6, kFlopPerSecond},  NamedUnit{"GFLOPS", 1e9, kFlopPerSecond},
    NamedUnit{"TFLOPS", 1e12, kFlopPerSecond}, NamedUnit{"PFLOPS", 1e15, kFlopPerSecond},
};

struct Scale {
  double factor;
  std::string_view suffix;
};

// Display scales per dimension, largest first.
constexpr std::array kByteScales = {Scale{1e15, "PB"}, Scale{1e12, "TB"}, Scale{1e9, "GB"},
                                    Scale{1e6, "MB"}, Scale{1e3, "KB"}, Scale{1, "B"}};
constexpr std::array kSecondScales = {Scale{1, "s"}, Scale{1e-3, "ms"}, Scale{1e-6, "us"},
                                      Scale{1e-9, "ns"}};
constexpr std::array kFlopScales = {Scale{1e15, "PFLOP"}, Scale{1e12, "TFLOP"},
                                    Scale{1e9, "GFLOP"}, Scale{1e6, "MFLOP"},
                                    Scale{1e3, "KFLOP"}, Scale{1, "FLOP"}};
constexpr std::array kFlopRateScales = {Scale{1e15, "PFLOPS"}, Scale{1e12, "TFLOPS"},
                                        Scale{1e9, "GFLOPS"}, Scale{1e6, "MFLOPS"},
                                        Scale{1e3, "KFLOPS"}, Scale{1, "FLOPS"}};
constexpr std::array kByteRateScales = {Scale{1e15, "PB/s"}, Scale{1e12, "TB/s"}, Scale{1e9, "GB/s"},
                                        Scale{1e6, "MB/s"}, Scale{1e3, "KB/s"}, Scale{1, "B/s"}};

// Quantities print for people: at most six significant digits and no forced
// ".0" (`80 GB`, `15.4006 ms`); float(q) gives the exact value in base units.
std::string plainNumber(double value) { return fmt::format("{:.6g}", value); }

template <std::size_t N>
std::string scaled(double value, const std::array<Scale, N>& scales) {
  // Zero has no size to pick a unit by: it is shown in the base unit (`0 s`).
  if (value == 0)
    for (const auto& scale : scales)
      if (scale.factor == 1) return plainNumber(0) + " " + std::string(scale.suffix);
  for (const auto& scale : scales)
    if (std::fabs(value) >= scale.factor || &scale == &scales.back())
      return plainNumber(value / scale.factor) + " " + std::string(scale.suffix);
  return plainNumber(value);
}

// Bytes print as every computed size does (ir::formatBytes: binary units, three
// significant digits), except an amount a script would write in decimal units
// with at most three significant digits (80GB, 1.5GB, 999MB), which prints as
// written.
std::string formatBytesQuantity(double value) {
  for (const auto& scale : kByteScales) {
    if (std::fabs(value) < scale.factor && &scale != &kByteScales.back()) continue;
    std::string units = fmt::format("{:.3g}", value / scale.factor);
    if (units.find('e') == std::string::npos && std::stod(units) * scale.factor == value)
      return units + " " + std::string(scale.suffix);
    break;
  }
  return ir::formatBytes(value);
}


}  // namespace

std::optional<Unit> lookupUnit(std::string_view text) {
  bool perSecond = text.size() > 2 && text.substr(text.size() - 2) == "/s";
  std::string_view base = perSecond ? text.substr(0, text.size() - 2) : text;
  for (const auto& unit : kUnits) {
    if (unit.name != base) continue;
    if (!perSecond) return Unit{unit.scale, unit.dimension};
    // Only byte and bit units take `/s`.
    if (unit.dimension != kBytes) return std::nullopt;
    return Unit{unit.scale, Dimension{1, -1, 0}};
  }
  return std::nullopt;
}

std::string formatFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string text = fmt::format("{}", value);
  // A float keeps a decimal point so it never reads as an int.
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string formatQuantity(double value, Dimension d) {
  if (d == kBytes) return formatBytesQuantity(value);
  if (d == kSeconds) return scaled(value, kSecondScales);
  if (d == kFlop) return scaled(value, kFlopScales);
  if (d == kFlopPerSecond) return scaled(value, kFlopRateScales);
  if (d == Dimension{1, -1, 0}) return scaled(value, kByteRateScales);
  return plainNumber(value) + " " + unitName(d);
}

}  // namespace meshflow::interp

namespace meshflow {

std::string unitName(const Dimension& d) {
  std::string numerator, denominator;
  auto add = [&](std::string_view base, int power) {
    if (power > 0) {
      if (!numerator.empty()) numerator += '*';
      numerator += base;
      if (power != 1) numerator += fmt::format("^{}", power);
    } else if (power < 0) {
      if (!denominator.empty()) denominator += '*';
      denominator += base;
      if (power != -1) denominator += fmt::format("^{}", -power);
    }
  };
  add("B", d.bytes);
  add("FLOP", d.flops);
  add("s", d.seconds);
  if (numerator.empty()) numerator = "1";
  return denominator.empty() ? numerator : numerator + "/" + denominator;
}

}  // namespace meshflow
