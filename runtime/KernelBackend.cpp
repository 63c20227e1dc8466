#include "runtime/KernelBackend.h"

namespace meshflow::runtime {
namespace {
thread_local KernelBackend* currentBackend = nullptr;
}  // namespace

KernelScope::KernelScope(KernelBackend* backend) : previous_(currentBackend) { currentBackend = backend; }

KernelScope::~KernelScope() { currentBackend = previous_; }

KernelBackend* KernelScope::current() { return currentBackend; }

void runKernel(const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
               const cpu::KernelContext& ctx) {
  if (KernelBackend* backend = currentBackend) return backend->run(op, inputs, outputs, ctx);
  cpu::runKernel(op, inputs, outputs, ctx);
}

}  // namespace meshflow::runtime
