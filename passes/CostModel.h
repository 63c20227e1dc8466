// The roofline cost model (shared notes, DESIGN.md "The cost model"): the time of
// an op's work on one device, collectives by passes/Collectives.h, and the memory
// a stage needs per device.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/Cluster.h"
#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "passes/FusedKernels.h"

namespace meshflow::passes {

/// The fraction of peak FLOP/s a tuned kernel sustains. Large fp16 GEMMs on
/// V100/A100 reach 60–80% of the data-sheet peak, element-wise kernels are
/// memory-bound anyway; 0.6 errs on the slow side, like Megatron's reported
/// 50–60% model FLOPs utilisation.
inline constexpr double kComputeEfficiency = 0.6;

/// Roofline: max(FLOPs / (peak · kComputeEfficiency), bytes / memory bandwidth).
double rooflineTime(double flops, double bytes, const ir::DeviceSpec& device);

/// Forward plus backward time of op `id` when `parallelism` devices share its
/// work evenly (FLOPs and bytes both divided), each half priced by the roofline
/// — a MatMul's FLOPs at the device's peak, any other op's at its vectorFlops —
/// plus the device's kernelLatency per kernel: one for the op, and for its
/// backward one per input that gets a gradient (what autodiff emits at least).
/// An element-wise op (softmax included) whose first input another op produced
/// is taken as fused into that op's kernel: it does not read that input back.
///
/// With `fused` (a device whose DeviceSpec::fusedKernels holds), an op of a
/// fused kernel moves only the bytes of its values outside the kernel, and an
/// attention kernel's matrix products do FlashAttention's work
/// (fusedProductWork).
double opComputeTime(const ir::Graph& graph, ir::OpId id, std::int64_t batch,
                     std::int64_t parallelism, const ir::DeviceSpec& device,
                     const FusedKernels* fused = nullptr);

struct MemoryOptions {
  /// Optimizer state per parameter element, in copies of the parameter: Adam keeps
  /// two (first and second moments), SGD with momentum one.
  int optimizerCopies = 2;
  /// ZeRO-like: gradients and optimizer state sharded over the parameter's
  /// gradient-synchronisation group as well as over its own spec.
  bool shardOptimizerState = false;
  /// Microbatches whose activations are held for backward at once (GPipe: all of
  /// them, 1F1B: up to the number of stages after this one).
  std::int64_t microbatchesHeld = 1;
  /// Per value of the graph: whether the backward reads it, i.e. whether the
  /// runtime keeps it from the forward to the backward (the stash,
  /// passes/StagePartition.h); the runtime frees every other value at its last
  /// use. Null: every activation counts as held. Not owned.
  const std::vector<bool>* heldForBackward = nullptr;
};

/// Per-device bytes of one stage.
struct MemoryBreakdown {
  double weights = 0;
  double gradients = 0;
  double optimizerState = 0;
  double activations = 0;

  double total() const { return weights + gradients + optimizerState + activations; }
  MemoryBreakdown& operator+=(const MemoryBreakdown& other);
};

/// Memory of one parameter of `elements` elements of `dtype` stored with `spec`,
/// whose gradient is synchronised over `syncDevices` devices (its data-parallel
/// group). Weights take the parameter's precision; optimizer state is fp32. A
/// half-precision (f16, bf16) parameter is trained in mixed precision as
/// Megatron-LM trains it: its gradient accumulates in fp32 and its optimizer
/// state adds an fp32 master copy, 18 bytes per parameter with Adam (16 in fp32).
MemoryBreakdown parameterMemory(double elements, ir::DType dtype, const ir::ShardingSpec& spec,
                                std::int64_t syncDevices, const ir::LogicalMesh& mesh,
                                const MemoryOptions& options);

/// Activation memory one op holds for backward: its outputs the backward reads
/// (options.heldForBackward; all of them without it), sharded by their specs,
/// times the microbatches held. Views (reshape), parameters and constants hold
/// nothing of their own.
double activationMemory(const ir::Graph& graph, ir::OpId id, std::int64_t batch,
                        const std::vector<ir::ShardingSpec>& outputSpecs,
                        const ir::LogicalMesh& mesh, const MemoryOptions& options);

}  // namespace meshflow::passes
