#include "runtime/cuda/CudaKernels.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/cpu/FusedKernels.h"
#include "runtime/cuda/AttentionLaunch.h"
#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/KernelPlacement.h"
#include "runtime/cuda/OpLaunch.h"
#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {
namespace {

// The name an op's time is kept under while profiling: its kind, and for a
// matmul its operands and work too ("matmul bf16 [8, 1024, 1024] x [1024,
// 3072] 51.5 GFLOP"), so that the report says which GEMMs are slow.
std::string profiledName(const ir::Op& op, const std::vector<const Tensor*>& inputs) {
  if (op.kind != ir::OpKind::MatMul || inputs.size() != 2 || inputs[0]->rank() < 2 || inputs[1]->rank() < 2)
    return ir::opName(op.kind);
  const Tensor &a = *inputs[0], &b = *inputs[1];
  const bool ta = ir::flagAttr(op, "transpose_a"), tb = ir::flagAttr(op, "transpose_b");
  const std::int64_t m = ta ? a.dim(-1) : a.dim(-2), k = ta ? a.dim(-2) : a.dim(-1), n = tb ? b.dim(-2) : b.dim(-1);
  const double batch = static_cast<double>(shapeElements(Shape(a.shape().begin(), a.shape().end() - 2)));
  const double flops = 2.0 * batch * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return fmt::format("matmul {} {}{} x {}{} {:.1f} GFLOP", ir::dtypeName(a.dtype()), shapeText(a.shape()),
                     ta ? "^T" : "", shapeText(b.shape()), tb ? "^T" : "", flops / 1e9);
}

// Whether the GPU can read the tensor's elements in place: device, managed or
// pinned memory. Host tensors from the heap (a step's batch, made by the
// controller) are copied first.
bool gpuReadable(const Tensor& t) {
  const void* data = t.deviceData();
  if (!data) return true;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, data) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged ||
         attributes.type == cudaMemoryTypeHost;
}

// Whether `memory` hands out blocks the GPU can read and write, from one test
// allocation's address (CudaKernels asks once per memory).
bool gpuMemory(DeviceMemory& memory) {
  DeviceMemory::Block block = memory.allocate(64, MemoryCategory::kActivations);
  cudaPointerAttributes attributes{};
  const bool gpu = cudaPointerGetAttributes(&attributes, block.data) == cudaSuccess &&
                   (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged);
  (void)cudaGetLastError();
  memory.release(block, 64, MemoryCategory::kActivations);
  return gpu;
}

}  // namespace

bool fusionRequested() {
  const char* fuse = std::getenv("MESHFLOW_CUDA_FUSE");
  return !(fuse && std::string(fuse) == "0");
}

CudaKernels::CudaKernels(int gpu) : gpu_(gpu) {
  const char* profile = std::getenv("MESHFLOW_CUDA_PROFILE");
  profiling_ = profile && *profile && std::string(profile) != "0";
  fusing_ = fusionRequested();
  MESHFLOW_CUDA_CHECK(cudaSetDevice(gpu));
  cudaStream_t stream = nullptr;
  MESHFLOW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  gemm_ = std::make_unique<Gemm>(stream_);
}

