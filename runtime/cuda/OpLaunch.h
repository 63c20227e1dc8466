// Launches one graph op's CUDA kernels (or cuBLAS GEMM) on a stream, after
// the cpu kernel's argument checks through cpu::KernelArgs: the same errors,
// outputs allocated (from the current MemoryScope) with the shapes the cpu
// kernel computes. Only for ops KernelPlacement.h puts on the GPU, with
// inputs whose elements the GPU can read. Private to runtime/cuda.
#pragma once

#include "runtime/FusedOps.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cuda/OperandPath.h"
#include "runtime/cuda/TrainingKernels.h"

struct CUstream_st;

namespace meshflow::runtime::cuda {

class Gemm;

struct GpuContext {
  CUstream_st* stream = nullptr;
  Gemm* gemm = nullptr;  ///< On `stream`.
};

/// Whether launching `kind` reads tensor elements on the host first (ids and
/// labels checked against their bounds, an update's scale): the stream must
/// have finished what produced them.
bool readsOnHost(ir::OpKind kind);

/// How a tensor of `dtype` (a float type) stores its elements.
FloatFormat formatOf(ir::DType dtype);
/// The kernels' names for the element-wise ops (Add, Sub, Mul, Div; Neg,
/// Relu, Gelu, Tanh, Sigmoid, Exp, Scale).
BinaryKind binaryKind(ir::OpKind kind);
UnaryKind unaryKind(ir::OpKind kind);

/// Enqueues a fused group (FusedLaunch.cpp) on operands cpu::fusable takes,
/// each in memory the GPU reads; allocates the non-null outputs from the
/// current MemoryScope in the inputs' type.
void launchFused(const FusedGroup& group, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
                 const GpuContext& gpu);

/// Enqueues the op; returns before it has run. Scratch tensors it needs are
/// added to `scratch`, which must live until the stream has finished. `path`
/// is operandPathOf(op, inputs, outputs) (OperandPath.h): kAsStored, the
/// kernels read and write every operand in its own type; kWidened, half
/// operands are widened to f32 copies on the GPU around the f32 kernel and
/// its results rounded there (as cpu::runWidened does on the host).
void launchOp(const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
              const cpu::KernelContext& ctx, const GpuContext& gpu, std::vector<Tensor>& scratch, OperandPath path);

/// Enqueues one strided copy (a layout op's, or the runtime's box copies:
/// KernelBackend::copy) on `stream`. Throws std::invalid_argument past the
/// GPU's largest rank.
void launchCopy(const cpu::StridedCopy& c, CUstream_st* stream);

}  // namespace meshflow::runtime::cuda
