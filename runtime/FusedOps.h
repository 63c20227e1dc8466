// runtime::FusedGroup — runs of consecutive ops that a backend may run as one
// kernel launch, recognised in the op list an executor runs (OpRunner::run):
//
// - kSoftmax: [Scale] → [CausalMask] → Softmax (at least two of them): the
//   attention's probabilities from its raw scores, y = softmax(mask(x · f)).
// - kSoftmaxGrad: SoftmaxGrad → [CausalMaskGrad] → [Scale] (at least two):
//   its backward, dx = f · mask0(y · (dy − Σ y·dy)).
// - kBiasGelu: Add(x, bias) → Gelu, the bias a vector along x's last
//   dimension: z = x + bias, y = gelu(z). GeluGrad reads z, so in training z
//   is written too; only the extra pass over z is saved.
// - kElementwise: a chain of element-wise ops (Add, Sub, Mul, Div, Neg, Relu,
//   Gelu, Tanh, Sigmoid, Exp, Scale), each reading the previous one's result
//   as one operand, all results of one type (the first op's), the other
//   operands broadcasting into it: a GPT's bias add and residual add.
//
// An intermediate of a group is skipped only when the next op of the group is
// the only op of the graph that reads it and it is no graph output (a value
// another stage, the backward or the host reads is always produced); else the
// chain is cut there. A backend that fuses declares KernelBackend::fuses();
// the cpu backend does not, and cpu::runFused (runtime/cpu/FusedKernels.h) is
// the fused computation's reference on the host.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ir/Graph.h"
#include "runtime/FusedLimits.h"

namespace meshflow::runtime {

enum class FusedPattern { kSoftmax, kSoftmaxGrad, kBiasGelu, kElementwise };

const char* fusedPatternName(FusedPattern pattern);

/// One op of an element-wise chain: its kind (and Scale's factor), and for a
/// binary op its other operand — an index into FusedGroup::inputs — and
/// whether the chain's value is its right operand (Sub, Div: x − chain).
/// The first step reads inputs[0] as the chain's value.
struct ChainStep {
  ir::OpKind kind = ir::OpKind::Add;
  double factor = 1.0;
  int other = -1;  ///< -1 for a unary op.
  bool chainOnRight = false;
};

struct FusedGroup {
  FusedPattern pattern = FusedPattern::kSoftmax;
  std::size_t first = 0, count = 0;  ///< Positions in the run's op list.
  double scale = 1.0;                ///< The Scale op's factor; 1 without one.
  bool causal = false;               ///< A CausalMask (CausalMaskGrad) is in the chain.
  /// What the fused kernel reads: kSoftmax {x}; kSoftmaxGrad {y, dy};
  /// kBiasGelu {x, bias}.
  std::vector<ir::ValueId> inputs;
  /// What it writes: kSoftmax {y}; kSoftmaxGrad {dx}; kBiasGelu {z, y}.
  std::vector<ir::ValueId> outputs;
  /// Per output: read by anything but the group (skipped when false).
  std::vector<bool> live;
  /// kElementwise: the ops in order (inputs: their operands from outside the
  /// chain; outputs: the last op's result).
  std::vector<ChainStep> steps;
};

/// A Scale op's factor (1 when it has none).
double scaleFactor(const ir::Op& op);

/// Whether `kind` is an element-wise op a chain may hold (binaryOp: of two operands).
bool chainable(ir::OpKind kind);
bool binaryOp(ir::OpKind kind);

/// Which ops of a graph read each value, and which values leave it.
class ValueReaders {
 public:
  explicit ValueReaders(const ir::Graph& graph);
  /// Whether `reader` is the only op that reads `v` and `v` is no graph output.
  bool onlyReader(ir::ValueId v, ir::OpId reader) const;
  /// Whether anything but `reader` reads `v` (another op, or the caller of the graph).
  bool readBeyond(ir::ValueId v, ir::OpId reader) const { return !onlyReader(v, reader); }
  /// Whether `v` is no graph output and every op that reads it is one of `allowed`.
  bool readOnlyBy(ir::ValueId v, std::span<const ir::OpId> allowed) const;

 private:
  std::vector<std::vector<ir::OpId>> consumers_;
  std::vector<bool> graphOutput_;
};

/// The groups among `ops` (run in this order), in order, none overlapping.
std::vector<FusedGroup> findFusedGroups(const ir::Graph& graph, std::span<const ir::OpId> ops,
                                        const ValueReaders& readers);

}  // namespace meshflow::runtime