CudaKernels::~CudaKernels() {
  gemm_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaKernels::settle() {
  if (!inFlight_) return;
  inFlight_ = false;
  MESHFLOW_CUDA_CHECK(cudaSetDevice(gpu_));
  MESHFLOW_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

bool CudaKernels::copy(const cpu::StridedCopy& c) {
  if (c.swapsLastTwo || c.shape.size() > static_cast<std::size_t>(kMaxRank)) return false;
  if (!gpuReadable(*c.src) || !gpuReadable(std::as_const(*c.dst))) return false;
  MESHFLOW_CUDA_CHECK(cudaSetDevice(gpu_));
  launchCopy(c, stream_);
  inFlight_ = true;
  ++gpuOps_["copy"];
  if (!KernelBatch::active()) settle();
  return true;
}

void CudaKernels::requireGpuMemory(const std::string& what) {
  // Outputs and scratch come from the thread's MemoryScope: it must be GPU
  // memory (CudaHost's managed memory), or the kernels would write to the heap.
  const auto& memory = MemoryScope::current();
  if (memory.get() != verifiedMemory_ && memory && gpuMemory(*memory)) verifiedMemory_ = memory.get();
  if (!memory || memory.get() != verifiedMemory_)
    throw std::logic_error(fmt::format("{} on CUDA device {}: the thread's tensors are not in GPU memory (run it "
                                       "under a MemoryScope of the cuda backend's memory)",
                                       what, gpu_));
}

std::vector<const Tensor*> CudaKernels::readableInputs(const std::vector<const Tensor*>& inputs,
                                                       std::vector<Tensor>& staged) {
  staged.reserve(inputs.size());  // the pointers below stay valid
  std::vector<const Tensor*> readable;
  for (const Tensor* t : inputs) {
    if (gpuReadable(*t)) {
      readable.push_back(t);
    } else {
      settle();  // the copy is written on the host, maybe into a block an op in flight still reads
      staged.push_back(t->clone());
      readable.push_back(&staged.back());
    }
  }
  return readable;
}

template <class Launch>
void CudaKernels::onGpu(const std::string& name, Launch launch) {
  if (profiling_) settle();
  const auto started = std::chrono::steady_clock::now();
  requireGpuMemory(name);
  ++gpuOps_[name];
  MESHFLOW_CUDA_CHECK(cudaSetDevice(gpu_));
  try {
    launch();
  } catch (...) {
    (void)cudaStreamSynchronize(stream_);  // what was launched finishes before its tensors go
    inFlight_ = false;
    throw;
  }
  inFlight_ = true;
  if (profiling_) {
    settle();
    gpuSeconds_[name] += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  if (!KernelBatch::active()) settle();
}

void CudaKernels::run(const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
                      const cpu::KernelContext& ctx) {
  if (readsOnHost(op.kind)) settle();  // before placementOf too: it reads an update's scale
  if (placementOf(op, inputs, outputs) == Placement::kHost) {
    settle();
    const auto started = std::chrono::steady_clock::now();
    ++hostOps_[ir::opName(op.kind)];
    cpu::runKernel(op, inputs, outputs, ctx);
    if (profiling_)
      hostSeconds_[ir::opName(op.kind)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return;
  }
  std::vector<Tensor> staged;
  std::vector<Tensor> scratch;
  const OperandPath path = operandPathOf(op, inputs, outputs);
  if (path == OperandPath::kWidened) ++widenedOps_[ir::opName(op.kind)];
  onGpu(profiling_ ? profiledName(op, inputs) : ir::opName(op.kind), [&] {
    launchOp(op, readableInputs(inputs, staged), outputs, ctx, {stream_, gemm_.get()}, scratch, path);
  });
  // Staged copies and scratch go back to the allocator's cache when this
  // returns: only ops later on this stream can reuse their blocks, or host
  // code after a wait. Outside a batch, onGpu waited: the caller reads the outputs next.
}

bool CudaKernels::runFused(const FusedGroup& group, const std::vector<const Tensor*>& inputs,
                           std::vector<Tensor*>& outputs, const cpu::KernelContext& ctx) {
  (void)ctx;
  const auto walkable = [](const Tensor* t) { return t->rank() <= static_cast<std::size_t>(kMaxRank); };
  if (!fusing_ || !cpu::fusable(group, inputs) || !std::all_of(inputs.begin(), inputs.end(), walkable))
    return false;
  std::vector<Tensor> staged;
  onGpu(fusedPatternName(group.pattern), [&] {
    launchFused(group, readableInputs(inputs, staged), outputs, {stream_, gemm_.get()});
  });
  return true;
}

bool CudaKernels::attention(const Tensor& q, const Tensor& k, const Tensor& v, const cpu::AttentionOptions& options,
                            cpu::AttentionResult& result) {
  constexpr const char* kName = "fused_attention";
  const std::optional<AttentionSizes> sizes = attentionSizes(q, k, v, options);
  if (!sizes) {
    ++hostOps_[kName];
    return false;
  }
  std::vector<Tensor> staged;
  onGpu(kName, [&] {
    const std::vector<const Tensor*> in = readableInputs({&q, &k, &v}, staged);
    launchAttention(*in[0], *in[1], *in[2], *sizes, result, stream_);
  });
  return true;
}

bool CudaKernels::attentionGrad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dOut,
                                const Tensor& lse, const cpu::AttentionOptions& options, cpu::AttentionGrads& grads) {
  constexpr const char* kName = "fused_attention_grad";
  const std::optional<AttentionSizes> sizes = attentionGradSizes(q, k, v, dOut, lse, options);
  if (!sizes) {
    ++hostOps_[kName];
    return false;
  }
  std::vector<Tensor> staged;
  onGpu(kName, [&] {
    const std::vector<const Tensor*> in = readableInputs({&q, &k, &v, &dOut, &lse}, staged);
    launchAttentionGrad(*in[0], *in[1], *in[2], *in[3], *in[4], *sizes, grads, stream_);
  });
  return true;
}

}  // namespace meshflow::runtime::cuda
