#include "repl/ReplSession.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <span>

#include "interp/FileAccess.h"

namespace meshflow::cli {
namespace {

// The REPL's own commands, without their leading colon; the first of each row
// is the one :help and completion show.
constexpr std::string_view kHelpNames[] = {"help", "h", "?"};
constexpr std::string_view kQuitNames[] = {"quit", "q", "exit"};
// The session's own commands beside the plan explorer's, in :help's order.
constexpr std::string_view kSessionCommands[] = {"load", "reload", "save", "reset"};

bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && isSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && isSpace(text.back())) text.remove_suffix(1);
  return text;
}

// The same word characters as meshflow::complete, so the length of the word it
// completed is known here.
bool isWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

bool isOneOf(std::string_view name, std::span<const std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string commonPrefixOf(const std::vector<std::string>& words) {
  if (words.empty()) return "";
  std::string prefix = words.front();
  for (const auto& word : words) {
    auto [end, ignored] = std::mismatch(prefix.begin(), prefix.end(), word.begin(), word.end());
    prefix.erase(end, prefix.end());
  }
  return prefix;
}

Config atThePrompt(Config config) {
  config.allowRedefinition = true;
  return config;
}

// The first word of a command and the rest: `plan gpt() on x` -> `plan`, `gpt() on x`.
std::pair<std::string_view, std::string_view> splitCommand(std::string_view command) {
  std::size_t end = 0;
  while (end < command.size() && !isSpace(command[end])) ++end;
  return {command.substr(0, end), trim(command.substr(end))};
}

ReplReply failure(std::string message) {
  ReplReply reply;
  reply.diagnostics = "error: " + std::move(message) + "\n";
  return reply;
}

}  // namespace

ReplSession::ReplSession(Config config)
    : config_(atThePrompt(std::move(config))),
      interpreter_(std::make_unique<Interpreter>(config_)) {}

std::string ReplSession::helpText() {
  return "Type a statement or an expression; an expression's value is printed.\n"
         "Definitions stay for the rest of the session, and a new `let`, `fn`, `model`,\n"
         "`layer`, `cluster` or `schedule` of a name replaces the old one (a note says\n"
         "so). An unfinished input (an open `{`, `(` or `[`, or a trailing operator)\n"
         "continues on the next line at the `...> ` prompt; Ctrl-C drops it. Ctrl-C\n"
         "while something runs (a loop, training, a plan) stops it and keeps what it\n"
         "defined; a plan longer than a second shows a progress line meanwhile.\n"
         "\n"
         "plans (the commands act on the last plan made at the prompt, else on `p`):\n"
         "  :plan MODEL on CLUSTER [batch=N] [hint=value ...]\n"
         "                 plan and bind `p` (batch 64 unless given), print it\n"
         "  :set hint=value ...   plan the last plan again with changed hints, rebind\n"
         "                 it and show what changed (also after `let q = plan(...)`)\n"
         "  :alts [N]      the alternatives the planner weighed; N plans with one\n"
         "  :compare P Q   two plans side by side\n"
         "  :explain SCOPE the strategies weighed for the ops under SCOPE\n"
         "  :timeline [W]  one simulated step, rank by rank (W columns, default 72)\n"
         "  :memory        predicted memory per device, stage by stage\n"
         "  :time          how long the last plan took to make, pass by pass\n"
         "\n"
         "session:\n"
         "  :load FILE     run a script here (its definitions join the session)\n"
         "  :reload        run the last :load script and its imports again, after edits\n"
         "  :save FILE     write the inputs that ran without error as a script\n"
         "  :reset         start afresh: every definition is forgotten\n"
         "  :help, :h      show this help\n"
         "  :quit, :q      leave the REPL (Ctrl-D too)\n"
         "\n"
         "keys: TAB completes keywords, names in scope, after a dot the fields and\n"
         "methods of a value (`r.na` -> `r.name`), commands after `:` and hint names\n"
         "after :plan and :set; up and down walk the history.\n"
         "\n"
         "examples:\n"
         "  let hidden = 1024\n"
         "  hidden * 4                      # prints 4096\n"
         "  fn ffn(h) {\n"
         "  ...>   return 4 * h\n"
         "  ...> }\n"
         "  ffn(hidden)                     # prints 4096\n"
         "  80GB / 2039GB/s                 # a quantity in seconds\n"
         "  let r = {name: \"fc1\", size: 4}\n"
         "  r.name                          # prints \"fc1\"\n"
         "  import std.models               # gpt, tiny_gpt, gpt_1_3b, ... and the layers\n"
         "  import std.clusters             # p3_16xlarge, dgx_a100, dgx_h100\n"
         "  :plan gpt_1_3b() on dgx_a100(nodes = 2) batch=512\n"
         "  :set microbatches=16 pipeline=gpipe\n"
         "  let q = plan(gpt_1_3b(), dgx_a100(nodes = 2), batch = 512)\n"
         "  :compare p q\n"
         "  :explain block1.mlp.fc1\n";
}

