// What the plan's report and exports need to know about the model, read from
// its forward graph: transformer blocks, hidden size, heads, sequence length
// and the parameters' precision (ir::ModelFacts; docs/planning.md, "Exports").
#pragma once

#include "ir/Graph.h"
#include "ir/Plan.h"

namespace meshflow::passes {

/// Blocks: the top-level scopes holding a split_heads op (one attention per
/// block); heads and hidden size from the first split_heads (its `heads` and
/// its input's last dimension); the sequence from the first embedding's ids
/// (their non-batch dimensions), else split_heads' input; the precision from
/// the first parameter's dtype. Fields the graph does not show stay 0.
ir::ModelFacts modelFacts(const ir::Graph& forward);

}  // namespace meshflow::passes
