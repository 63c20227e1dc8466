// `meshflow plan FILE --model EXPR --cluster EXPR --batch N`: runs FILE, plans
// the model on the cluster with the script's plan(...) builtin and prints the
// plan's table or its plan file, the JSON that load_plan reads (docs/cli.md).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <optional>

#include "interp/Handles.h"
#include "interp/PlanObject.h"
#include "ir/PlanFile.h"
#include "repl/Commands.h"
#include "repl/Interrupts.h"
#include "repl/ScheduleSource.h"
#include "repl/ScriptOptions.h"

namespace meshflow::cli {
namespace {

const char* kHelp =
    "usage: meshflow plan FILE --model EXPR --cluster EXPR --batch N [--schedule NAME]\n"
    "                          [--set HINT=VALUE ...] [--json] [options]\n\n"
    "Runs FILE, then plans training of the model EXPR on the cluster EXPR (both\n"
    "evaluated in FILE's scope, e.g. --model \"gpt(layers = 2)\" --cluster \"dgx_a100(nodes = "
    "2)\")\n"
    "as plan(model, cluster, batch = N, schedule = ...) would, and prints the plan.\n\n"
    "options:\n"
    "  --model EXPR          the model to plan (required)\n"
    "  --cluster EXPR        the cluster to plan for (required)\n"
    "  --batch N             the global batch, samples per step (required)\n"
    "  --schedule NAME       a schedule block of FILE whose hints to follow\n"
    "  --set HINT=VALUE      set a schedule hint, as in a schedule block (repeatable):\n"
    "                        microbatches=8, pipeline=1f1b, stages=2, virtual_stages=2,\n"
    "                        max_tensor_parallel=4, data_parallel=2, recompute=full,\n"
    "                        shard_optimizer=true, optimizer=\"sgd(momentum = 0.9)\",\n"
    "                        memory_per_device=70GB\n"
    "                        (a bound: at most 70GB); it overrides --schedule's hint\n"
    "  --json                print the plan file instead of the table: one line of the\n"
    "                        JSON that p.save writes and load_plan reads (the plan is\n"
    "                        under \"plan\")\n";

struct PlanOptions {
  std::string model, cluster, schedule;
  std::int64_t batch = 0;
  HintSettings sets;
  bool json = false;
};

// Splits off this command's options; the rest are the script options. Returns
// false after writing a usage error.
bool parsePlanOptions(Args args, PlanOptions& options, std::vector<std::string>& rest,
                      std::ostream& err) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i], value;
    bool inlineValue = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inlineValue = true;
    }
    static const char* kValued[] = {"--model", "--cluster", "--batch", "--schedule", "--set"};
    bool valued = std::find_if(std::begin(kValued), std::end(kValued),
                               [&](const char* o) { return arg == o; }) != std::end(kValued);
    if (!valued) {
      if (arg == "--json" && !inlineValue)
        options.json = true;
      else
        rest.push_back(args[i]);
      continue;
    }
    if (!inlineValue) {
      if (i + 1 >= args.size()) {
        err << "meshflow plan: " << arg << " needs a value\n";
        return false;
      }
      value = args[++i];
    }
    if (arg == "--model") options.model = value;
    if (arg == "--cluster") options.cluster = value;
    if (arg == "--schedule") options.schedule = value;
    if (arg == "--batch") {
      std::size_t used = 0;
      try {
        options.batch = std::stoll(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != value.size() || options.batch < 1) {
        err << "meshflow plan: --batch needs a positive integer, not '" << value << "'\n";
        return false;
      }
    }
    if (arg == "--set") {
      auto setting = parseHintSetting(value);
      if (!setting) {
        err << "meshflow plan: --set needs HINT=VALUE, such as microbatches=8, not '" << value
            << "'\n";
        return false;
      }
      options.sets.push_back(std::move(*setting));
    }
  }
  return true;
}

// Evaluates `expression` in FILE's scope; diagnostics go to `err`.
std::optional<Value> evaluate(Interpreter& interpreter, const std::string& expression,
                              const char* name, std::ostream& err) {
  Status status = interpreter.eval(expression, name);
  err << renderAll(status.diagnostics);
  if (!status.ok) return std::nullopt;
  if (!status.value) {
    err << "meshflow plan: " << name << " is not an expression: " << expression << "\n";
    return std::nullopt;
  }
  return status.value;
}

const interp::ScheduleObject* asSchedule(const Value& value) {
  return value.kind() == ValueKind::Object
             ? dynamic_cast<const interp::ScheduleObject*>(value.object().get())
             : nullptr;
}

