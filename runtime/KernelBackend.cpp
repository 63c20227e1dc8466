#include "runtime/KernelBackend.h"

namespace meshflow::runtime {
namespace {
thread_local KernelBackend* currentBackend = nullptr;
thread_local int batchDepth = 0;
}  // namespace

KernelScope::KernelScope(KernelBackend* backend) : previous_(currentBackend) { currentBackend = backend; }

KernelScope::~KernelScope() { currentBackend = previous_; }

KernelBackend* KernelScope::current() { return currentBackend; }

KernelBatch::KernelBatch() { ++batchDepth; }

KernelBatch::~KernelBatch() {
  if (!open_) return;
  try {
    finish();
  } catch (...) {  // an exception is already on its way (the op that failed); the next wait reports again
  }
}

void KernelBatch::finish() {
  if (!open_) return;
  open_ = false;
  if (--batchDepth == 0 && currentBackend) currentBackend->synchronize();
}

bool KernelBatch::active() { return batchDepth > 0; }

void settleKernels() {
  if (KernelBackend* backend = currentBackend) backend->synchronize();
}

void runKernel(const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
               const cpu::KernelContext& ctx) {
  if (KernelBackend* backend = currentBackend) return backend->run(op, inputs, outputs, ctx);
  cpu::runKernel(op, inputs, outputs, ctx);
}

cpu::AttentionResult runAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const cpu::AttentionOptions& options) {
  cpu::AttentionResult result;
  if (KernelBackend* backend = currentBackend) {
    if (backend->attention(q, k, v, options, result)) return result;
    backend->synchronize();  // the host reads what the backend's queued ops write
  }
  return cpu::fusedAttention(q, k, v, options);
}

cpu::AttentionGrads runAttentionGrad(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& dOut, const Tensor& lse, const cpu::AttentionOptions& options) {
  cpu::AttentionGrads grads;
  if (KernelBackend* backend = currentBackend) {
    if (backend->attentionGrad(q, k, v, dOut, lse, options, grads)) return grads;
    backend->synchronize();
  }
  return cpu::fusedAttentionGrad(q, k, v, dOut, lse, options);
}

void runCopy(const cpu::StridedCopy& c) {
  if (KernelBackend* backend = currentBackend; backend && backend->copy(c)) return;
  cpu::runStridedCopy(c);
}

}  // namespace meshflow::runtime
