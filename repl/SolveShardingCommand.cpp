// `meshflow solve-sharding PROBLEM.json [--json] [--time-budget SECONDS]`: solves an
// explicit intra-op sharding problem (docs/sharding.md) so the solver can be
// checked against other implementations.
#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>

#include "passes/ShardingProblemJson.h"
#include "passes/ShardingSolver.h"
#include "repl/Commands.h"
#include "repl/ScriptOptions.h"

namespace meshflow::cli {

namespace {

constexpr const char* kUsage =
    "usage: meshflow solve-sharding PROBLEM.json [--json] [--time-budget SECONDS]\n"
    "\n"
    "Chooses one strategy per node minimising node costs plus edge costs under an\n"
    "optional memory budget (Alpa's intra-op ILP). See docs/sharding.md for the format.\n"
    "  --json                 print {\"objective\", \"choice\", \"optimal\", \"bound\", \"gap\"}\n"
    "                         instead of a summary\n"
    "  --time-budget SECONDS  stop the search after this long and report the best solution\n"
    "                         so far (not proven optimal) with its proven bound; default 10\n";

struct Options {
  std::string path;
  bool json = false;
  bool help = false;
  passes::SolveOptions solve;
};

// Returns an error message for a usage mistake, or nothing.
std::optional<std::string> parseOptions(Args args, Options& o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--time-budget") {
      if (i + 1 >= args.size()) return "--time-budget needs a number of seconds";
      std::optional<double> s = parseSeconds(args[++i]);
      if (!s) return fmt::format("--time-budget: '{}' is not a positive number", args[i]);
      o.solve.timeBudgetSeconds = *s;
    } else if (a.starts_with("-") && a != "-") {
      return fmt::format("unknown option '{}'", a);
    } else if (!o.path.empty()) {
      return fmt::format("unexpected argument '{}' (one problem file at a time)", a);
    } else {
      o.path = a;
    }
  }
  if (o.path.empty() && !o.help) return "missing PROBLEM.json";
  return std::nullopt;
}

std::optional<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void printSummary(const passes::ShardingProblem& problem, const passes::ShardingSolution& s,
                  std::ostream& out) {
  out << fmt::format("objective: {}\n", s.objective);
  out << (s.optimal ? std::string("optimal: yes\n")
                    : fmt::format(
                          "optimal: no (time budget ran out; best found): bound {}, gap {:.2f}%\n",
                          s.lowerBound, 100 * s.gap()));
  out << fmt::format("nodes: {} ({} left for the search after exact shrinking)\n",
                     problem.nodes.size(), s.residualNodes);
  for (size_t i = 0; i < s.choice.size(); ++i) {
    const passes::ShardingNode& n = problem.nodes[i];
    out << fmt::format("  {:>4} {:<20} strategy {} of {} (cost {})\n", i, n.name, s.choice[i],
                       n.costs.size(), n.costs[s.choice[i]]);
  }
}

}  // namespace

int solveShardingCommand(Args args, std::ostream& out, std::ostream& err) {
  Options o;
  if (std::optional<std::string> usage = parseOptions(args, o)) {
    err << "meshflow solve-sharding: " << *usage << "\n" << kUsage;
    return 2;
  }
  if (o.help) {
    out << kUsage;
    return 0;
  }
  std::optional<std::string> text = readFile(o.path);
  if (!text) {
    err << fmt::format("meshflow solve-sharding: cannot read '{}'\n", o.path);
    return 1;
  }
  try {
    passes::ShardingProblem problem = passes::parseShardingProblem(*text);
    passes::ShardingSolution solution = passes::solveSharding(problem, o.solve);
    if (o.json) {
      out << passes::printShardingSolution(solution) << "\n";
    } else {
      printSummary(problem, solution, out);
    }
  } catch (const passes::ShardingError& e) {
    err << fmt::format("meshflow solve-sharding: {}: error: {}\n", o.path, e.what());
    return 1;
  }
  return 0;
}

}  // namespace meshflow::cli