// The merged block with the spans of --schedule's own hints, pins and
// exclusions, so that a planning error about one of them points into FILE.
Value withBaseSpans(const interp::ScheduleObject& merged, const interp::ScheduleObject* base,
                    const PlanOptions& options) {
  interp::ScheduleSpans spans;
  auto spanOf = [&](const std::string& name) {
    bool set = std::any_of(options.sets.begin(), options.sets.end(),
                           [&](const auto& s) { return s.first == name; });
    return base && !set ? base->spanOf(name) : merged.spanOf(name);
  };
  for (const auto& [name, value] : merged.hints()) spans.entries.emplace_back(name, spanOf(name));
  for (const auto& bound : merged.bounds())
    spans.entries.emplace_back(bound.name, spanOf(bound.name));
  for (std::size_t i = 0; i < merged.pins().size(); ++i)
    spans.pins.push_back(base ? base->pinSpan(i) : merged.pinSpan(i));
  for (std::size_t i = 0; i < merged.exclusions().size(); ++i)
    spans.exclusions.push_back(base ? base->exclusionSpan(i) : merged.exclusionSpan(i));
  return Value::object(ValueKind::Object,
                       std::make_shared<interp::ScheduleObject>(
                           base ? base->name() : "command_line", merged.hints(), merged.bounds(),
                           merged.pins(), std::move(spans), merged.exclusions()));
}

std::optional<Value> scheduleOf(Interpreter& interpreter, const PlanOptions& options,
                                std::ostream& err) {
  if (options.schedule.empty() && options.sets.empty()) return Value();
  const interp::ScheduleObject* base = nullptr;
  if (!options.schedule.empty()) {
    auto value = evaluate(interpreter, options.schedule, "<--schedule>", err);
    if (!value) return std::nullopt;
    base = asSchedule(*value);
    if (!base) {
      err << "meshflow plan: --schedule " << options.schedule << " is " << value->aTypeName()
          << ", not a schedule block\n";
      return std::nullopt;
    }
    if (options.sets.empty()) return value;
    interpreter.setGlobal("__plan_base", *value);
  }
  auto merged = evaluate(
      interpreter, scheduleSource(base, "__plan_base", options.sets, "__plan_set") + "__plan_set\n",
      "<--set>", err);
  if (!merged) return std::nullopt;
  return withBaseSpans(*asSchedule(*merged), base, options);
}

}  // namespace

int planCommand(Args args, std::ostream& out, std::ostream& err) {
  PlanOptions plan;
  std::vector<std::string> rest;
  if (!parsePlanOptions(args, plan, rest, err)) return 2;
  auto options = parseScriptOptions(rest, true, err);
  if (!options) return 2;
  if (options->help) {
    out << kHelp << scriptOptionsHelp();
    return 0;
  }
  for (const auto& [value, flag] :
       {std::pair{&plan.model, "--model EXPR"}, std::pair{&plan.cluster, "--cluster EXPR"}})
    if (value->empty()) {
      err << "meshflow plan: missing " << flag << " (see --help)\n";
      return 2;
    }
  if (plan.batch == 0) {
    err << "meshflow plan: missing --batch N (see --help)\n";
    return 2;
  }
  applyDefaultFileAccess(*options);
  // With --json, standard output is the JSON alone: what the script prints
  // (its imports' top-level prints too) goes to standard error.
  std::ostream& printed = plan.json ? err : out;
  options->config.write = [&printed](std::string_view text) { printed << text; };
  Interpreter interpreter(options->config);
  // Ctrl-C cancels the planning at its next safe point, as in `meshflow run`.
  InterruptOnSigint interrupts([](void* i) { static_cast<Interpreter*>(i)->interrupt(); },
                               &interpreter);
  Status status = interpreter.evalFile(options->file);
  err << renderAll(status.diagnostics);
  if (!status.ok) return 1;
  auto model = evaluate(interpreter, plan.model, "<--model>", err);
  auto cluster = model ? evaluate(interpreter, plan.cluster, "<--cluster>", err) : std::nullopt;
  auto schedule = cluster ? scheduleOf(interpreter, plan, err) : std::nullopt;
  if (!schedule) return 1;
  status = interpreter.call("plan", {*model, *cluster, Value::integer(plan.batch), *schedule});
  err << renderAll(status.diagnostics);
  if (!status.ok) return 1;
  const auto* result = dynamic_cast<const interp::PlanObject*>(status.value->object().get());
  if (!result) {
    err << "meshflow plan: the script redefines plan(...); its result is not a plan\n";
    return 1;
  }
  if (plan.json)
    out << ir::planFileToJson({result->model(), result->cluster(), result->plan()}).dump()
        << "\n";
  else
    out << ir::planTable(result->plan());
  return 0;
}

}  // namespace meshflow::cli
