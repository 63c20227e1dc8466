// The public embedding API (include/meshflow/meshflow.h).
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "grammar/Parser.h"
#include "interp/DataObject.h"
#include "interp/Evaluator.h"
#include "interp/HostResults.h"
#include "interp/InterpreterState.h"
#include "interp/Members.h"
#include "interp/ParsedModules.h"
#include "meshflow/meshflow.h"

namespace meshflow {
namespace {

using interp::InterpreterState;

void report(const Config& config, Status& status) {
  if (!status.diagnostics.empty()) status.ok = false;
  if (config.diagnostic)
    for (const auto& d : status.diagnostics) config.diagnostic(d);
}

// Runs `body` and turns every way it can fail into a diagnostic: errors never
// escape to the host.
template <typename Body>
void guarded(InterpreterState& state, Status& status, Body body) {
  state.beginRun();
  try {
    body();
  } catch (ScriptError& error) {
    status.diagnostics.push_back(error.diagnostic());
  } catch (const std::bad_alloc&) {
    status.diagnostics.push_back(
        interp::makeDiagnostic(DiagnosticKind::MemoryLimit, "out of memory", {}));
  }
  status.notes = std::move(state.notes);
  state.notes.clear();
  report(state.config, status);
}

// A script is a file: a folder opens as a stream on Linux and reads as
// nothing, which would run as an empty script.
std::optional<std::string> readWholeFile(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Status unreadable(const Config& config, const std::string& path) {
  Status status;
  std::error_code error;
  auto kind = std::filesystem::status(path, error).type();
  std::string why = kind == std::filesystem::file_type::not_found ? "no such file"
                    : kind == std::filesystem::file_type::directory
                        ? "it is a folder, not a .mesh script"
                        : "permission denied";
  status.diagnostics.push_back(interp::makeDiagnostic(
      DiagnosticKind::ImportNotFound, fmt::format("cannot read '{}': {}", path, why), {}));
  report(config, status);
  return status;
}

// A source handed to eval or check, parsed, or taken from Config::parsedModules
// when the host gave one and parsed exactly this text under this name before
// (check() after eval() of one script parses it once).
struct ParsedSource {
  std::shared_ptr<const ast::Program> program;  // null when there were errors
  std::vector<Diagnostic> diagnostics;
  bool incomplete = false;
};

ParsedSource parseSource(const Config& config, std::string_view source, std::string_view name) {
  std::string text(source), path(name);
  if (config.parsedModules)
    if (auto program = config.parsedModules->find(path, text)) return {program, {}, false};
  auto parsed = grammar::parse(std::make_shared<interp::SourceFile>(path, text));
  if (parsed.ok() && config.parsedModules)
    config.parsedModules->remember(path, std::move(text), parsed.program);
  return {std::move(parsed.program), std::move(parsed.diagnostics), parsed.incomplete};
}

}  // namespace

Interpreter::Interpreter(Config config)
    : state_(std::make_unique<InterpreterState>(std::move(config))) {}

Interpreter::~Interpreter() = default;

const Config& Interpreter::config() const { return state_->config; }

Status Interpreter::eval(std::string_view source, std::string_view name) {
  Status status;
  ParsedSource parsed = parseSource(state_->config, source, name);
  status.incomplete = parsed.incomplete;
  status.diagnostics = std::move(parsed.diagnostics);
  if (!parsed.program) {
    report(state_->config, status);
    return status;
  }
  state_->programs.push_back(parsed.program);
  guarded(*state_, status, [&] {
    interp::Evaluator evaluator(*state_);
    status.value = evaluator.run(parsed.program, state_->globals);
  });
  return status;
}

Status Interpreter::evalFile(const std::string& path) {
  auto text = readWholeFile(path);
  if (!text) return unreadable(state_->config, path);
  return eval(*text, path);
}

Status Interpreter::check(std::string_view source, std::string_view name) {
  Status status;
  ParsedSource parsed = parseSource(state_->config, source, name);
  status.incomplete = parsed.incomplete;
  status.diagnostics = std::move(parsed.diagnostics);
  if (parsed.program) state_->modules.checkImports(state_->config, *parsed.program, status.diagnostics);
  report(state_->config, status);
  return status;
}

Status Interpreter::checkFile(const std::string& path) {
  auto text = readWholeFile(path);
  if (!text) return unreadable(state_->config, path);
  return check(*text, path);
}

std::optional<Value> Interpreter::global(const std::string& name) const {
  if (auto* binding = state_->globals->find(name)) return binding->value;
  return std::nullopt;
}

void Interpreter::setGlobal(const std::string& name, Value value) {
  if (auto* binding = state_->globals->findLocal(name)) {
    binding->value = std::move(value);
    return;
  }
  state_->globals->define(name, interp::Binding{std::move(value), true, {}});
}

Status Interpreter::call(const Value& callee, std::vector<Value> args) {
  Status status;
  guarded(*state_, status, [&] {
    interp::Arguments arguments;
    for (auto& arg : args) arguments.entries.push_back({std::nullopt, std::move(arg), {}});
    interp::Evaluator evaluator(*state_);
    status.value = evaluator.call(callee, arguments);
  });
  return status;
}

Status Interpreter::call(const std::string& name, std::vector<Value> args) {
  auto callee = global(name);
  if (!callee) {
    Status status;
    status.diagnostics.push_back(interp::makeDiagnostic(
        DiagnosticKind::UnknownName, fmt::format("no global named '{}'", name), {}));
    report(state_->config, status);
    return status;
  }
  return call(*callee, std::move(args));
}

void Interpreter::defineFunction(const std::string& name, std::vector<std::string> params,
                                 HostFunction fn) {
  std::vector<interp::ParamSpec> specs;
  for (auto& p : params) specs.push_back({std::move(p), std::nullopt});
  void* userData = state_->config.userData;
  auto body = [name, fn = std::move(fn), userData](interp::Evaluator&, interp::BoundArgs& args) {
    HostCall call(args.values, userData);
    try {
      return fn(call);
    } catch (ScriptError&) {
      throw;
    } catch (const std::exception& error) {
      throw ScriptError(DiagnosticKind::HostError, fmt::format("{}: {}", name, error.what()));
    }
  };
  auto builtin = std::make_shared<interp::Builtin>(name, std::move(specs), std::move(body));
  Value value = Value::object(ValueKind::Callable, std::move(builtin));
  if (auto* binding = state_->globals->findLocal(name)) {
    binding->value = std::move(value);
    return;
  }
  state_->globals->define(name, interp::Binding{std::move(value), false, {}});
}

void Interpreter::interrupt() { state_->interrupted.store(true, std::memory_order_relaxed); }

std::vector<PassTime> Interpreter::lastPlanningTimes() const {
  std::vector<PassTime> times;
  for (const passes::PassTime& t : state_->planControl.passTimes()) times.push_back({t.pass, t.seconds});
  return times;
}

Status Interpreter::callMethod(const Value& object, const std::string& method, std::vector<Value> args) {
  Status status;
  guarded(*state_, status, [&] {
    interp::Evaluator evaluator(*state_);
    Value bound = interp::member(evaluator, object, method);
    interp::Arguments arguments;
    for (auto& arg : args) arguments.entries.push_back({std::nullopt, std::move(arg), {}});
    status.value = evaluator.call(bound, arguments);
  });
  return status;
}

std::optional<PlanResult> Interpreter::planResult(const Value& plan) const {
  return interp::planResultOf(plan);
}

std::optional<SimulationResult> Interpreter::simulationResult(const Value& record) const {
  return interp::simulationResultOf(record);
}

std::optional<TrainResult> Interpreter::trainResult(const Value& record) const {
  return interp::trainResultOf(record);
}

void Interpreter::defineTokenData(const std::string& name, TokenLoader loader) {
  setGlobal(name, interp::dataValue(state_->heap, interp::tokenData(name, std::move(loader))));
}

void Interpreter::forgetImports() { state_->modules.clear(); }

std::vector<std::string> Interpreter::globalNames() const { return state_->globals->visibleNames(); }

std::vector<std::string> Interpreter::memberNames(const std::string& expression) const {
  std::vector<std::string> path;
  std::stringstream parts(expression);
  for (std::string part; std::getline(parts, part, '.');) path.push_back(part);
  if (path.empty()) return {};
  auto value = global(path[0]);
  for (std::size_t i = 1; value && i < path.size(); ++i) {
    if (!value->object()) return {};
    value = value->object()->field(path[i]);
  }
  return value ? interp::memberNames(*value) : std::vector<std::string>{};
}

std::string_view version() { return MESHFLOW_VERSION; }

}  // namespace meshflow
