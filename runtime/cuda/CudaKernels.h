// The cuda backend's KernelBackend (runtime/KernelBackend.h): one per virtual
// device, with its own CUDA stream and cuBLAS handle on its GPU. A device
// thread that holds a KernelScope of it runs the ops KernelPlacement.h puts on
// the GPU with the CUDA kernels (Kernels.h, TrainingKernels.h) and cuBLAS
// (Gemm.h), and the others with the cpu kernels on the host; its tensors live
// in CUDA managed memory (CudaHost.h), which both can read.
//
// Every op checks its arguments as the cpu kernel does (cpu::KernelArgs, the
// same errors) and is launched on the stream. Outside a KernelBatch it waits
// for the stream before returning, so that whatever reads the tensors next (a
// host-side kernel, the executor's gradient sums, the communicator's copies)
// sees them complete; inside one (OpRunner::run: a stage's forward or
// backward) the ops stay in flight until the batch ends, and the backend
// waits first only where it reads elements on the host itself (an op it runs
// on the host, inputs it stages, ids and labels it checks).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "runtime/KernelBackend.h"

struct CUstream_st;

namespace meshflow::runtime::cuda {

class Gemm;

/// Whether MESHFLOW_CUDA_FUSE lets the backend fuse (anything but "0"): the
/// fused groups (CudaKernels::fuses) and the fused attention (CudaHost and
/// GpuProcessHost's fusesAttention).
bool fusionRequested();

class CudaKernels final : public KernelBackend {
 public:
  /// Kernels on CUDA device `gpu` (cudaSetDevice's number). Throws CudaError
  /// when it does not exist.
  explicit CudaKernels(int gpu);
  ~CudaKernels() override;
  CudaKernels(const CudaKernels&) = delete;
  CudaKernels& operator=(const CudaKernels&) = delete;

  void run(const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
           const cpu::KernelContext& ctx) override;

  void synchronize() override { settle(); }
  /// A strided copy between tensors the GPU holds, on the stream (counted as
  /// the op kind "copy"); false for a tensor it cannot read, a transpose of
  /// whole matrices or a rank past its largest (the host copies those).
  bool copy(const cpu::StridedCopy& c) override;

  /// Fused groups (runtime/FusedOps.h) run as one launch each, unless
  /// MESHFLOW_CUDA_FUSE=0 (read when the kernels are made) turns that off.
  bool fuses() const override { return fusing_; }
  /// Declines groups whose operands cpu::fusable does not take or of rank
  /// over kMaxRank; stages host inputs as run() does.
  bool runFused(const FusedGroup& group, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
                const cpu::KernelContext& ctx) override;

  /// A fused attention's forward and backward with the kernels of
  /// AttentionKernels.h (counted as fused_attention, fused_attention_grad);
  /// false — counted as a host op of that name, and runtime::runAttention
  /// runs cpu::fusedAttention on the host — for a head dimension over
  /// kMaxAttentionHeadDim or operands the cpu reference rejects (it names them).
  bool attention(const Tensor& q, const Tensor& k, const Tensor& v, const cpu::AttentionOptions& options,
                 cpu::AttentionResult& result) override;
  bool attentionGrad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dOut, const Tensor& lse,
                     const cpu::AttentionOptions& options, cpu::AttentionGrads& grads) override;

  /// How many ops of each kind ran on the GPU and on the host so far (a fused
  /// group counts once, under its pattern's name: fused_softmax, …), and how
  /// many of the GPU's widened half operands to f32 copies (OperandPath.h).
  const std::map<std::string, std::int64_t>& gpuOps() const { return gpuOps_; }
  const std::map<std::string, std::int64_t>& hostOps() const { return hostOps_; }
  const std::map<std::string, std::int64_t>& widenedOps() const { return widenedOps_; }

  /// With profiling on (MESHFLOW_CUDA_PROFILE, read when the kernels are
  /// made), every op is waited for and timed: seconds per op kind, on the GPU
  /// and on the host. Slower than a plain run (no op stays in flight), but it
  /// says which kinds of op a step's time goes to.
  bool profiling() const { return profiling_; }
  const std::map<std::string, double>& gpuSeconds() const { return gpuSeconds_; }
  const std::map<std::string, double>& hostSeconds() const { return hostSeconds_; }
  int gpu() const { return gpu_; }
  /// The stream its kernels run on (NCCL's collectives join it).
  CUstream_st* stream() const { return stream_; }

 private:
  /// Waits for the stream if ops are in flight.
  void settle();
  /// `inputs`, each in memory the GPU reads: a copy in `staged` (GPU memory)
  /// of a tensor in host memory (a step's batch).
  std::vector<const Tensor*> readableInputs(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& staged);
  /// Throws unless the thread's MemoryScope hands out GPU memory (`what` names the op).
  void requireGpuMemory(const std::string& what);
  /// Counts, launches and (profiling) times the GPU work `launch` enqueues
  /// under `name`; outside a KernelBatch waits for it.
  template <class Launch>
  void onGpu(const std::string& name, Launch launch);

  int gpu_;
  CUstream_st* stream_ = nullptr;
  bool inFlight_ = false;  ///< Ops launched since the stream was last waited for.
  std::unique_ptr<Gemm> gemm_;
  std::map<std::string, std::int64_t> gpuOps_, hostOps_, widenedOps_;
  bool profiling_ = false;
  bool fusing_ = true;
  std::map<std::string, double> gpuSeconds_, hostSeconds_;
  const DeviceMemory* verifiedMemory_ = nullptr;  // the last MemoryScope found to be GPU memory
};

}  // namespace meshflow::runtime::cuda