ReplReply ReplSession::feed(std::string_view line) {
  std::string_view text = trim(line);
  // No statement starts with a colon, so a command is recognised even in the
  // middle of an unfinished input (`:quit` must always work).
  if (!text.empty() && text.front() == ':') return command(text.substr(1));
  if (!continuing() && text.empty()) return {};
  if (continuing()) pending_ += '\n';
  pending_ += line;
  return run(false);
}

ReplReply ReplSession::finish() {
  if (!continuing()) return {};
  return run(true);
}

ReplReply ReplSession::run(bool atEnd) {
  auto start = std::chrono::steady_clock::now();
  Status status = interpreter_->eval(pending_, kSourceName);
  ReplReply reply;
  if (!status.ok && status.incomplete && !atEnd) return reply;  // wait for more lines
  if (status.ok) {
    explorer_.noteInput(
        pending_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
        interpreter_->lastPlanningTimes());
    inputs_.push_back(pending_);
  }
  pending_.clear();
  reply.diagnostics = renderAll(status.notes) + renderAll(status.diagnostics);
  if (status.value && !status.value->isNone()) reply.output = status.value->repr() + "\n";
  return reply;
}

ReplReply ReplSession::command(std::string_view command) {
  auto [name, args] = splitCommand(trim(command));
  if (isOneOf(name, kHelpNames)) return {helpText(), "", false};
  if (isOneOf(name, kQuitNames)) return {"", "", true};
  if (auto reply = explorer_.run(*interpreter_, name, args)) return *reply;
  if (name == "load") {
    if (args.empty()) return failure("usage: :load FILE");
    loaded_ = std::string(args);
    return load(loaded_, "loaded");
  }
  if (name == "reload") {
    if (loaded_.empty()) return failure(":reload runs the last :load script again; there is none");
    // Imports are read afresh too: an edited module is what :reload is for.
    interpreter_->forgetImports();
    return load(loaded_, "reloaded");
  }
  if (name == "save") return args.empty() ? failure("usage: :save FILE") : save(std::string(args));
  if (name == "reset") {
    reset();
    return {"a fresh session: every definition is forgotten\n", "", false};
  }
  return failure("unknown REPL command ':" + std::string(name) + "' (:help lists them)");
}

ReplReply ReplSession::load(const std::string& file, const char* verb) {
  Status status = interpreter_->evalFile(file);
  ReplReply reply;
  reply.diagnostics = renderAll(status.notes) + renderAll(status.diagnostics);
  if (status.ok) reply.output = fmt::format("{} {}\n", verb, file);
  return reply;
}

ReplReply ReplSession::save(const std::string& file) const {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  for (const auto& input : inputs_) out << input << "\n";
  out.close();
  if (!out)
    return failure(fmt::format("cannot write '{}': {}", file, interp::whyCannotWrite(file)));
  return {
      fmt::format("saved {} input{} to {}\n", inputs_.size(), inputs_.size() == 1 ? "" : "s", file),
      "", false};
}

void ReplSession::reset() {
  interpreter_ = std::make_unique<Interpreter>(config_);
  explorer_.reset();
  inputs_.clear();
  loaded_.clear();
  pending_.clear();
}

ReplCompletion ReplSession::complete(std::string_view line, std::size_t cursor) const {
  cursor = std::min(cursor, line.size());
  std::size_t start = cursor;
  while (start > 0 && isWordChar(line[start - 1])) --start;
  std::string_view word = line.substr(start, cursor - start);
  ReplCompletion result;
  auto dot = word.rfind('.');
  result.wordLength = dot == std::string_view::npos ? word.size() : word.size() - dot - 1;
  std::string_view before = trim(line.substr(0, start));
  auto offer = [&](std::string_view name) {
    if (name.starts_with(word)) result.candidates.emplace_back(name);
  };
  if (before == ":") {
    for (const auto& name : PlanExplorer::commandNames()) offer(name);
    for (const auto& name : kSessionCommands) offer(name);
    for (const auto& name : {kHelpNames[0], kQuitNames[0]}) offer(name);
  } else if ((before.starts_with(":plan") || before.starts_with(":set")) &&
             dot == std::string_view::npos &&
             (before.starts_with(":set") || before.find(" on ") != std::string_view::npos)) {
    // After :set, and after :plan's cluster: hint names, ready for `=`.
    for (const auto& name : PlanExplorer::hintNames()) offer(name);
  } else {
    result.candidates = meshflow::complete(*interpreter_, line, cursor);
  }
  std::sort(result.candidates.begin(), result.candidates.end());
  result.commonPrefix = commonPrefixOf(result.candidates);
  return result;
}

}  // namespace meshflow::cli
