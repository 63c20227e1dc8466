// What the benchmarks share: tracing a stdlib model expression into its graph.
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "interp/Tracing.h"
#include "meshflow/meshflow.h"

namespace meshflow::bench {

/// The forward graph of `model`, an expression over std.models
/// ("gpt(layers = 2, ...)"); exits with the diagnostics when it does not trace.
inline ir::Graph trace(const std::string& model) {
  Interpreter interpreter;
  auto status = interpreter.eval("import std.models\ntrace(" + model + ")", "bench.mesh");
  if (!status.ok) {
    fmt::print(stderr, "cannot trace {}: {}\n", model, renderAll(status.diagnostics));
    std::exit(1);
  }
  return dynamic_cast<interp::GraphObject*>(status.value->object().get())->graph();
}

}  // namespace meshflow::bench
