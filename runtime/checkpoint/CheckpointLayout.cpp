#include "runtime/checkpoint/CheckpointLayout.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>

namespace meshflow::runtime::checkpoint {
namespace {

constexpr std::string_view kStepPrefix = "step-";
constexpr std::string_view kShardPrefix = "device-";
constexpr std::string_view kShardSuffix = ".bin";

bool allDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string stepDirectoryName(std::int64_t step) { return fmt::format("step-{:08}", step); }

std::optional<std::int64_t> parseStepDirectoryName(std::string_view name) {
  if (!name.starts_with(kStepPrefix)) return std::nullopt;
  std::string_view digits = name.substr(kStepPrefix.size());
  std::int64_t step = 0;
  if (!allDigits(digits)) return std::nullopt;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

std::string shardFileName(int device) { return fmt::format("device-{:04}.bin", device); }

bool isShardFileName(std::string_view name) {
  if (!name.starts_with(kShardPrefix) || !name.ends_with(kShardSuffix)) return false;
  return allDigits(
      name.substr(kShardPrefix.size(), name.size() - kShardPrefix.size() - kShardSuffix.size()));
}

// The process id keeps two processes apart and the clock two writes of one process;
// either alone could repeat after a crash and a restart.
std::string temporaryDirectoryName(std::int64_t step) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return fmt::format("{}{}-{}-{}", kTemporaryPrefix, stepDirectoryName(step), ::getpid(),
                     std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

std::string temporaryLatestName() { return fmt::format("{}{}", kTemporaryPrefix, kLatestFile); }

}  // namespace meshflow::runtime::checkpoint
