#include "repl/ReplSession.h"

#include <algorithm>
#include <cctype>
#include <span>

namespace meshflow::cli {
namespace {

// The REPL's own commands, without their leading colon; the first of each row
// is the one :help and completion show.
constexpr std::string_view kHelpNames[] = {"help", "h", "?"};
constexpr std::string_view kQuitNames[] = {"quit", "q", "exit"};

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

}  // namespace

ReplSession::ReplSession(Config config) : interpreter_(std::move(config)) {}

std::string ReplSession::helpText() {
  return "Type a statement or an expression; an expression's value is printed.\n"
         "Definitions stay for the rest of the session. An unfinished input (an open\n"
         "`{`, `(` or `[`, or a trailing operator) continues on the next line at the\n"
         "`...> ` prompt; Ctrl-C drops it.\n"
         "\n"
         "commands:\n"
         "  :help, :h     show this help\n"
         "  :quit, :q     leave the REPL (Ctrl-D too)\n"
         "\n"
         "keys: TAB completes keywords and names in scope, and after a dot the fields\n"
         "and methods of a value (`r.na` -> `r.name`); up and down walk the history.\n"
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
         "  import std.clusters             # p3_16xlarge, dgx_a100, dgx_h100\n";
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
  Status status = interpreter_.eval(pending_, kSourceName);
  ReplReply reply;
  if (!status.ok && status.incomplete && !atEnd) return reply;  // wait for more lines
  pending_.clear();
  reply.diagnostics = renderAll(status.diagnostics);
  if (status.value && !status.value->isNone()) reply.output = status.value->repr() + "\n";
  return reply;
}

ReplReply ReplSession::command(std::string_view command) const {
  command = trim(command);
  ReplReply reply;
  if (isOneOf(command, kHelpNames)) {
    reply.output = helpText();
  } else if (isOneOf(command, kQuitNames)) {
    reply.quit = true;
  } else {
    reply.diagnostics =
        "error: unknown REPL command ':" + std::string(command) + "' (:help lists them)\n";
  }
  return reply;
}

ReplCompletion ReplSession::complete(std::string_view line, std::size_t cursor) const {
  cursor = std::min(cursor, line.size());
  std::size_t start = cursor;
  while (start > 0 && isWordChar(line[start - 1])) --start;
  std::string_view word = line.substr(start, cursor - start);
  ReplCompletion result;
  auto dot = word.rfind('.');
  result.wordLength = dot == std::string_view::npos ? word.size() : word.size() - dot - 1;
  if (trim(line.substr(0, start)) == ":") {
    for (const auto& name : {kHelpNames[0], kQuitNames[0]})
      if (name.starts_with(word)) result.candidates.emplace_back(name);
  } else {
    result.candidates = meshflow::complete(interpreter_, line, cursor);
  }
  result.commonPrefix = commonPrefixOf(result.candidates);
  return result;
}

}  // namespace meshflow::cli
