#include "repl/PlanExplorer.h"
#include "ir/Bytes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <regex>

#include "interp/Handles.h"
#include "interp/PlanObject.h"
#include "ir/PlanMemory.h"

namespace meshflow::cli {
namespace {

// The names the generated source uses; a leading `__` keeps them out of the
// way of a user's own names.
constexpr const char* kHintsBlock = "__repl_hints";
constexpr const char* kBaseSchedule = "__repl_base";
constexpr const char* kDefaultBatch = "64";

bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string trimmed(std::string_view text) {
  while (!text.empty() && isSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && isSpace(text.back())) text.remove_suffix(1);
  return std::string(text);
}

// Splits `text` where `isSeparator` holds outside brackets and strings:
// `gpt(layers = 2) on cpu(devices = 4)` is three words.
template <typename Separator>
std::vector<std::string> splitTopLevel(std::string_view text, Separator isSeparator) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  bool inString = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\' && i + 1 < text.size())
        current += text[i++];
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (depth == 0 && isSeparator(c)) {
      if (!trimmed(current).empty()) parts.push_back(trimmed(current));
      current.clear();
      continue;
    }
    current += c;
  }
  if (!trimmed(current).empty()) parts.push_back(trimmed(current));
  return parts;
}

std::vector<std::string> words(std::string_view text) { return splitTopLevel(text, isSpace); }

// Whether no bracket closes before it opens: `a, b` is one call's arguments,
// `a)\nprint(b` (from `let q = plan(a)\nprint(b)`) is not.
bool balanced(std::string_view text) {
  int depth = 0;
  bool inString = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && --depth < 0) {
      return false;
    }
  }
  return depth == 0;
}

std::string joined(const std::vector<std::string>& parts, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to; ++i) out += (out.empty() ? "" : " ") + parts[i];
  return out;
}

std::string bytes(double b) { return ir::formatBytes(b); }

std::string plural(std::size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

ReplReply error(std::string message) {
  ReplReply reply;
  reply.diagnostics = "error: " + std::move(message) + "\n";
  return reply;
}

const interp::PlanObject* asPlan(const std::optional<Value>& value) {
  if (!value || value->kind() != ValueKind::Object) return nullptr;
  return dynamic_cast<const interp::PlanObject*>(value->object().get());
}

// Evaluates an expression typed after a command; diagnostics into `reply`.
std::optional<Value> evaluate(Interpreter& interpreter, const std::string& expression,
                              ReplReply& reply) {
  Status status = interpreter.eval(expression, "<command>");
  reply.diagnostics += renderAll(status.diagnostics);
  if (!status.ok) return std::nullopt;
  if (!status.value) reply.diagnostics += "error: '" + expression + "' is not an expression\n";
  return status.value;
}

std::string submeshes(const ir::Plan& plan) {
  std::string out;
  for (const auto& stage : plan.stages)
    out += fmt::format("{}({}, {})", out.empty() ? "" : " ", stage.submesh[0], stage.submesh[1]);
  return out;
}

// One line per summary figure that differs between the two plans.
std::string changes(const ir::Plan& before, const ir::Plan& after) {
  std::vector<std::string> lines;
  auto compare = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) lines.push_back(fmt::format("  {}: {} -> {}", what, a, b));
  };
  compare("stages", std::to_string(before.stages.size()), std::to_string(after.stages.size()));
  compare("submeshes", submeshes(before), submeshes(after));
  compare("schedule", std::string(ir::scheduleKindName(before.schedule)),
          std::string(ir::scheduleKindName(after.schedule)));
  compare("microbatches", std::to_string(before.microbatches), std::to_string(after.microbatches));
  compare("chunks per rank", std::to_string(before.chunks), std::to_string(after.chunks));
  compare("peak memory", bytes(before.peakMemoryBytes()), bytes(after.peakMemoryBytes()));
  if (ir::formatSeconds(before.stepTime) != ir::formatSeconds(after.stepTime))
    lines.push_back(fmt::format("  step time: {} -> {} ({:.2f}x)", ir::formatSeconds(before.stepTime),
                                ir::formatSeconds(after.stepTime),
                                after.stepTime > 0 ? before.stepTime / after.stepTime : 0.0));
  if (lines.empty()) return "changed: nothing in the plan's summary\n";
  std::string out = "changed:\n";
  for (const auto& line : lines) out += line + "\n";
  return out;
}

