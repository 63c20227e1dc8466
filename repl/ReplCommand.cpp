// `meshflow repl`: an interactive session. On a terminal lines are read with
// libedit (LineEditor); otherwise plainly, without prompts, so that
// `echo 'print(1)' | meshflow repl` works. ReplSession decides what each line does.
#include <unistd.h>

#include <iostream>
#include <string>

#include "repl/Commands.h"
#include "repl/Interrupts.h"
#include "repl/LineEditor.h"
#include "repl/ReplSession.h"
#include "repl/ScriptOptions.h"
#include "repl/TerminalStyle.h"

namespace meshflow::cli {
namespace {

void show(const ReplReply& reply, std::ostream& out, std::ostream& err) {
  out << reply.output << std::flush;
  err << styledFor(STDERR_FILENO, reply.diagnostics) << std::flush;
}

int readPlainLines(ReplSession& session, std::istream& in, std::ostream& out, std::ostream& err) {
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    ReplReply reply = session.feed(line);
    show(reply, out, err);
    if (reply.quit) return 0;
  }
  show(session.finish(), out, err);
  return 0;
}

int readTerminalLines(ReplSession& session, std::ostream& out, std::ostream& err) {
  LineEditor editor(session, LineEditor::defaultHistoryPath());
  // Ctrl-C while an input runs stops it; at the prompt libedit reads it as a key.
  InterruptOnSigint interrupts([](void* s) { static_cast<ReplSession*>(s)->interrupt(); },
                               &session);
  out << "meshflow " << version() << " — :help for help, :quit or Ctrl-D to leave\n";
  while (auto line = editor.read()) {
    if (line->interrupted) {
      if (!session.continuing()) out << "(Ctrl-C drops an input; :quit or Ctrl-D leaves)\n";
      session.cancel();
      continue;
    }
    ReplReply reply = session.feed(line->text);
    show(reply, out, err);
    if (reply.quit) return 0;
  }
  out << "\n";
  show(session.finish(), out, err);
  return 0;
}

}  // namespace

int replCommand(Args args, std::ostream& out, std::ostream& err) {
  auto options = parseScriptOptions(args, false, err);
  if (!options) {
    err << "usage: meshflow repl [options]  (see --help)\n";
    return 2;
  }
  if (options->help) {
    out << "usage: meshflow repl [options]\n\n"
           "An interactive session: each input runs as it is entered, an expression's\n"
           "value is printed, and definitions stay for the rest of the session. An\n"
           "unfinished input (an open bracket or block, a trailing operator) continues\n"
           "at the `...> ` prompt. On a terminal: line editing, history (saved in\n"
           "~/.meshflow_history), TAB completion of names and of members after a dot,\n"
           "Ctrl-C drops the current input, or stops what runs (a loop, training, a\n"
           "plan) keeping what it defined. At the prompt a definition may replace an\n"
           "earlier one. :plan, :set, :alts, :compare, :explain, :timeline, :memory and\n"
           ":time explore plans; :help lists every command; :quit, :q or Ctrl-D leaves\n"
           "(exit status 0).\n\n"
           "When standard input is not a terminal, lines are read without prompts:\n"
           "  echo 'print(1 + 1)' | meshflow repl\n"
           "\noptions:\n"
        << scriptOptionsHelp();
    return 0;
  }
  applyDefaultFileAccess(*options);
  options->config.write = [&out](std::string_view text) { out << text << std::flush; };
  ReplSession session(std::move(options->config));
  if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) return readTerminalLines(session, out, err);
  return readPlainLines(session, std::cin, out, err);
}

}  // namespace meshflow::cli
