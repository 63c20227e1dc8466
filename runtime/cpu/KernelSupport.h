// Private to runtime/cpu: the argument bundle every kernel receives, attribute
// and shape helpers, and one declaration per kernel (defined in the family
// files, dispatched from Kernels.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/cpu/Kernels.h"

namespace meshflow::runtime::cpu {

class KernelArgs {
 public:
  KernelArgs(const ir::Op& op, const std::vector<const Tensor*>& inputs,
             std::vector<Tensor*>& outputs, const KernelContext& ctx)
      : op(op), ctx(ctx), inputs_(inputs), outputs_(outputs) {}

  const ir::Op& op;
  const KernelContext& ctx;

  [[noreturn]] void fail(const std::string& message) const;
  /// Fails unless the op has exactly `inputs` inputs and `outputs` outputs.
  void expectArity(std::size_t inputs, std::size_t outputs) const;
  std::size_t inputCount() const { return inputs_.size(); }
  std::size_t outputCount() const { return outputs_.size(); }

  const Tensor& in(std::size_t i) const;
  /// Input `i`, which must be f32 (i32).
  const Tensor& f32(std::size_t i) const;
  const Tensor& i32(std::size_t i) const;
  /// Output `i` with `dtype` and `shape`: allocated if it is not yet, checked if it is.
  Tensor& out(std::size_t i, ir::DType dtype, const Shape& shape) const;
  Tensor& outF32(std::size_t i, const Shape& shape) const { return out(i, ir::DType::F32, shape); }
  /// Output `i` as given (may be unallocated).
  Tensor& rawOut(std::size_t i) const;

  bool hasAttr(const std::string& name) const { return op.attrs.count(name) != 0; }
  std::int64_t intAttr(const std::string& name, std::optional<std::int64_t> fallback = {}) const;
  /// Accepts an integer attribute too (`factor: 2`).
  double doubleAttr(const std::string& name, std::optional<double> fallback = {}) const;
  std::vector<std::int64_t> intsAttr(const std::string& name) const;
  /// `axis` in [-rank, rank) normalised to [0, rank).
  std::size_t axis(std::int64_t axis, std::size_t rank) const;

 private:
  const std::vector<const Tensor*>& inputs_;
  std::vector<Tensor*>& outputs_;
};

/// Calls f(i, offsetA, offsetB) for every element i (row-major) of `shape`,
/// where offsetX = Σ index[d] · stridesX[d]. Strides of 0 broadcast or gather;
/// both stride vectors have rank(shape) entries.
template <class F>
void walk(const Shape& shape, const std::vector<std::int64_t>& stridesA,
          const std::vector<std::int64_t>& stridesB, F&& f) {
  std::int64_t total = shapeElements(shape);
  if (total == 0) return;
  std::size_t rank = shape.size();
  if (rank == 0) {
    f(std::int64_t{0}, std::int64_t{0}, std::int64_t{0});
    return;
  }
  std::vector<std::int64_t> index(rank, 0);
  std::int64_t offA = 0, offB = 0;
  std::int64_t inner = shape[rank - 1], sa = stridesA[rank - 1], sb = stridesB[rank - 1];
  for (std::int64_t i = 0; i < total;) {
    for (std::int64_t j = 0; j < inner; ++j, ++i) f(i, offA + j * sa, offB + j * sb);
    // Carry into the outer dimensions.
    for (std::size_t d = rank - 1; d-- > 0;) {
      ++index[d];
      offA += stridesA[d];
      offB += stridesB[d];
      if (index[d] < shape[d]) break;
      offA -= stridesA[d] * shape[d];
      offB -= stridesB[d] * shape[d];
      index[d] = 0;
    }
  }
}

/// The NumPy broadcast of two shapes (trailing-aligned), or nullopt.
std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b);
/// Strides that read a tensor of `shape` while walking `target` (trailing-aligned;
/// dimensions of size 1 in `shape`, and missing leading ones, get stride 0).
std::vector<std::int64_t> broadcastStrides(const Shape& shape, const Shape& target);
/// The shape without axis `axis`.
Shape dropAxis(Shape shape, std::size_t axis);

