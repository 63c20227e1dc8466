// The planner's layers when the user's model is built from layer calls: one layer
// per maximal run of ops whose scopes share a first segment (`block3` of
// `block3.mlp.fc1`), small runs folded into a neighbour.
//
// Alpa's G(k, r) clustering (passes/LayerClustering.h) balances FLOPs; on a
// GPT it would cut inside blocks because the head alone weighs about V/(12h)
// blocks. Scope layers keep every block whole, so identical blocks stay
// identical layers and are priced once. A run with less than a tenth of the
// median run's FLOPs (the embedding, the final norm, the loss) joins the next
// run, or the previous one at the end. Leaves join the layer of their first
// consumer.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/Graph.h"
#include "passes/LayerClustering.h"

namespace meshflow::passes {

/// The scope layers of forward graph `graph`, or nothing when the graph has
/// fewer than two runs left after folding (no layer calls to go by).
std::optional<LayerClustering> scopeLayers(const ir::Graph& graph, std::int64_t batch);

}  // namespace meshflow::passes
