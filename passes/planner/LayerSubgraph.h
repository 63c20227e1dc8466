// A range of layers cut out of a forward graph, so that the intra-op pass can
// price it alone, and a signature that tells identical layers apart from
// different ones (block 3 and block 4 of a GPT have the same signature; the
// block that also holds the embedding has another).
#pragma once

#include <string>
#include <vector>

#include "ir/Graph.h"

namespace meshflow::passes {

struct LayerSubgraph {
  /// The ops of the layers, in graph order. A value an earlier layer produced
  /// becomes an Input op (scope "", name "boundary"), with the attribute
  /// `requires_grad` when it is floating: its gradient flows back to the stage
  /// before, so the strategies that read it pay for that gradient.
  ir::Graph graph;
  /// For each op of `graph`, the op of the source graph it copies (for a
  /// boundary input, the producer of the value it stands for).
  std::vector<ir::OpId> sourceOp;
  /// For each value of `graph`, the value of the source graph it copies or
  /// stands for.
  std::vector<ir::ValueId> sourceValue;
};

/// The ops with layerOfOp in [firstLayer, endLayer).
LayerSubgraph layerSubgraph(const ir::Graph& graph, const std::vector<int>& layerOfOp,
                            int firstLayer, int endLayer);

/// Everything the cost of `graph` depends on, without names, scopes and seeds.
std::string graphSignature(const ir::Graph& graph);

}  // namespace meshflow::passes
