// Counts in messages with the noun in the right number: "1 stage",
// "2 stages", "1 microbatch", "4 microbatches".
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace meshflow::ir {

/// `n` and `one` when n is 1, else `n` and `many` (default: `one` + "s").
inline std::string counted(std::int64_t n, std::string_view one, std::string_view many = {}) {
  if (n == 1) return fmt::format("1 {}", one);
  if (many.empty()) return fmt::format("{} {}s", n, one);
  return fmt::format("{} {}", n, many);
}

}  // namespace meshflow::ir
