// Placeholder until the libedit REPL lands (being written now).
#include <iostream>
#include <string>

#include "repl/Commands.h"
#include "repl/ScriptOptions.h"

namespace meshflow::cli {

int replCommand(Args args, std::ostream& out, std::ostream& err) {
  auto options = parseScriptOptions(args, false, err);
  if (!options) return 2;
  applyDefaultFileAccess(*options);
  Interpreter interpreter(options->config);
  std::string line;
  while (std::getline(std::cin, line)) {
    auto status = interpreter.eval(line, "<repl>");
    err << renderAll(status.diagnostics);
    if (status.value && !status.value->isNone()) out << status.value->repr() << "\n";
  }
  return 0;
}

}  // namespace meshflow::cli
