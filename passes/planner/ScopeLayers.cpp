#include "passes/planner/ScopeLayers.h"

#include <algorithm>

#include "ir/OpCost.h"

namespace meshflow::passes {
namespace {

bool isLeaf(ir::OpKind kind) {
  return kind == ir::OpKind::Input || kind == ir::OpKind::Parameter || kind == ir::OpKind::Constant;
}

std::string firstSegment(const std::string& scope) { return scope.substr(0, scope.find('.')); }

struct Run {
  std::vector<ir::OpId> ops;  // compute ops
  double flops = 0;
};

std::vector<Run> scopeRuns(const ir::Graph& graph, std::int64_t batch) {
  std::vector<Run> runs;
  std::string current;
  for (ir::OpId id = 0; id < graph.ops().size(); ++id) {
    const ir::Op& op = graph.op(id);
    if (isLeaf(op.kind)) continue;
    std::string segment = firstSegment(op.scope);
    if (runs.empty() || segment != current) runs.emplace_back();
    current = segment;
    ir::OpCost cost = ir::opCost(graph, id, batch);
    runs.back().ops.push_back(id);
    runs.back().flops += cost.flops + cost.backwardFlops;
  }
  return runs;
}

std::vector<Run> foldSmallRuns(std::vector<Run> runs) {
  if (runs.size() < 2) return runs;
  std::vector<double> flops;
  for (const Run& r : runs) flops.push_back(r.flops);
  std::nth_element(flops.begin(), flops.begin() + flops.size() / 2, flops.end());
  double threshold = flops[flops.size() / 2] / 10;
  std::vector<Run> folded;
  Run pending;
  for (Run& r : runs) {
    pending.ops.insert(pending.ops.end(), r.ops.begin(), r.ops.end());
    pending.flops += r.flops;
    if (pending.flops >= threshold) folded.push_back(std::move(pending)), pending = Run{};
  }
  if (!pending.ops.empty()) {
    if (folded.empty()) return {pending};
    folded.back().ops.insert(folded.back().ops.end(), pending.ops.begin(), pending.ops.end());
    folded.back().flops += pending.flops;
  }
  return folded;
}

LayerClustering clusteringOf(const ir::Graph& graph, const std::vector<Run>& runs,
                             std::int64_t batch) {
  LayerClustering c;
  c.fromScopes = true;
  c.layerOfOp.assign(graph.ops().size(), -1);
  for (std::size_t l = 0; l < runs.size(); ++l) {
    for (ir::OpId id : runs[l].ops) c.layerOfOp[id] = static_cast<int>(l);
    c.layers.push_back({runs[l].ops.front(), runs[l].ops.back() + 1, runs[l].flops, 0});
  }
  // Leaves join their first consumer; a value read from an earlier layer
  // crosses into the reading layer once.
  auto consumers = graph.consumers();
  for (ir::OpId id = 0; id < graph.ops().size(); ++id) {
    if (!isLeaf(graph.op(id).kind)) continue;
    int layer = 0;
    for (ir::ValueId v : graph.op(id).outputs)
      if (!consumers[v].empty()) layer = c.layerOfOp[consumers[v].front()];
    c.layerOfOp[id] = std::max(layer, 0);
  }
  for (ir::ValueId v = 0; v < graph.valueCount(); ++v) {
    int from = c.layerOfOp[graph.value(v).producer];
    const ir::TensorType& t = graph.value(v).type;
    double bytes = double(t.elements(batch)) * double(ir::dtypeBytes(t.dtype));
    std::vector<int> readers;
    for (ir::OpId reader : consumers[v])
      if (c.layerOfOp[reader] != from) readers.push_back(c.layerOfOp[reader]);
    std::sort(readers.begin(), readers.end());
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    for (int l : readers) {
      c.layers[l].boundaryBytes += bytes;
      c.totalBoundaryBytes += bytes;
    }
  }
  return c;
}

}  // namespace

std::optional<LayerClustering> scopeLayers(const ir::Graph& graph, std::int64_t batch) {
  std::vector<Run> runs = foldSmallRuns(scopeRuns(graph, batch));
  if (runs.size() < 2) return std::nullopt;
  return clusteringOf(graph, runs, batch);
}

}  // namespace meshflow::passes
