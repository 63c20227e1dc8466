// runtime::KernelBackend — where a device's kernels run. The executors
// (OpRunner, SpmdRunner) call runtime::runKernel, which runs an op on the
// calling thread's backend: the cpu kernels (runtime/cpu/Kernels.h) unless a
// KernelScope on that thread names another, as the cuda backend's device
// threads do (runtime/cuda/CudaKernels.h). So the executor has no `if (cuda)`.
#pragma once

#include <vector>

#include "ir/Graph.h"
#include "runtime/FusedOps.h"
#include "runtime/Tensor.h"
#include "runtime/cpu/FusedAttention.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/Kernels.h"

namespace meshflow::runtime {

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;
  /// Runs `op` as cpu::runKernel does (same contract: outputs allocated with
  /// the computed shape, in-place optimizer updates, KernelError for bad
  /// arguments), with the tensors' elements wherever this backend keeps them.
  virtual void run(const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
                   const cpu::KernelContext& ctx) = 0;
  /// Waits until every op run so far has finished (a KernelBatch's end).
  virtual void synchronize() {}
  /// Runs one strided copy (a box of one tensor into another: resharding,
  /// flat shards) where this backend keeps the elements, complete on return
  /// as runKernel's outputs are. Answers false where it has none (the caller
  /// copies on the host).
  virtual bool copy(const cpu::StridedCopy& c) {
    (void)c;
    return false;
  }
  /// Whether OpRunner offers this backend the fused groups it finds among a
  /// run's ops (runtime/FusedOps.h); the cpu kernels run every op alone.
  virtual bool fuses() const { return false; }
  /// Runs `group` as one launch: `inputs` are the group's inputs, `outputs`
  /// one per group output (null where nobody reads it; otherwise as run()'s
  /// outputs). False: declined (operands it does not take), nothing written,
  /// and the caller runs the group's ops one by one.
  virtual bool runFused(const FusedGroup& group, const std::vector<const Tensor*>& inputs,
                        std::vector<Tensor*>& outputs, const cpu::KernelContext& ctx) {
    (void)group, (void)inputs, (void)outputs, (void)ctx;
    return false;
  }
  /// A fused attention's forward and backward (runtime/AttentionGroups.h,
  /// cpu::fusedAttention's contract) where this backend keeps the elements.
  /// False: it has no kernel for them, and runAttention computes them on the
  /// host after synchronize().
  virtual bool attention(const Tensor& q, const Tensor& k, const Tensor& v, const cpu::AttentionOptions& options,
                         cpu::AttentionResult& result) {
    (void)q, (void)k, (void)v, (void)options, (void)result;
    return false;
  }
  virtual bool attentionGrad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dOut,
                             const Tensor& lse, const cpu::AttentionOptions& options, cpu::AttentionGrads& grads) {
    (void)q, (void)k, (void)v, (void)dOut, (void)lse, (void)options, (void)grads;
    return false;
  }
};

/// Makes `backend` the calling thread's kernels while the scope lives (scopes
/// nest; null: the cpu kernels).
class KernelScope {
 public:
  explicit KernelScope(KernelBackend* backend);
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
  /// The calling thread's backend; null: the cpu kernels.
  static KernelBackend* current();

 private:
  KernelBackend* previous_;
};

/// While a KernelBatch lives on a thread, that thread's backend may return
/// from runKernel before the op has finished (a GPU stream keeps its ops in
/// order), and its end waits for all of them. For a run of ops between which
/// host code reads or writes no tensor without settleKernels() first
/// (OpRunner::run, SpmdRunner::run, the optimizer's update): not their
/// results, and not a fresh tensor's elements either (a zero fill, a scalar
/// made on the host), whose block may be one a queued op still reads, freed
/// since. Outside a batch an op's outputs are complete when runKernel
/// returns. Batches nest.
class KernelBatch {
 public:
  KernelBatch();
  /// Waits for the backend (an error it reports then is dropped when an
  /// exception is already on its way: call finish() to see it).
  ~KernelBatch();
  KernelBatch(const KernelBatch&) = delete;
  KernelBatch& operator=(const KernelBatch&) = delete;
  /// Ends the batch now, waiting for its ops; throws what the backend reports.
  void finish();
  /// Whether the calling thread is inside a batch.
  static bool active();

 private:
  bool open_ = true;
};

/// Waits for the calling thread's backend (nothing without one): inside a
/// batch, before the host reads what its ops wrote or another device is
/// handed their results (a collective, a message).
void settleKernels();

/// Runs `op` on the calling thread's backend (cpu::runKernel when none is set).
void runKernel(const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
               const cpu::KernelContext& ctx);

/// A fused attention's forward and backward on the calling thread's backend,
/// else on the host (cpu::fusedAttention, cpu::fusedAttentionGrad).
cpu::AttentionResult runAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const cpu::AttentionOptions& options);
cpu::AttentionGrads runAttentionGrad(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& dOut, const Tensor& lse, const cpu::AttentionOptions& options);

/// Runs a strided copy on the calling thread's backend, else on the host
/// (cpu::runStridedCopy): the same bits either way.
void runCopy(const cpu::StridedCopy& c);

}  // namespace meshflow::runtime