// The hints an alternative's description names: "1f1b v=2, 4 microbatches
// of 2, 2 stages: ..." (passes/planner/PlanBuilder.cpp writes it).
std::optional<HintSettings> hintsOfAlternative(const std::string& description) {
  static const std::regex kForm(
      R"(^([a-z0-9-]+)(?: v=(\d+))?, (\d+) microbatch(?:es)? of \d+, (\d+) stages?)");
  std::smatch match;
  if (!std::regex_search(description, match, kForm)) return std::nullopt;
  HintSettings hints = {{"pipeline", match[1]}, {"microbatches", match[3]}, {"stages", match[4]}};
  if (match[2].matched) hints.emplace_back("virtual_stages", match[2]);
  return hints;
}

}  // namespace

const std::vector<std::string>& PlanExplorer::commandNames() {
  static const std::vector<std::string> names = {"plan",    "set",      "alts",   "compare",
                                                 "explain", "timeline", "memory", "time"};
  return names;
}

const std::vector<std::string>& PlanExplorer::hintNames() {
  static const std::vector<std::string> names = {
      "batch",         "data_parallel", "max_tensor_parallel", "memory_per_device", "microbatches",
      "optimizer",     "pipeline",      "recompute",           "shard_optimizer",   "stages",
      "virtual_stages"};
  return names;
}

std::optional<ReplReply> PlanExplorer::run(Interpreter& interpreter, std::string_view name,
                                           std::string_view args) {
  std::string rest = trimmed(args);
  if (name == "plan") return planCommand(interpreter, rest);
  if (name == "set") return setCommand(interpreter, rest);
  if (name == "alts") return altsCommand(interpreter, rest);
  if (name == "compare") return compareCommand(interpreter, rest);
  if (name == "explain") {
    if (rest.empty()) return error("usage: :explain SCOPE, such as :explain block1.mlp.fc1");
    if (rest.size() >= 2 && rest.front() == '"' && rest.back() == '"')
      rest = rest.substr(1, rest.size() - 2);
    std::string escaped;
    for (char c : rest)
      escaped += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    return evalCommand(interpreter,
                       fmt::format("print({}.explain(\"{}\"))", currentName(), escaped));
  }
  if (name == "timeline") {
    bool number = !rest.empty() && std::all_of(rest.begin(), rest.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) != 0;
    });
    if (!rest.empty() && !number) return error("usage: :timeline [WIDTH], such as :timeline 120");
    return evalCommand(interpreter, fmt::format("print({}.timeline({}))", currentName(), rest));
  }
  if (name == "memory") return memoryCommand(interpreter);
  if (name == "time") return timeCommand(interpreter);
  return std::nullopt;
}

void PlanExplorer::noteInput(std::string_view input, double seconds, std::vector<PassTime> passes) {
  static const std::regex kLetPlan(
      R"(^\s*(?:let|var)\s+([A-Za-z_]\w*)\s*=\s*plan\s*\(([\s\S]*)\)\s*$)");
  std::string text(input);
  std::smatch match;
  if (!std::regex_match(text, match, kLetPlan) || !balanced(match[2].str())) return;
  LastPlan plan;
  plan.name = match[1];
  static const char* kPositional[] = {"model", "cluster", "batch", "schedule", "layers"};
  std::size_t position = 0;
  for (const std::string& arg : splitTopLevel(match[2].str(), [](char c) { return c == ','; })) {
    static const std::regex kKeyword(R"(^([A-Za-z_]\w*)\s*=(?!=)\s*([\s\S]*)$)");
    std::smatch keyword;
    std::string key, value = arg;
    if (std::regex_match(arg, keyword, kKeyword)) {
      key = keyword[1];
      value = keyword[2];
    } else if (position < std::size(kPositional)) {
      key = kPositional[position++];
    }
    if (key == "model")
      plan.model = value;
    else if (key == "cluster")
      plan.cluster = value;
    else if (key == "batch")
      plan.batch = value;
    else if (key == "schedule")
      plan.schedule = value == "none" ? "" : value;
    else
      plan.extra += (plan.extra.empty() ? "" : ", ") + (key.empty() ? value : key + " = " + value);
  }
  if (plan.model.empty() || plan.cluster.empty() || plan.batch.empty()) return;
  plan.planningSeconds = seconds;
  plan.passes = std::move(passes);
  last_ = std::move(plan);
}

