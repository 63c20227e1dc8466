// The graph verifier: the first pass of the pipeline, and the check every pass
// test runs on the graph it produces.
//
// A graph verifies when
// - it is SSA in execution order: every value an op reads is produced by an
//   earlier op, every value is produced by exactly one op (the one its
//   ValueInfo::producer names), and every graph output is produced by some op;
// - every op satisfies its type rule: its recorded output types equal
//   ir::inferTypes of its input types and attributes (for Input and Parameter
//   ops, ir::checkLeafType accepts the declared type);
// - a backward or update op's forwardOp, when set, names an earlier op.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "ir/Graph.h"

namespace meshflow::passes {

/// A broken invariant of the graph. The message names the op by index, kind and
/// scope, e.g. `op #12 (matmul in "block0.attn"): uses %40 before its definition`;
/// op() is that index (none for a problem with the graph's outputs).
class VerifyError : public std::runtime_error {
 public:
  VerifyError(std::optional<ir::OpId> op, const std::string& message)
      : std::runtime_error(message), op_(op) {}
  std::optional<ir::OpId> op() const { return op_; }

 private:
  std::optional<ir::OpId> op_;
};

/// Checks the invariants above; throws VerifyError at the first violation.
void verifyGraph(const ir::Graph& graph);

}  // namespace meshflow::passes
