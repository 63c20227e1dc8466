// Layer clustering: the ops of a forward graph grouped into L layers, the unit
// the inter-operator stage DP works in (Alpa, OSDI'22, §5.2).
//
// A layer is a contiguous run of compute ops in the graph's (topological) op
// order. Input, Parameter and Constant leaves are not placed by the search: each
// joins the layer of its first consumer. Two ways to form the layers:
//
// - From the user's scopes: the first segment of an op's scope (`block3` of
//   `block3.mlp.fc1`) names the layer call that made it. When the graph has enough
//   scope runs that L layers can be formed from whole runs within the FLOP
//   tolerance, layers are cut only at scope boundaries.
// - Otherwise Alpa's G(k, r) dynamic program over single ops: every layer's FLOPs
//   (forward + backward, from ir::opCost) within δ of the average, and the least
//   total bytes of values crossing layer boundaries. Alpa minimises the largest
//   boundary; the total has the same optimal substructure and also lets the DP
//   break ties exactly by the FLOP balance (the least Σ ((F − avg) / avg)²).
//
// The result is deterministic: among equal plans the earliest cuts win.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/Graph.h"

namespace meshflow::passes {

struct LayerClusteringOptions {
  int layers = 1;          ///< L, at least 1.
  std::int64_t batch = 1;  ///< Binds the symbolic batch for FLOPs and bytes.
  double tolerance = 0.5;  ///< δ: each layer's FLOPs within (1 ± δ) · average.
  bool useScopes = true;   ///< Try the user's scopes first.
};

/// One layer: its compute ops are the non-leaf ops with ids in [firstOp, endOp)
/// (leaves are attached separately; see LayerClustering::layerOfOp).
struct LayerInfo {
  ir::OpId firstOp = 0;
  ir::OpId endOp = 0;
  double flops = 0;  ///< Forward + backward FLOPs of the layer's ops.
  /// Bytes of values this layer reads that an earlier layer produced (each value
  /// counted once per layer that reads it): what crosses its incoming boundary.
  double boundaryBytes = 0;
};

struct LayerClustering {
  std::vector<int> layerOfOp;  ///< Per op of the graph, its layer.
  std::vector<LayerInfo> layers;
  bool fromScopes = false;  ///< Cut only at the first-segment scope boundaries.
  double tolerance = 0;     ///< The δ the result meets (the requested one, or relaxed).
  double totalBoundaryBytes = 0;
};

/// A request that cannot be met: L < 1, more layers than compute ops with FLOPs,
/// or a graph that is not a forward graph.
class LayerClusteringError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Groups the ops of forward graph `graph` into `options.layers` layers. When no
/// split meets δ on single ops, δ is doubled until one does (the result's
/// `tolerance` says which); every layer always carries some FLOPs.
LayerClustering clusterLayers(const ir::Graph& graph, const LayerClusteringOptions& options);

}  // namespace meshflow::passes
