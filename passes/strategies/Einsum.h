// The loop-nest view of an op that most strategy families share (see Strategy.h).
// An op iterates over loops; each loop indexes one dimension of some of its inputs
// and outputs. Giving mesh axes to loops gives every tensor's spec. Only loops the
// family allows to be split are listed.
#pragma once

#include <string>
#include <vector>

#include "passes/strategies/Strategy.h"

namespace meshflow::passes {

struct Loop {
  /// What happens when a loop missing from the outputs (a contraction) is split.
  enum class Contraction {
    kAllReduce,    ///< The output is a partial sum, all-reduced by the op (Alpa's SR = SS x SR).
    kKeepPartial,  ///< The output stays a partial sum (a loss that is only reported).
    kStatistics,   ///< Per-row statistics are all-reduced (vocabulary-parallel cross entropy).
  };

  std::int64_t size = 1;
  std::vector<int> inputDims;   ///< Per input: the tensor dimension, or -1.
  std::vector<int> outputDims;  ///< Per output: the tensor dimension, or -1.
  Contraction contraction = Contraction::kAllReduce;
  /// For kStatistics: bytes of statistics of the whole op (before any split).
  double statisticsBytes = 0;
};

struct LoopNest {
  std::vector<Loop> loops;
  std::string tag;  ///< Appended to every strategy name (e.g. "[interleaved]").
};

/// One strategy per assignment of each mesh axis (of size > 1) to a loop or to
/// none, both axes on one loop meaning S01; assignments whose specs do not
/// divide the shapes are skipped.
std::vector<Strategy> loopNestStrategies(const OpContext& ctx, const LoopNest& nest);

/// A loop over dimension `dim` of every listed input and output (-1: absent).
Loop loopOver(std::int64_t size, std::vector<int> inputDims, std::vector<int> outputDims);

/// The strategies' name: `out = in0 x in1 ...` in spec strings.
std::string strategyName(const std::vector<ir::ShardingSpec>& inputs,
                         const std::vector<ir::ShardingSpec>& outputs);

/// Drops strategies whose specs repeat an earlier one's; keeps the order.
std::vector<Strategy> deduplicated(std::vector<Strategy> strategies);

}  // namespace meshflow::passes
