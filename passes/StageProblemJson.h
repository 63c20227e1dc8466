// The JSON form of a stage problem and its solution, shared with other
// implementations of Alpa's stage DP so results can be compared:
//
//   {"layers": L, "microbatches": B, "cluster": [N, M],
//    "submeshes": [[n, m], ...], "cost": c, "max_n_succ_stages": k?}
//
// c[i][j][s][g] is the latency of layers i..j (inclusive) on submesh s with
// logical-mesh choice g, null where infeasible; entries with j < i are ignored
// but must still have the full shape. k has c's shape: an integer (the most
// stages allowed after that stage) or null (unlimited). The solution is
//
//   {"cost": T, "stages": [{"layers": [i, j_exclusive], "submesh": s, "config": g}]}
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "passes/StageSolver.h"

namespace meshflow::passes {

/// Reads and validates a problem; a StageError names the offending path, as in
/// "cost[2][1]: expected 3 submesh entries, got 2".
StageProblem parseStageProblem(const nlohmann::json& json);

/// As above, from JSON text; malformed JSON is a StageError too.
StageProblem parseStageProblemText(std::string_view text);

nlohmann::json stageProblemToJson(const StageProblem& problem);
nlohmann::json stageSolutionToJson(const StageSolution& solution);

}  // namespace meshflow::passes
