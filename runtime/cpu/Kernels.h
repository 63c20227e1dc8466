// The fp32 CPU kernels: one entry point, runKernel, that executes any op of
// the IR (forward, backward and optimizer update) on host tensors, exactly as
// the OpKind comments of ir/Graph.h define it.
//
// Every kernel is deterministic: reductions run in a fixed order (row-major
// element order, inputs in order), accumulating in double where a reduction
// produces few values (softmax and layer-norm rows, losses, norms, Sum/Mean,
// ReduceToShape) and in float where it scatters into a large table
// (EmbeddingGrad). MatMul runs one single-threaded sgemm (Sgemm.h: meshflow's
// own AVX-512 kernel, whose sums depend on k alone, or OpenBLAS on one thread),
// which is deterministic for a given shape.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "runtime/Tensor.h"

namespace meshflow::runtime::cpu {

/// What a kernel needs to know beyond its op and tensors.
struct KernelContext {
  /// The training step, 1-based (the first step is 1). Dropout masks hash it;
  /// AdamUpdate uses it as t in the bias corrections 1 - beta^t, and so is
  /// given the optimizer's step there (optimizerStep below). The op's
  /// `step` attribute is not read: a training graph is built once and run
  /// for every step, so the step is a property of the run, not of the graph.
  std::int64_t step = 1;
  /// The id of the op being run in its graph. Dropout hashes it into its mask
  /// (DropoutGrad hashes its `forward_op` attribute instead), so two dropout
  /// ops with one seed draw different masks.
  ir::OpId opIndex = 0;
  /// Dropout: the index, in the whole batch's tensor, of this tensor's first
  /// element. A microbatch or a replica's share runs with the index of its
  /// first sample times the elements per sample, so it draws the serial run's
  /// mask for its rows (dropoutElementOffset in runtime/parallel/OpRunner.h).
  std::uint64_t elementOffset = 0;
};

/// The optimizer's step at training step `step`: the updates made so far,
/// plus one. A step that dynamic loss scaling skipped (counted in `state`'s
/// `loss_scale.counts`, second element) made none, so it does not advance
/// Adam's t — as PyTorch's GradScaler skips optimizer.step(). Without loss
/// scaling, `step` itself.
std::int64_t optimizerStep(const std::map<std::string, Tensor>& state, std::int64_t step);

/// A kernel's inputs or attributes do not fit its op's contract (wrong count,
/// dtype or shape, an out-of-range id or label, a missing attribute). The
/// executor adds the op index, kind and scope.
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Runs `op` on `inputs` (in the op's input order) into `outputs` (in its output
/// order). An unallocated output is allocated with the shape the kernel
/// computes; an allocated one must already have that dtype and shape (Reshape
/// takes its shape from an allocated output, since its `shape` attribute cannot
/// name the symbolic batch). Every kernel writes each element of its outputs
/// and never reads what they held, so callers may pass outputs allocated with
/// Tensor::uninitialized. SgdUpdate and AdamUpdate may also run in place: output
/// j the very tensor given as input 0, 3 or 4 (each element is read and
/// written at one index); the caller gives those tensors storage of their own
/// first, since the kernel reads the input before writing (and so unsharing)
/// the output. Input, Parameter: throw — the executor binds them.
/// MatMul runs on the calling thread alone (OpenBLAS, where it is used, is
/// limited to one thread): each virtual device is one CPU thread, and a
/// single-threaded sgemm is the same computation on every run.
void runKernel(const ir::Op& op, const std::vector<const Tensor*>& inputs,
               std::vector<Tensor*>& outputs, const KernelContext& ctx);

/// The (token, expert) choices MoeDispatch op `dispatch` drops past its
/// experts' capacity when it routes `gates` (its second input): the
/// moe_dropped kernel on the same capacity. Executors count them per step.
double droppedChoices(const ir::Op& dispatch, const Tensor& gates);

/// The dropout keep decision for element `index` (row-major, over the whole
/// logical tensor) of the dropout op `opIndex` at `step`: a counter-based hash of
/// (seed, opIndex, step, index) mapped to u in [0, 1), kept when u >= p. A
/// sharded executor must pass global element indices to draw the serial mask.
bool dropoutKeep(std::uint64_t seed, std::uint64_t opIndex, std::int64_t step, std::uint64_t index,
                 double p);

}  // namespace meshflow::runtime::cpu