ReplReply PlanExplorer::planCommand(Interpreter& interpreter, std::string_view args) {
  const char* usage =
      "usage: :plan MODEL on CLUSTER [batch=N] [hint=value ...], such as\n"
      "  :plan gpt(layers = 2, hidden = 64) on cpu(devices = 4) batch=16 microbatches=4";
  std::vector<std::string> parts = words(args);
  auto on = std::find(parts.begin(), parts.end(), "on");
  if (on == parts.begin() || on == parts.end() || on + 1 == parts.end()) return error(usage);
  std::size_t onAt = static_cast<std::size_t>(on - parts.begin());
  std::size_t hintsAt = onAt + 1;
  while (hintsAt < parts.size() && !parseHintSetting(parts[hintsAt])) ++hintsAt;
  if (hintsAt == onAt + 1) return error(usage);
  LastPlan plan;
  plan.name = "p";
  plan.model = joined(parts, 0, onAt);
  plan.cluster = joined(parts, onAt + 1, hintsAt);
  plan.batch = kDefaultBatch;
  for (std::size_t i = hintsAt; i < parts.size(); ++i) {
    auto setting = parseHintSetting(parts[i]);
    if (!setting) return error(fmt::format("'{}' is not hint=value; {}", parts[i], usage));
    if (setting->first == "batch")
      plan.batch = setting->second;
    else
      setHint(plan.hints, std::move(*setting));
  }
  return replan(interpreter, std::move(plan));
}

ReplReply PlanExplorer::setCommand(Interpreter& interpreter, std::string_view args) {
  if (!last_)
    return error(
        ":set changes the last plan made at the prompt, by :plan or by "
        "`let p = plan(...)`; there is none yet");
  std::vector<std::string> settings = words(args);
  if (settings.empty())
    return error("usage: :set hint=value ..., such as :set microbatches=8 pipeline=gpipe");
  LastPlan plan = *last_;
  for (const auto& word : settings) {
    auto setting = parseHintSetting(word);
    if (!setting) return error(fmt::format("'{}' is not hint=value, such as microbatches=8", word));
    if (setting->first == "batch")
      plan.batch = setting->second;
    else
      setHint(plan.hints, std::move(*setting));
  }
  return replan(interpreter, std::move(plan));
}

ReplReply PlanExplorer::replan(Interpreter& interpreter, LastPlan plan) {
  ReplReply reply;
  const interp::PlanObject* before = asPlan(interpreter.global(plan.name));
  std::optional<Value> previous = before ? interpreter.global(plan.name) : std::nullopt;
  std::string source, schedule = plan.schedule;
  if (!plan.hints.empty()) {
    const interp::ScheduleObject* base = nullptr;
    if (!plan.schedule.empty()) {
      auto value = evaluate(interpreter, plan.schedule, reply);
      if (!value) return reply;
      base = value->kind() == ValueKind::Object
                 ? dynamic_cast<const interp::ScheduleObject*>(value->object().get())
                 : nullptr;
      if (!base) return error(fmt::format("{} is not a schedule block", plan.schedule));
      interpreter.setGlobal(kBaseSchedule, *value);
    }
    source = scheduleSource(base, kBaseSchedule, plan.hints, kHintsBlock);
    schedule = kHintsBlock;
  }
  source +=
      fmt::format("let {} = plan({}, {}, batch = {}{}{})\n", plan.name, plan.model, plan.cluster,
                  plan.batch, schedule.empty() ? "" : ", schedule = " + schedule,
                  plan.extra.empty() ? "" : ", " + plan.extra);
  auto start = std::chrono::steady_clock::now();
  Status status = interpreter.eval(source, "<:plan>");
  plan.planningSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  plan.passes = interpreter.lastPlanningTimes();
  reply.diagnostics += renderAll(status.diagnostics);
  if (!status.ok) {
    if (previous)
      reply.diagnostics += fmt::format("note: '{}' is still the previous plan\n", plan.name);
    return reply;
  }
  const interp::PlanObject* after = asPlan(interpreter.global(plan.name));
  if (!after) return reply;
  reply.output =
      fmt::format("{} = plan({}, {}, batch = {}{})\n", plan.name, plan.model, plan.cluster,
                  plan.batch, plan.hints.empty() ? "" : ", " + std::string(kHintsBlock));
  for (const auto& [hint, value] : plan.hints)
    reply.output +=
        fmt::format("  {} {} {}\n", hint, hint == "memory_per_device" ? "<=" : "=", value);
  if (before) reply.output += changes(before->plan(), after->plan());
  reply.output += interpreter.global(plan.name)->repr() + "\n";
  last_ = std::move(plan);
  return reply;
}

