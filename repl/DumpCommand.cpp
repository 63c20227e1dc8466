// `meshflow dump FILE --model EXPR`: the traced graph with per-op FLOPs.
#include <fmt/format.h>

#include <iostream>

#include "interp/Tracing.h"
#include "ir/OpCost.h"
#include "repl/Commands.h"
#include "repl/ScriptOptions.h"

namespace meshflow::cli {
namespace {

const char* kHelp =
    "usage: meshflow dump FILE --model EXPR [--batch N] [options]\n\n"
    "Runs FILE, traces the model EXPR evaluates to (a model declaration, a model\n"
    "such as `gpt(layers = 2)`, or a function returning one) and prints its graph:\n"
    "one line per op with its scope, output type and forward/backward FLOPs for the\n"
    "batch size N (default 1), then the totals and the parameter count.\n\n"
    "options:\n"
    "  --model EXPR          the model to trace (required)\n"
    "  --batch N             the batch size the FLOPs are counted for (default 1)\n";

std::string flops(double value) {
  if (value == 0) return "0";
  return fmt::format("{:.4g}", value);
}

void printGraph(std::ostream& out, const interp::GraphObject& traced, std::int64_t batch) {
  const ir::Graph& graph = traced.graph();
  out << fmt::format("graph {} at batch {}\n", traced.name(), batch);
  out << fmt::format("{:>5}  {:<16} {:<28} {:<24} {:>12} {:>12}\n", "#", "op", "scope", "output",
                     "fwd FLOP", "bwd FLOP");
  for (ir::OpId id = 0; id < graph.ops().size(); ++id) {
    const ir::Op& op = graph.op(id);
    ir::OpCost cost = ir::opCost(graph, id, batch);
    std::string output = op.outputs.empty() ? "" : graph.value(op.outputs[0]).type.text();
    if (op.outputs.size() > 1) output += fmt::format(" (+{})", op.outputs.size() - 1);
    out << fmt::format("{:>5}  {:<16} {:<28} {:<24} {:>12} {:>12}\n", id, ir::opName(op.kind),
                       op.scope.empty() ? "-" : op.scope, output, flops(cost.flops),
                       flops(cost.backwardFlops));
  }
  ir::OpCost total = ir::graphCost(graph, batch);
  out << fmt::format("\nforward  {} FLOP\nbackward {} FLOP\ntotal    {} FLOP per step\n",
                     flops(total.flops), flops(total.backwardFlops),
                     flops(total.flops + total.backwardFlops));
  out << fmt::format("parameters {} in {} tensors; {} ops\n", ir::parameterCount(graph),
                     graph.parameters().size(), graph.ops().size());
}

}  // namespace

int dumpCommand(Args args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> rest;
  std::string model;
  std::int64_t batch = 1;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "--model" || args[i] == "--batch") && i + 1 < args.size()) {
      if (args[i] == "--model") {
        model = args[++i];
        continue;
      }
      try {
        batch = std::stoll(args[++i]);
      } catch (const std::exception&) {
        batch = 0;
      }
      if (batch < 1 || batch > (1 << 20)) {
        err << "meshflow: --batch needs an integer between 1 and 2^20\n";
        return 2;
      }
      continue;
    }
    rest.push_back(args[i]);
  }
  auto options = parseScriptOptions(rest, true, err);
  if (!options) return 2;
  if (options->help) {
    out << kHelp << scriptOptionsHelp();
    return 0;
  }
  if (model.empty()) {
    err << "meshflow: dump needs --model EXPR (see --help)\n";
    return 2;
  }
  applyDefaultFileAccess(*options);
  options->config.write = [&out](std::string_view text) { out << text; };
  Interpreter interpreter(options->config);
  Status status = interpreter.evalFile(options->file);
  if (status.ok) status = interpreter.eval("trace(" + model + ")", "<--model>");
  err << renderAll(status.diagnostics);
  if (!status.ok) return 1;
  auto* traced = dynamic_cast<interp::GraphObject*>(status.value->object().get());
  if (!traced) {
    err << "meshflow: --model did not give a model\n";
    return 1;
  }
  printGraph(out, *traced, batch);
  return 0;
}

}  // namespace meshflow::cli
