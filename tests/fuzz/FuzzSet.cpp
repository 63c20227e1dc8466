// libFuzzer target: `meshflow plan --set HINT=VALUE` values (one per line of the
// input), handled as the plan command handles them: each word is parsed, the
// words become a schedule block over a base schedule (repl/ScheduleSource.h),
// the interpreter checks the block, and its hints go into a planner request.
// A usage error or a diagnostic is the expected outcome; a crash, an escaped
// exception, a hang, or a block that evaluates to something other than a
// schedule (the plan command takes it for one) is a bug.
//
// Most mutated values are not expressions, and working out what a block with a
// syntax error says is ANTLR's parse with its error recovery: over 80% of this
// target's time. As fuzz_eval does, the target asks the direct parser first
// (grammar::parseClean) and evaluates a block with a syntax error only for one
// input in eight (fuzz::oneInEight), so that the plan command's path for it
// stays exercised; fuzz_parse checks grammar::parse's diagnostics against the
// ANTLR front end on every input.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include "grammar/Parser.h"
#include "interp/Handles.h"
#include "interp/ParsedModules.h"
#include "interp/PlanInputs.h"
#include "meshflow/meshflow.h"
#include "repl/ScheduleSource.h"
#include "tests/fuzz/FuzzCheck.h"

namespace {

using namespace meshflow;

// What `--schedule base` names: hints, a bound, pins and an exclusion, so that
// every part of scheduleSource's block is exercised.
constexpr const char* kBase = R"(
schedule base {
  microbatches = 4
  pipeline = "1f1b"
  recompute = "selective"
  memory_per_device <= 40GB
  pin(op = "*", sharding = "S1RR")
  pin(stage = 1, devices = [4])
  exclude(devices = [6, 7])
}
)";

const interp::ScheduleObject* asSchedule(const std::optional<Value>& value) {
  return value && value->kind() == ValueKind::Object
             ? dynamic_cast<const interp::ScheduleObject*>(value->object().get())
             : nullptr;
}

constexpr const char* kSetName = "<--set>";

const std::shared_ptr<interp::ParsedModules>& sharedParses() {
  static const auto parsed = std::make_shared<interp::ParsedModules>();
  return parsed;
}

Config fuzzingConfig() {
  Config config;
  config.write = [](std::string_view) {};
  config.limits.maxSteps = 2'000;
  config.limits.maxCallDepth = 32;
  config.limits.maxMemoryBytes = 4u << 20;
  // The base schedule's parse is the same for every input.
  config.parsedModules = sharedParses();
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  cli::HintSettings settings;
  for (std::string word; std::getline(lines, word);) {
    auto setting = cli::parseHintSetting(word);
    if (!setting) return 0;  // the usage error "--set needs HINT=VALUE"
    cli::setHint(settings, std::move(*setting));
  }
  if (settings.empty()) return 0;
  Interpreter interpreter(fuzzingConfig());
  Status base = interpreter.eval(std::string(kBase) + "base\n", "<--schedule>");
  fuzz::require(asSchedule(base.value) != nullptr, "the base schedule evaluates");
  interpreter.setGlobal("__plan_base", *base.value);
  const std::string source =
      cli::scheduleSource(asSchedule(base.value), "__plan_base", settings, "__plan_set") +
      "__plan_set\n";
  if (auto program =
          grammar::parseClean(std::make_shared<interp::SourceFile>(kSetName, source)))
    sharedParses()->remember(kSetName, source, std::move(program));  // eval() takes it
  else if (!fuzz::oneInEight(data, size))
    return 0;  // a syntax error
  Status merged = interpreter.eval(source, kSetName);
  // Nothing of this input stays: libFuzzer runs an input again under
  // LeakSanitizer whenever it allocated more than it freed.
  sharedParses()->forget(kSetName);
  if (!merged.ok) return 0;
  const interp::ScheduleObject* schedule = asSchedule(merged.value);
  fuzz::require(schedule != nullptr, "the --set block evaluates to a schedule");
  passes::PlanRequest request;
  try {
    interp::applySchedule(*schedule, request);
  } catch (const ScriptError&) {
  } catch (const passes::PlanningError&) {
  }
  for (const auto& [hint, value] : settings) interp::hintSpan(*schedule, hint);
  return 0;
}
