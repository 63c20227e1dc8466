// Units of quantity literals and how quantities print.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "meshflow/Value.h"

namespace meshflow::interp {

struct Unit {
  double scale;  // base units per unit: GB is 1e9 bytes, Gb is 1.25e8 bytes
  Dimension dimension;
};

/// A unit as written after a number (`GB`, `GiB/s`, `us`, `TFLOPS`), or nullopt.
std::optional<Unit> lookupUnit(std::string_view text);

/// A quantity in the largest unit that keeps its number at least 1, e.g. `80 GB`,
/// `450 GB/s`, `2 us`, `989 TFLOPS`; other dimensions in base units (`3 B*s`).
std::string formatQuantity(double value, Dimension dimension);

/// A float as printed: shortest text that reads back to the same double.
std::string formatFloat(double value);

}  // namespace meshflow::interp
