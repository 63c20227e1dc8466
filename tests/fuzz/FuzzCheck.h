// What the fuzz targets share: a failed property is a crash the fuzzer keeps.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace meshflow::fuzz {

/// Reports `what` (a broken property: a wrong answer, not a crash) and aborts,
/// which libFuzzer and the replay test both count as a failure.
[[noreturn]] inline void fail(std::string_view what) {
  std::fprintf(stderr, "fuzz property failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

inline void require(bool property, std::string_view what) {
  if (!property) fail(what);
}

}  // namespace meshflow::fuzz
