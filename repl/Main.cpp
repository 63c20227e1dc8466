#include <iostream>
#include <string>
#include <vector>

#include "meshflow/meshflow.h"
#include "repl/Commands.h"

namespace {

void printUsage(std::ostream& out) {
  out << "meshflow — plan and run parallel training from .mesh scripts\n\n"
         "usage: meshflow <command> [options]\n\ncommands:\n";
  for (const auto& command : meshflow::cli::commands())
    out << "  " << command.name << std::string(16 - std::string(command.name).size(), ' ')
        << command.summary << "\n";
  out << "\n`meshflow <command> --help` describes one command; `meshflow --version`\n"
         "prints the version.\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    printUsage(args.empty() ? std::cerr : std::cout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::cout << "meshflow " << meshflow::version() << "\n";
    return 0;
  }
  for (const auto& command : meshflow::cli::commands())
    if (args[0] == command.name)
      return command.run(meshflow::cli::Args(args).subspan(1), std::cout, std::cerr);
  std::cerr << "meshflow: unknown command '" << args[0] << "'\n";
  printUsage(std::cerr);
  return 2;
}
