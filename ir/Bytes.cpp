#include "ir/Bytes.h"

#include <fmt/format.h>

namespace meshflow::ir {

std::string formatBytes(double b) {
  if (b < 0) return "-" + formatBytes(-b);
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} B", b);
  // Three significant digits, without an exponent for 1000-1023 (1015 KiB).
  if (b >= 1000) return fmt::format("{:.0f} {}", b, units[u]);
  return fmt::format("{:.3g} {}", b, units[u]);
}

std::string formatSeconds(double s) {
  if (s >= 1) return fmt::format("{:.3g} s", s);
  if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
  if (s > 0) return fmt::format("{:.3g} us", s * 1e6);
  return "0 s";
}

}  // namespace meshflow::ir
