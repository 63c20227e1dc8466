// What each op of the graph IR costs: FLOPs and bytes of memory traffic, for
// the op itself and, for a forward op, for the backward autodiff makes of it.
// The planner's roofline cost model and `meshflow dump` read these.
//
// Conventions (docs/graph-ir.md lists every op):
// - A multiply-add is 2 FLOPs: matmul [m, k] x [k, n] is 2·m·k·n FLOPs, and its
//   backward (one matmul for each input's gradient) is twice that.
// - Elementwise ops count FLOPs per output element: 1 per add, multiply,
//   compare or transcendental (exp, tanh, sqrt each count 1); gelu 9, layer_norm
//   7, softmax 5 per element, and so on in the table in OpCost.cpp.
// - Data movement (reshape, transpose, concat, split, gathers) is 0 FLOPs.
// - Bytes read are the elements of the inputs an op touches times their dtype
//   size, bytes written those of its outputs. Reshape is a view: no bytes.
// - A forward op's backward reads the op's inputs and its outputs' gradients,
//   and writes a gradient for each floating input (ops that only move data read
//   the output gradient and write the input gradient).
// - Counts are doubles: a step of a large model exceeds 2^63 FLOPs.
#pragma once

#include <cstdint>

#include "ir/Graph.h"

namespace meshflow::ir {

struct OpCost {
  double flops = 0;
  double bytesRead = 0;
  double bytesWritten = 0;
  /// Forward ops only (zero for backward and update ops): the cost of the
  /// backward ops autodiff emits for this op, all input gradients included.
  double backwardFlops = 0;
  double backwardBytesRead = 0;
  double backwardBytesWritten = 0;

  double bytes() const { return bytesRead + bytesWritten; }
  double backwardBytes() const { return backwardBytesRead + backwardBytesWritten; }
  OpCost& operator+=(const OpCost& other);
};

/// The cost of op `id` with the symbolic batch bound to `batch`.
OpCost opCost(const Graph& graph, OpId id, std::int64_t batch);

/// The sum of opCost over every op of the graph.
OpCost graphCost(const Graph& graph, std::int64_t batch);

/// The number of trainable scalars: the elements of every Parameter op's value.
std::int64_t parameterCount(const Graph& graph);

}  // namespace meshflow::ir
