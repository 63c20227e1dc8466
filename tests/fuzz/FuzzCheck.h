// What the fuzz targets share: a failed property is a crash the fuzzer keeps.
#pragma once

#include <cstddef>
#include <cstdint>
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

/// Whether an input is one of the one in eight that a target checks the slow
/// way where a faster way is known to give the same answer, so that the
/// shortcut itself stays checked. Chosen by the input's bytes (FNV-1a), so a
/// saved input replays the same way.
inline bool oneInEight(const std::uint8_t* data, std::size_t size) {
  std::uint64_t hash = 14695981039346656037ull;
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 1099511628211ull;
  return hash % 8 == 0;
}

}  // namespace meshflow::fuzz
