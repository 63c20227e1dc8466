#include "repl/ScheduleSource.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "interp/Declarations.h"
#include "interp/Handles.h"

namespace meshflow::cli {
namespace {

// Hints whose value is a word (`pipeline=1f1b`), quoted for the schedule
// block; so is the value of a hint the block does not know, so that the block
// reports the unknown hint (`pipline=1f1b`) rather than a syntax error in
// its value.
bool takesWord(const std::string& hint) {
  return hint == "pipeline" || hint == "recompute" || !interp::isScheduleHint(hint);
}

bool isIdentifier(std::string_view text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

std::optional<std::pair<std::string, std::string>> parseHintSetting(std::string_view word) {
  auto eq = word.find('=');
  if (eq == std::string_view::npos) return std::nullopt;
  std::string hint(word.substr(0, eq)), value(word.substr(eq + 1));
  if (!isIdentifier(hint) || value.empty() || value.find_first_of("\n;{}") != std::string::npos)
    return std::nullopt;
  return std::pair{hint, value};
}

void setHint(HintSettings& settings, std::pair<std::string, std::string> setting) {
  for (auto& [hint, value] : settings)
    if (hint == setting.first) {
      value = std::move(setting.second);
      return;
    }
  settings.push_back(std::move(setting));
}

std::string scheduleSource(const interp::ScheduleObject* base, const std::string& baseGlobal,
                           const HintSettings& settings, const std::string& block) {
  auto overridden = [&](const std::string& name) {
    return std::any_of(settings.begin(), settings.end(),
                       [&](const auto& set) { return set.first == name; });
  };
  std::string source = "schedule " + block + " {\n";
  if (base) {
    for (const auto& [name, value] : base->hints())
      if (!overridden(name)) source += fmt::format("  {} = {}.{}\n", name, baseGlobal, name);
    for (const auto& bound : base->bounds())
      if (!overridden(bound.name))
        source += fmt::format("  {} <= {}.{}\n", bound.name, baseGlobal, bound.name);
    for (std::size_t i = 0; i < base->pins().size(); ++i)
      source += fmt::format("  {}.pins[{}]\n", baseGlobal, i);
    for (std::size_t i = 0; i < base->exclusions().size(); ++i)
      source += fmt::format("  {}.exclusions[{}]\n", baseGlobal, i);
  }
  for (const auto& [hint, value] : settings) {
    bool quote = takesWord(hint) && value.front() != '"' && value != "auto";
    source += fmt::format("  {} {} {}\n", hint, hint == "memory_per_device" ? "<=" : "=",
                          quote ? "\"" + value + "\"" : value);
  }
  return source + "}\n";
}

}  // namespace meshflow::cli
