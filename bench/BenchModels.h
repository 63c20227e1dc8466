// What the benchmarks share: tracing a stdlib model expression into its graph,
// and a nominal cpu cluster to plan for.
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "interp/Tracing.h"
#include "ir/Cluster.h"
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

/// `devices` cpu devices on one node with cpu()'s nominal figures (50 GFLOPS,
/// 10 GB/s, 4 GiB; 10 GB/s links of 1 us).
inline ir::Cluster cpuCluster(int devices) {
  ir::Cluster c;
  c.nodes = 1;
  c.devicesPerNode = devices;
  c.device.name = "cpu-thread";
  c.device.memoryBytes = 4.0 * (1 << 30);
  c.device.peakFlops = 50e9;
  c.device.memoryBandwidth = 10e9;
  c.intraNode = {10e9, 1e-6};
  c.interNode = c.intraNode;
  return c;
}

}  // namespace meshflow::bench
