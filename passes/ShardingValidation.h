// Internal to solveSharding: every malformed input is a ShardingError naming the
// node, edge or budget that is wrong.
#pragma once

#include <string>

#include "passes/ShardingSolver.h"

namespace meshflow::passes::sharding {

/// "node 3 'fc1'", as every message names a node.
std::string nodeLabel(const ShardingProblem& p, size_t i);

/// Throws ShardingError for malformed input (empty strategy lists, negative or
/// NaN costs, matrices of the wrong shape, nodes out of range, a bad budget) and
/// for an edge that allows no pair of strategies at all.
void validateProblem(const ShardingProblem& p);

}  // namespace meshflow::passes::sharding
