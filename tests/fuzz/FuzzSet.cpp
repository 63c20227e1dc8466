// libFuzzer target: `meshflow plan --set HINT=VALUE` values (one per line of the
// input), handled as the plan command handles them: each word is parsed, the
// words become a schedule block over a base schedule (repl/ScheduleSource.h),
// the interpreter checks the block, and its hints go into a planner request.
// A usage error or a diagnostic is the expected outcome; a crash, an escaped
// exception, a hang, or a block that evaluates to something other than a
// schedule (the plan command takes it for one) is a bug.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

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

Config fuzzingConfig() {
  static auto parsed = std::make_shared<interp::ParsedModules>();
  Config config;
  config.write = [](std::string_view) {};
  config.limits.maxSteps = 2'000;
  config.limits.maxCallDepth = 32;
  config.limits.maxMemoryBytes = 4u << 20;
  config.parsedModules = parsed;
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
  Status merged = interpreter.eval(source, "<--set>");
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
