// runtime::KernelBackend — where a device's kernels run. The executors
// (OpRunner, SpmdRunner) call runtime::runKernel, which runs an op on the
// calling thread's backend: the cpu kernels (runtime/cpu/Kernels.h) unless a
// KernelScope on that thread names another, as the cuda backend's device
// threads do (runtime/cuda/CudaKernels.h). So the executor has no `if (cuda)`.
#pragma once

#include <vector>

#include "ir/Graph.h"
#include "runtime/Tensor.h"
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

/// Runs `op` on the calling thread's backend (cpu::runKernel when none is set).
void runKernel(const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
               const cpu::KernelContext& ctx);

}  // namespace meshflow::runtime
