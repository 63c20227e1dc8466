// Schedule hints given as `hint=value` words (`meshflow plan --set`, the REPL's
// :plan and :set), turned into a schedule block that the interpreter checks
// as it checks any block.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meshflow::interp {
class ScheduleObject;
}

namespace meshflow::cli {

/// Hint settings in the order given: (`microbatches`, `8`), (`pipeline`, `1f1b`).
using HintSettings = std::vector<std::pair<std::string, std::string>>;

/// Parses one `hint=value` word; nullopt unless the hint is a name and the
/// value is one expression (it may not end the block or start a statement).
std::optional<std::pair<std::string, std::string>> parseHintSetting(std::string_view word);

/// Replaces or appends `setting` in `settings`, keeping the order of first mention.
void setHint(HintSettings& settings, std::pair<std::string, std::string> setting);

/// `schedule BLOCK { ... }`: the hints, bounds, pins and exclusions of `base`
/// (read from the global `baseGlobal`) that `settings` do not override, then
/// `settings` (`pipeline=1f1b` quoted, `memory_per_device=70GB` as a bound).
std::string scheduleSource(const interp::ScheduleObject* base, const std::string& baseGlobal,
                           const HintSettings& settings, const std::string& block);

}  // namespace meshflow::cli
