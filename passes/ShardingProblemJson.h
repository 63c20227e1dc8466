// The JSON form of sharding problems and solutions, used by
// `meshflow solve-sharding` so the solver can be checked against other
// implementations. docs/sharding.md describes the format.
#pragma once

#include <string>
#include <string_view>

#include "passes/ShardingSolver.h"

namespace meshflow::passes {

/// Reads {"nodes": [{"name", "costs", "memory"?}], "edges": [{"from", "to", "costs"}],
/// "memory_budget"?}; `null` in an edge's costs is an infeasible pair. Throws
/// ShardingError naming the offending node or edge (by index) on malformed input.
ShardingProblem parseShardingProblem(std::string_view text);

/// The inverse of parseShardingProblem (infinite edge costs print as null).
std::string printShardingProblem(const ShardingProblem& problem);

/// {"objective": x, "choice": [k0, ...], "optimal": true|false}.
std::string printShardingSolution(const ShardingSolution& solution);

}  // namespace meshflow::passes
