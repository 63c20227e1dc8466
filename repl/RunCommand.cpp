// `meshflow run FILE` and `meshflow check FILE`.
#include <unistd.h>

#include <iostream>

#include "repl/Backends.h"
#include "repl/Commands.h"
#include "repl/Interrupts.h"
#include "repl/ScriptOptions.h"
#include "repl/TerminalStyle.h"

namespace meshflow::cli {
namespace {

int runOrCheck(Args args, std::ostream& out, std::ostream& err, bool justCheck) {
  auto options = parseScriptOptions(args, true, err);
  const char* name = justCheck ? "check" : "run";
  if (!options) {
    err << "usage: meshflow " << name << " FILE [options]  (see --help)\n";
    return 2;
  }
  if (options->help) {
    out << "usage: meshflow " << name << " FILE [options]\n\n"
        << (justCheck ? "Reports the script's diagnostics (syntax, literals, misplaced statements,\n"
                        "imports) without running it. Exit status 0 if there are none, 1 otherwise.\n"
                      : "Runs a .mesh script. Exit status 0 on success, 1 on any error.\n")
        << "\noptions:\n"
        << scriptOptionsHelp();
    return 0;
  }
  applyDefaultFileAccess(*options);
  options->config.write = [&out](std::string_view text) { out << text << std::flush; };
  auto script = [&](Config& config) {
    Interpreter interpreter(config);
    // Ctrl-C stops the script at its next step (training: between steps).
    InterruptOnSigint interrupts([](void* i) { static_cast<Interpreter*>(i)->interrupt(); },
                                 &interpreter);
    Status status = justCheck ? interpreter.checkFile(options->file) : interpreter.evalFile(options->file);
    err << styledFor(STDERR_FILENO, renderAll(status.diagnostics));
    return status;
  };
  if (justCheck) return script(options->config).ok ? 0 : 1;
  return runOnBackend(*options, err, script);
}

}  // namespace

int runCommand(Args args, std::ostream& out, std::ostream& err) {
  return runOrCheck(args, out, err, false);
}

int checkCommand(Args args, std::ostream& out, std::ostream& err) {
  return runOrCheck(args, out, err, true);
}

}  // namespace meshflow::cli
