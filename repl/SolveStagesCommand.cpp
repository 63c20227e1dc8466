// `meshflow solve-stages COSTS.json [--json] [--time-budget SECONDS]`: Alpa's stage DP on an explicit
// cost table, so the DP can be checked against other implementations.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>

#include "ir/Counted.h"
#include "passes/StageProblemJson.h"
#include "passes/StageSolver.h"
#include "repl/Commands.h"
#include "repl/ScriptOptions.h"

namespace meshflow::cli {
namespace {

constexpr const char* kUsage =
    "usage: meshflow solve-stages COSTS.json [--json] [--time-budget SECONDS]\n"
    "\n"
    "Solves Alpa's inter-operator stage DP on an explicit cost table:\n"
    "  {\"layers\": L, \"microbatches\": B, \"cluster\": [N, M],\n"
    "   \"submeshes\": [[n, m], ...], \"cost\": c, \"max_n_succ_stages\": k?}\n"
    "c[i][j][s][g] is the latency of layers i..j (inclusive) on submesh s with\n"
    "logical-mesh choice g (null = infeasible); k has c's shape (null = unlimited).\n"
    "Minimises sum(t_i) + (B - 1) * max(t_i) over stages whose submeshes take\n"
    "exactly the cluster's N*M devices. See docs/stages.md.\n"
    "\n"
    "  --json   print {\"cost\": T, \"stages\": [{\"layers\": [i, j_exclusive],\n"
    "           \"submesh\": s, \"config\": g}], \"optimal\": bool} instead of a table\n"
    "  --time-budget SECONDS  stop the t_max enumeration after this long and report\n"
    "           the best plan found (marked not proven optimal); default 300\n";

constexpr double kDefaultTimeBudget = 300;

struct Options {
  std::string path;
  bool json = false;
  bool help = false;
  double timeBudget = kDefaultTimeBudget;
};

// Returns the options, or an error message for a usage error.
std::optional<Options> parseOptions(Args args, std::string& error) {
  Options options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--json") {
      options.json = true;
    } else if (arg == "--time-budget") {
      std::optional<double> seconds = i + 1 < args.size() ? parseSeconds(args[++i]) : std::nullopt;
      if (!seconds) {
        error = "--time-budget needs a positive number of seconds";
        return std::nullopt;
      }
      options.timeBudget = *seconds;
    } else if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (arg.starts_with("-") && arg != "-") {
      error = fmt::format("unknown option '{}'", arg);
      return std::nullopt;
    } else if (!options.path.empty()) {
      error = fmt::format("expected one COSTS.json, got '{}' and '{}'", options.path, arg);
      return std::nullopt;
    } else {
      options.path = arg;
    }
  }
  if (options.path.empty() && !options.help) {
    error = "missing COSTS.json";
    return std::nullopt;
  }
  return options;
}

std::optional<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void printTable(const passes::StageProblem& problem, const passes::StageSolution& solution,
                std::ostream& out) {
  out << fmt::format("cost {} = sum {} + ({} - 1) x max {}  ({} on {}x{} devices)\n",
                     solution.cost, solution.latencySum, problem.microbatches, solution.maxLatency,
                     ir::counted(std::int64_t(solution.stages.size()), "stage"), problem.nodes,
                     problem.devicesPerNode);
  if (!solution.optimal) out << "optimal: no (time budget ran out; best found)\n";
  out << fmt::format("{:<6} {:<10} {:<8} {:<10} {:<7} {}\n", "stage", "layers", "submesh", "shape",
                     "config", "latency");
  for (std::size_t k = 0; k < solution.stages.size(); ++k) {
    const passes::Stage& s = solution.stages[k];
    passes::SubmeshShape shape = problem.submeshes[s.submesh];
    out << fmt::format("{:<6} {:<10} {:<8} {:<10} {:<7} {}\n", k,
                       fmt::format("[{}, {})", s.firstLayer, s.endLayer), s.submesh,
                       fmt::format("({}, {})", shape.nodes, shape.devicesPerNode), s.config,
                       s.latency);
  }
}

}  // namespace

int solveStagesCommand(Args args, std::ostream& out, std::ostream& err) {
  std::string usageError;
  std::optional<Options> options = parseOptions(args, usageError);
  if (!options) {
    err << "meshflow solve-stages: " << usageError << "\n" << kUsage;
    return 2;
  }
  if (options->help) {
    out << kUsage;
    return 0;
  }
  std::optional<std::string> text = readFile(options->path);
  if (!text) {
    err << options->path << ": error: cannot read the file\n";
    return 1;
  }
  try {
    passes::StageProblem problem = passes::parseStageProblemText(*text);
    passes::StageSolution solution =
        passes::solveStages(problem, {.timeBudgetSeconds = options->timeBudget});
    if (options->json)
      out << passes::stageSolutionToJson(solution).dump() << "\n";
    else
      printTable(problem, solution, out);
    return 0;
  } catch (const passes::StageError& e) {
    err << options->path << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace meshflow::cli