ReplReply PlanExplorer::altsCommand(Interpreter& interpreter, std::string_view args) {
  const std::string name = currentName();
  std::optional<Value> current = interpreter.global(name);
  const interp::PlanObject* plan = asPlan(current);
  if (!plan) return error(fmt::format("no plan named '{}': make one with :plan", name));
  const auto& alternatives = plan->alternatives();
  if (args.empty()) {
    ReplReply reply;
    reply.output = fmt::format("{} weighed for {} (:alts N makes {}.alternatives[N] the plan):\n",
                               plural(alternatives.size(), "alternative"), name, name);
    reply.output += interp::alternativesText(plan->plan());
    return reply;
  }
  std::size_t index = alternatives.size();
  try {
    std::size_t used = 0;
    index = std::stoul(std::string(args), &used);
    if (used != args.size()) index = alternatives.size();
  } catch (const std::exception&) {
  }
  if (index >= alternatives.size())
    return error(alternatives.empty()
                     ? fmt::format("usage: :alts [N]; {} has no alternatives", name)
                     : fmt::format("usage: :alts [N], N from 0 to {}", alternatives.size() - 1));
  Value chosen = Value::object(ValueKind::Object, alternatives[index]);
  const ir::Plan before = plan->plan();
  interpreter.setGlobal(name, chosen);
  ReplReply reply;
  reply.output = fmt::format("{} = {}.alternatives[{}]: {}\n", name, name, index,
                             alternatives[index]->plan().description);
  // :set goes on from the alternative's hints.
  if (last_ && last_->name == name)
    if (auto hints = hintsOfAlternative(alternatives[index]->plan().description))
      for (auto& setting : *hints) setHint(last_->hints, std::move(setting));
  if (last_ && last_->name == name)
    for (const auto& [hint, value] : last_->hints)
      reply.output += fmt::format("  {} {} {}\n", hint, hint == "memory_per_device" ? "<=" : "=", value);
  reply.output += changes(before, alternatives[index]->plan());
  reply.output += chosen.repr() + "\n";
  return reply;
}

ReplReply PlanExplorer::compareCommand(Interpreter& interpreter, std::string_view args) {
  std::vector<std::string> names = words(args);
  if (names.size() != 2) return error("usage: :compare P Q, two plans such as :compare p q");
  ReplReply reply;
  std::vector<const interp::PlanObject*> plans;
  std::vector<Value> keep;  // holds the plans while they are read
  for (const auto& name : names) {
    auto value = evaluate(interpreter, name, reply);
    if (!value) return reply;
    const interp::PlanObject* plan = asPlan(value);
    if (!plan) return error(fmt::format("'{}' is {}, not a plan", name, value->aTypeName()));
    keep.push_back(*value);
    plans.push_back(plan);
  }
  try {
    reply.output = interp::comparePlans(*plans[0], *plans[1], names[0], names[1]);
  } catch (const std::exception& e) {
    return error(e.what());
  }
  return reply;
}

ReplReply PlanExplorer::evalCommand(Interpreter& interpreter, const std::string& source) {
  ReplReply reply;
  if (!asPlan(interpreter.global(currentName())))
    return error(fmt::format("no plan named '{}': make one with :plan", currentName()));
  Status status = interpreter.eval(source, "<command>");
  reply.diagnostics = renderAll(status.diagnostics);
  return reply;
}

ReplReply PlanExplorer::memoryCommand(Interpreter& interpreter) {
  const interp::PlanObject* plan = asPlan(interpreter.global(currentName()));
  if (!plan) return error(fmt::format("no plan named '{}': make one with :plan", currentName()));
  ReplReply reply;
  reply.output = fmt::format("memory per device of {}, predicted (device memory {}):\n",
                             currentName(), bytes(plan->cluster().device.memoryBytes));
  reply.output += ir::memoryTable(plan->plan());
  return reply;
}

ReplReply PlanExplorer::timeCommand(Interpreter& interpreter) {
  if (!last_ || last_->planningSeconds == 0)
    return error(":time reports the last plan made by :plan, :set or :alts; there is none");
  ReplReply reply;
  const LastPlan& plan = *last_;
  reply.output = fmt::format("planning {} took {}:\n", plan.name, ir::formatSeconds(plan.planningSeconds));
  double planner = 0;
  for (const PassTime& pass : plan.passes) {
    reply.output += fmt::format("  {:<28} {:>9}  {:>3.0f}%\n", pass.pass, ir::formatSeconds(pass.seconds),
                                100 * pass.seconds / plan.planningSeconds);
    planner += pass.seconds;
  }
  double rest = std::max(0.0, plan.planningSeconds - planner);
  reply.output += fmt::format("  {:<28} {:>9}  {:>3.0f}%\n", "tracing the model, the rest",
                              ir::formatSeconds(rest), 100 * rest / plan.planningSeconds);
  return reply;
}

}  // namespace meshflow::cli