// ---- kernels, one per op kind (the family file is named in brackets) ----
// [MatMulKernels]
void matMul(const KernelArgs& a);
// [ElementwiseKernels]
void constant(const KernelArgs& a);
void binary(const KernelArgs& a);     // Add, Sub, Mul, Div
void unary(const KernelArgs& a);      // Neg, Relu, Gelu, Tanh, Sigmoid, Exp, Scale
void unaryGrad(const KernelArgs& a);  // ReluGrad, GeluGrad, TanhGrad, SigmoidGrad
void dropout(const KernelArgs& a);
void dropoutGrad(const KernelArgs& a);
// [NormKernels]
void softmax(const KernelArgs& a);
void softmaxGrad(const KernelArgs& a);
void layerNorm(const KernelArgs& a);
void layerNormGrad(const KernelArgs& a);
// [EmbeddingKernels]
void embedding(const KernelArgs& a);
void embeddingGrad(const KernelArgs& a);
// [LossKernels]
void crossEntropy(const KernelArgs& a);
void crossEntropyGrad(const KernelArgs& a);
// [ShapeKernels]
/// One copy a layout op makes, in elements: dst[dstBase + Σ i·dstStrides] =
/// src[srcBase + Σ i·srcStrides] for every index i of `shape`.
struct StridedCopy {
  const Tensor* src = nullptr;
  Tensor* dst = nullptr;
  Shape shape;
  std::vector<std::int64_t> srcStrides, dstStrides;
  std::int64_t srcBase = 0, dstBase = 0;
  bool swapsLastTwo = false;  ///< A transpose of the last two axes of whole matrices.
};

/// The layout ops (Transpose, Concat, Split, SplitHeads, MergeHeads): their
/// arguments checked, their outputs allocated with the inputs' dtype, and the
/// copies that fill them — run on the host by the cpu kernels below and on a
/// GPU by the cuda backend. LayoutCopies.cpp.
bool isLayoutOp(ir::OpKind kind);
std::vector<StridedCopy> layoutCopies(const KernelArgs& args);
/// Runs one copy on the host (the dtype of src, which dst must share).
void runStridedCopy(const StridedCopy& c);

void reshape(const KernelArgs& a);
void transpose(const KernelArgs& a);
void concat(const KernelArgs& a);
void split(const KernelArgs& a);
void splitHeads(const KernelArgs& a);
void mergeHeads(const KernelArgs& a);
void select(const KernelArgs& a);
void selectGrad(const KernelArgs& a);
// [ReduceKernels]
void reduce(const KernelArgs& a);  // Sum, Mean
void reduceToShape(const KernelArgs& a);
void broadcastTo(const KernelArgs& a);
/// Sum, Mean and ReduceToShape as one sum: dst[Σ i·dstStrides] += src[i] for
/// every index i of src (row-major; dstStrides 0 along the summed axes),
/// accumulated in double in that order, then dst · factor. The checks of the
/// kernels above; dst allocated (in the caller's float type, else src's). Run
/// on the host by them (on f32, widened) and on a GPU by the cuda backend
/// (src and dst of any float type, as they are stored).
struct SumPlan {
  const Tensor* src = nullptr;
  Tensor* dst = nullptr;
  std::vector<std::int64_t> dstStrides;
  double factor = 1.0;
};
SumPlan sumPlan(const KernelArgs& args);
/// BroadcastTo as a copy: y (like's shape, x's float type) from x read with
/// 0 strides along the broadcast axes.
StridedCopy broadcastCopy(const KernelArgs& args);
// [AttentionKernels]
void causalMask(const KernelArgs& a);  // CausalMask and CausalMaskGrad
// [MoeKernels]
void topKGate(const KernelArgs& a);
void topKGateGrad(const KernelArgs& a);
void moeDispatch(const KernelArgs& a);
void moeCombine(const KernelArgs& a);
void moeDropped(const KernelArgs& a);
void moeDispatchGrad(const KernelArgs& a);
void moeCombineGrad(const KernelArgs& a);
// [OptimizerKernels]
void globalNorm(const KernelArgs& a);
void clipScale(const KernelArgs& a);
void sgdUpdate(const KernelArgs& a);
void adamUpdate(const KernelArgs& a);
void unscaleAndClip(const KernelArgs& a);
void lossScaleUpdate(const KernelArgs& a);

// ---- half precision (HalfPrecision.cpp) ----

/// Whether an input, or an output that already has its dtype, is f16 or bf16.
bool hasHalfOperand(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs);
/// Runs the f32 `kernel` on f32 copies of the half inputs and rounds each
/// output to its dtype (the caller's placeholder's, else the op's).
void runWidened(void (*kernel)(const KernelArgs&), const ir::Op& op, const std::vector<const Tensor*>& inputs,
                std::vector<Tensor*>& outputs, const KernelContext& ctx);
/// runWidened with another kernel and another conversion (the cuda backend's,
/// on its GPU): `convert` returns its tensor in the dtype asked for.
using FloatConversion = std::function<Tensor(const Tensor&, ir::DType)>;
void runWidenedWith(const std::function<void(const KernelArgs&)>& kernel, const FloatConversion& convert,
                    const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
                    const KernelContext& ctx);
void cast(const KernelArgs& args);
/// Cast's checks: the float dtype it converts to.
ir::DType castTarget(const KernelArgs& args);

}  // namespace meshflow::runtime::cpu
