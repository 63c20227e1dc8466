#include "runtime/cuda/OpLaunch.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/LayoutKernels.h"
#include "runtime/cuda/PositionGroups.h"
#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {
namespace {

using cpu::KernelArgs;
using K = ir::OpKind;

bool isFloat(ir::DType dtype) { return dtype == ir::DType::F32 || dtype == ir::DType::F16 || dtype == ir::DType::BF16; }

// The elements where kernels read and write them (Tensor::deviceData: the
// block, not the host's copy, of a tensor in device-only memory).
void requireType(const Tensor& t, ir::DType dtype) {
  if (t.dtype() != dtype)
    throw std::logic_error(fmt::format("{} kernel operand of a {} tensor", ir::dtypeName(dtype), t.typeText()));
}
const float* in(const Tensor& t) {
  requireType(t, ir::DType::F32);
  return static_cast<const float*>(t.deviceData());
}
float* out(Tensor& t) {
  requireType(t, ir::DType::F32);
  return static_cast<float*>(t.deviceData());
}
const std::int32_t* ids(const Tensor& t) {
  requireType(t, ir::DType::I32);
  return static_cast<const std::int32_t*>(t.deviceData());
}

// Device scratch of `count` doubles, alive until the op is enqueued (later ops
// on the stream may reuse its block; host code only after a wait).
double* scratchDoubles(std::vector<Tensor>& scratch, std::int64_t count) {
  scratch.push_back(Tensor::uninitialized(ir::DType::F32, {2 * std::max<std::int64_t>(count, 1)}));
  return static_cast<double*>(scratch.back().deviceData());
}

void expectSameShape(const KernelArgs& a, const Tensor& x, const Tensor& y) {
  if (x.shape() != y.shape()) a.fail(fmt::format("shapes differ: {} and {}", x.typeText(), y.typeText()));
}

struct Rows {
  std::int64_t count = 0, width = 0;
};

Rows rowsOf(const KernelArgs& a, const Tensor& x) {
  if (x.rank() == 0) a.fail("needs a tensor of rank 1 or more, got " + x.typeText());
  const std::int64_t width = x.dim(-1);
  return {width == 0 ? 0 : x.elements() / width, width};
}

void expectVector(const KernelArgs& a, const Tensor& v, std::int64_t n, const char* what) {
  if (v.shape() != Shape{n})
    a.fail(fmt::format("{} must be {}[{}], got {}", what, ir::dtypeName(a.in(0).dtype()), n, v.typeText()));
}

float scalarOf(const KernelArgs& a, std::size_t i, const char* what) {
  const Tensor& t = a.f32(i);
  if (t.elements() != 1) a.fail(fmt::format("{} must be a scalar, got {}", what, t.typeText()));
  return t.f32()[0];
}

GemmType gemmType(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::BF16: return GemmType::kBF16;
    case ir::DType::F16: return GemmType::kF16;
    default: return GemmType::kF32;
  }
}

// The cpu matmul kernel's shapes (runtime/cpu/MatMulKernels.cpp), on cuBLAS.
void matMul(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(2, 1);
  const Tensor& x = a.in(0);
  const Tensor& w = a.in(1);
  const bool ta = a.intAttr("transpose_a", 0) != 0, tb = a.intAttr("transpose_b", 0) != 0;
  if (x.rank() < 2 || w.rank() < 2)
    a.fail(fmt::format("needs operands of rank 2 or more, got {} and {}", x.typeText(), w.typeText()));
  GemmShape s;
  s.transA = ta;
  s.transB = tb;
  s.m = ta ? x.dim(-1) : x.dim(-2);
  s.k = ta ? x.dim(-2) : x.dim(-1);
  s.n = tb ? w.dim(-2) : w.dim(-1);
  if ((tb ? w.dim(-1) : w.dim(-2)) != s.k)
    a.fail(fmt::format("contracting dimensions differ: {} x {}{}{}", x.typeText(), w.typeText(),
                       ta ? " (a transposed)" : "", tb ? " (b transposed)" : ""));
  Shape batch(x.shape().begin(), x.shape().end() - 2);
  s.sharedB = w.rank() == 2;
  if (!s.sharedB && Shape(w.shape().begin(), w.shape().end() - 2) != batch)
    a.fail(fmt::format("batch dimensions differ: {} x {}", x.typeText(), w.typeText()));
  Shape yShape = batch;
  yShape.push_back(s.m);
  yShape.push_back(s.n);
  // y in the operands' type, or in f32 where the caller asks (a half model's
  // weight gradients, ir::kF32Outputs).
  const Tensor& given = a.rawOut(0);
  const bool wide = (given.allocated() || given.isPlaceholder()) && given.dtype() == ir::DType::F32;
  Tensor& y = a.out(0, wide ? ir::DType::F32 : x.dtype(), yShape);
  s.batch = shapeElements(batch);
  if (s.batch == 0) return;
  gpu.gemm->run(s, gemmType(x.dtype()), gemmType(y.dtype()), x.deviceData(), w.deviceData(), y.deviceData());
}

// Input i of an op on one element type (element-wise ops, softmax, layer
// norm): f32, or the one half type of all its operands (launchOp sends those
// here as stored).
const Tensor& elements(const KernelArgs& a, std::size_t i) {
  const Tensor& t = a.in(i);
  const ir::DType dtype = a.in(0).dtype();
  if (dtype == ir::DType::F32 || !isFloat(dtype)) return a.f32(i);  // the cpu kernel's own message
  if (t.dtype() != dtype)
    a.fail(fmt::format("input {} must be {} as input 0 is, got {}", i, ir::dtypeName(dtype), t.typeText()));
  return t;
}

void binary(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(2, 1);
  const Tensor& x = elements(a, 0);
  const Tensor& z = elements(a, 1);
  auto shape = cpu::broadcastShapes(x.shape(), z.shape());
  if (!shape) a.fail(fmt::format("cannot broadcast {} with {}", x.typeText(), z.typeText()));
  Tensor& y = a.out(0, x.dtype(), *shape);
  BroadcastIndex index;
  index.rank = static_cast<int>(shape->size());
  auto sa = cpu::broadcastStrides(x.shape(), *shape);
  auto sb = cpu::broadcastStrides(z.shape(), *shape);
  for (std::size_t d = 0; d < shape->size(); ++d) {
    index.shape[d] = (*shape)[d];
    index.stridesA[d] = sa[d];
    index.stridesB[d] = sb[d];
  }
  broadcastBinary(binaryKind(a.op.kind), formatOf(x.dtype()), x.deviceData(), z.deviceData(), y.deviceData(), index, gpu.stream);
}

void unaryOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(1, 1);
  const Tensor& x = elements(a, 0);
  const float factor = a.op.kind == K::Scale ? static_cast<float>(a.doubleAttr("factor")) : 1.0f;
  Tensor& y = a.out(0, x.dtype(), x.shape());
  unary(unaryKind(a.op.kind), formatOf(x.dtype()), x.deviceData(), y.deviceData(), x.elements(), factor, gpu.stream);
}

void unaryGradOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(2, 1);
  const Tensor& v = elements(a, 0);
  const Tensor& dy = elements(a, 1);
  expectSameShape(a, v, dy);
  Tensor& dx = a.out(0, v.dtype(), v.shape());
  const UnaryGradKind kind = a.op.kind == K::ReluGrad   ? UnaryGradKind::kRelu
                             : a.op.kind == K::GeluGrad ? UnaryGradKind::kGelu
                             : a.op.kind == K::TanhGrad ? UnaryGradKind::kTanh
                                                        : UnaryGradKind::kSigmoid;
  unaryGrad(kind, formatOf(v.dtype()), v.deviceData(), dy.deviceData(), dx.deviceData(), v.elements(), gpu.stream);
}

// The forward op whose mask a Dropout or DropoutGrad draws, as the cpu kernel finds it.
std::uint64_t maskOp(const KernelArgs& a) {
  if (a.op.kind == K::Dropout) return a.ctx.opIndex;
  std::int64_t forwardOp = -1;
  if (a.hasAttr("forward_op"))
    forwardOp = a.intAttr("forward_op");
  else if (a.op.forwardOp)
    forwardOp = *a.op.forwardOp;
  if (forwardOp < 0) a.fail("needs the forward op (attribute `forward_op`)");
  return static_cast<std::uint64_t>(forwardOp);
}

void dropoutOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(1, 1);
  const Tensor& x = elements(a, 0);
  const double p = a.doubleAttr("p");
  if (p < 0 || p > 1) a.fail(fmt::format("p = {} is not a probability", p));
  const auto seed = static_cast<std::uint64_t>(a.intAttr("seed", 0));
  const std::uint64_t op = maskOp(a);
  Tensor& y = a.out(0, x.dtype(), x.shape());
  dropout(formatOf(x.dtype()), x.deviceData(), y.deviceData(), x.elements(), seed, op, a.ctx.step,
          a.ctx.elementOffset, p, gpu.stream);
}

void causalMaskOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(1, 1);
  const Tensor& x = elements(a, 0);
  if (x.rank() < 2 || x.dim(-1) != x.dim(-2)) a.fail("needs scores[..., s, s], got " + x.typeText());
  const std::int64_t s = x.dim(-1);
  Tensor& y = a.out(0, x.dtype(), x.shape());
  causalMask(formatOf(x.dtype()), x.deviceData(), y.deviceData(), s == 0 ? 0 : x.elements() / (s * s), s,
             a.op.kind == K::CausalMaskGrad ? 0.0f : -1e9f, gpu.stream);
}

void softmaxOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(1, 1);
  const Tensor& x = elements(a, 0);
  const Rows rows = rowsOf(a, x);
  Tensor& y = a.out(0, x.dtype(), x.shape());
  softmax(formatOf(x.dtype()), x.deviceData(), y.deviceData(), rows.count, rows.width, 1.0f, false, gpu.stream);
}

void softmaxGradOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(2, 1);
  const Tensor& y = elements(a, 0);
  const Tensor& dy = elements(a, 1);
  expectSameShape(a, y, dy);
  const Rows rows = rowsOf(a, y);
  Tensor& dx = a.out(0, y.dtype(), y.shape());
  softmaxGrad(formatOf(y.dtype()), y.deviceData(), dy.deviceData(), dx.deviceData(), rows.count, rows.width,
              gpu.stream);
}

// x, gamma and beta (dy) of one float type, as launchOp sends them.
void layerNormOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(3, 1);
  const Tensor& x = elements(a, 0);
  const Rows rows = rowsOf(a, x);
  expectVector(a, elements(a, 1), rows.width, "gamma");
  expectVector(a, elements(a, 2), rows.width, "beta");
  const double eps = a.doubleAttr("eps", 1e-5);
  Tensor& y = a.out(0, x.dtype(), x.shape());
  layerNorm(formatOf(x.dtype()), x.deviceData(), a.in(1).deviceData(), a.in(2).deviceData(), y.deviceData(),
            rows.count, rows.width, eps, gpu.stream);
}

// The float type the caller gave output i (a half model's f32 parameter
// gradients), else `fallback`: the type the widened path gives an untyped
// output (an output typed otherwise then fails KernelArgs::out's check).
ir::DType typedOr(const KernelArgs& a, std::size_t i, ir::DType fallback) {
  const Tensor& t = a.rawOut(i);
  return (t.allocated() || t.isPlaceholder()) && isFloat(t.dtype()) ? t.dtype() : fallback;
}

void layerNormGradOp(const KernelArgs& a, const GpuContext& gpu, std::vector<Tensor>& scratch) {
  a.expectArity(3, 3);
  const Tensor& x = elements(a, 0);
  const Tensor& gamma = elements(a, 1);
  const Tensor& dy = elements(a, 2);
  const Rows rows = rowsOf(a, x);
  expectVector(a, gamma, rows.width, "gamma");
  expectSameShape(a, x, dy);
  const double eps = a.doubleAttr("eps", 1e-5);
  Tensor& dx = a.out(0, x.dtype(), x.shape());
  Tensor& dgamma = a.out(1, typedOr(a, 1, x.dtype()), {rows.width});
  Tensor& dbeta = a.out(2, typedOr(a, 2, x.dtype()), {rows.width});
  layerNormGrad(formatOf(x.dtype()), x.deviceData(), gamma.deviceData(), dy.deviceData(), dx.deviceData(),
                formatOf(dgamma.dtype()), dgamma.deviceData(), formatOf(dbeta.dtype()), dbeta.deviceData(),
                rows.count, rows.width, eps,
                scratchDoubles(scratch, layerNormGradScratch(rows.count, rows.width)), gpu.stream);
}

// Labels against logits, checked on the host as the cpu kernel checks them
// (the labels are i32 the host can read: the stream has finished).
std::int64_t checkedPositions(const KernelArgs& a, const Tensor& logits, const Tensor& labels, const char* what) {
  const bool idsFirst = a.op.kind == K::Embedding || a.op.kind == K::EmbeddingGrad;
  const std::int64_t limit = idsFirst ? logits.dim(0) : logits.dim(-1);
  for (std::int32_t label : labels.i32())
    if (label < 0 || label >= limit)
      a.fail(idsFirst ? fmt::format("id {} is outside the vocabulary [0, {})", label, limit)
                      : fmt::format("{} {} is outside [0, {})", what, label, limit));
  return labels.elements();
}

std::int64_t lossPositions(const KernelArgs& a, const Tensor& logits, const Tensor& labels) {
  if (logits.rank() == 0 || labels.rank() + 1 != logits.rank() ||
      !std::equal(labels.shape().begin(), labels.shape().end(), logits.shape().begin()))
    a.fail(fmt::format("labels {} do not match logits {}", labels.typeText(), logits.typeText()));
  if (labels.elements() == 0) a.fail("no positions to average over");
  return checkedPositions(a, logits, labels, "label");
}

void crossEntropyOp(const KernelArgs& a, const GpuContext& gpu, std::vector<Tensor>& scratch) {
  a.expectArity(2, 1);
  const Tensor& logits = elements(a, 0);
  const Tensor& labels = a.i32(1);
  const std::int64_t rows = lossPositions(a, logits, labels);
  Tensor& loss = a.outF32(0, {});
  crossEntropy(formatOf(logits.dtype()), logits.deviceData(), ids(labels), out(loss), rows, logits.dim(-1),
               scratchDoubles(scratch, rows), gpu.stream);
}

void crossEntropyGradOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(3, 1);
  const Tensor& logits = elements(a, 0);
  const Tensor& labels = a.i32(1);
  const Tensor& dloss = a.f32(2);
  if (dloss.elements() != 1) a.fail("dloss must be a scalar, got " + dloss.typeText());
  const std::int64_t rows = lossPositions(a, logits, labels);
  Tensor& dlogits = a.out(0, logits.dtype(), logits.shape());
  crossEntropyGrad(formatOf(logits.dtype()), logits.deviceData(), ids(labels), in(dloss), dlogits.deviceData(), rows,
                   logits.dim(-1), gpu.stream);
}

void embeddingOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(2, 1);
  const Tensor& table = elements(a, 0);
  const Tensor& tokens = a.i32(1);
  if (table.rank() != 2) a.fail("table must be [V, h], got " + table.typeText());
  const std::int64_t positions = checkedPositions(a, table, tokens, "id");
  Shape yShape = tokens.shape();
  yShape.push_back(table.dim(1));
  Tensor& y = a.out(0, table.dtype(), yShape);
  embedding(formatOf(table.dtype()), table.deviceData(), ids(tokens), y.deviceData(), positions, table.dim(1),
            gpu.stream);
}

void embeddingGradOp(const KernelArgs& a, const GpuContext& gpu, std::vector<Tensor>& scratch) {
  a.expectArity(2, 1);
  const Tensor& tokens = a.i32(0);
  const Tensor& dy = a.in(1);
  if (!isFloat(dy.dtype())) a.fail("input 1 must be f32, got " + dy.typeText());
  if (dy.rank() != tokens.rank() + 1 || !std::equal(tokens.shape().begin(), tokens.shape().end(), dy.shape().begin()))
    a.fail(fmt::format("dy {} does not match ids {}", dy.typeText(), tokens.typeText()));
  const std::int64_t h = dy.dim(-1);
  const std::int64_t vocab = a.rawOut(0).allocated() && !a.hasAttr("vocab") ? a.rawOut(0).dim(0) : a.intAttr("vocab");
  for (std::int32_t id : tokens.i32())
    if (id < 0 || id >= vocab) a.fail(fmt::format("id {} is outside the vocabulary [0, {})", id, vocab));
  // The table's gradient in the type its caller asks (a half model's f32
  // weight gradient), else in dy's.
  const Tensor& given = a.rawOut(0);
  const ir::DType tableType = given.allocated() || given.isPlaceholder() ? given.dtype() : dy.dtype();
  Tensor& dtable = a.out(0, tableType, {vocab, h});
  // Written on the host into a fresh block: the stream is idle (readsOnHost).
  const PositionGroups groups = groupPositions(tokens.i32());
  std::vector<std::int32_t> packed = groups.packed();
  const auto count = static_cast<std::int64_t>(packed.size());  // before the move: arguments' order is unspecified
  scratch.push_back(Tensor::fromI32({count}, std::move(packed)));
  embeddingGrad(ids(scratch.back()), groups.groups(), formatOf(dy.dtype()), dy.deviceData(), formatOf(tableType),
                dtable.deviceData(), tokens.elements(), vocab, h, gpu.stream);
}

// Sum, Mean, ReduceToShape: cpu::sumPlan's sum (its checks, its output) in the
// cpu kernel's order, long sums into few outputs in chunks (cuda::sumOver).
void sumOp(const KernelArgs& a, const GpuContext& gpu, std::vector<Tensor>& scratch) {
  const cpu::SumPlan p = cpu::sumPlan(a);
  const Shape& shape = p.src->shape();
  if (shape.size() > static_cast<std::size_t>(kMaxRank))
    a.fail(fmt::format("has rank {}; the GPU sums up to rank {}", shape.size(), kMaxRank));
  SumIndex index;
  const auto strides = rowMajorStrides(shape);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (p.dstStrides[d] != 0 || shape[d] == 1) {  // kept (a dimension of 1 is either)
      index.kept[index.keptRank] = shape[d];
      index.keptStrides[index.keptRank++] = strides[d];
    } else {
      index.summed[index.summedRank] = shape[d];
      index.summedStrides[index.summedRank++] = strides[d];
    }
  }
  const std::int64_t partials = sumOverScratch(index);
  sumOver(formatOf(p.src->dtype()), p.src->deviceData(), formatOf(p.dst->dtype()), p.dst->deviceData(), index,
          p.factor, partials > 0 ? scratchDoubles(scratch, partials) : nullptr, gpu.stream);
}

// Input i of any float type (an f32 one checked as the cpu kernel checks it).
const Tensor& anyFloat(const KernelArgs& a, std::size_t i) {
  const Tensor& t = a.in(i);
  return isFloat(t.dtype()) ? t : a.f32(i);
}

void globalNormOp(const KernelArgs& a, const GpuContext& gpu, std::vector<Tensor>& scratch) {
  if (a.outputCount() != 1) a.fail("expects one output");
  double* squares = scratchDoubles(scratch, 1);
  MESHFLOW_CUDA_CHECK(cudaMemsetAsync(squares, 0, sizeof(double), gpu.stream));
  std::int64_t largest = 0;
  for (std::size_t i = 0; i < a.inputCount(); ++i) largest = std::max(largest, anyFloat(a, i).elements());
  double* partial = scratchDoubles(scratch, addSquaresScratch(largest));  // reused: the calls run in stream order
  for (std::size_t i = 0; i < a.inputCount(); ++i) {
    const Tensor& g = anyFloat(a, i);
    addSquares(formatOf(g.dtype()), g.deviceData(), g.elements(), squares, partial, gpu.stream);
  }
  sqrtToFloat(squares, out(a.outF32(0, {})), gpu.stream, a.intAttr("squared", 0) == 0);
}

void expectShapeOf(const KernelArgs& a, const Tensor& w, std::size_t i, const char* what) {
  if (anyFloat(a, i).shape() != w.shape())
    a.fail(fmt::format("{} is {} but the weight is {}", what, a.in(i).typeText(), w.typeText()));
}

// Output j of an update, replacing input `replaced`: in the type its caller
// gave it (the replaced tensor's, in place), else the weight's — the type the
// widened path gives an untyped output.
Tensor& updateOutput(const KernelArgs& a, std::size_t j, const Tensor& w) {
  return a.out(j, typedOr(a, j, w.dtype()), w.shape());
}

// Outputs first: an output that is its input's very tensor (in place) is
// unshared before the input's pointer is taken. Operands of any float type
// each (launchOp sends half ones here as they are stored).
void sgdOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(4, 2);
  const Tensor& w = anyFloat(a, 0);
  expectShapeOf(a, w, 1, "the gradient");
  expectShapeOf(a, w, 3, "the momentum");
  scalarOf(a, 2, "scale");
  SgdConstants k{static_cast<float>(a.doubleAttr("lr")), static_cast<float>(a.doubleAttr("momentum", 0.0)),
                 static_cast<float>(a.doubleAttr("weight_decay", 0.0))};
  Tensor& wOut = updateOutput(a, 0, w);
  Tensor& mOut = updateOutput(a, 1, w);
  UpdateOperands u;
  u.wOut = wOut.deviceData();
  u.mOut = mOut.deviceData();
  u.w = w.deviceData();
  u.g = a.in(1).deviceData();
  u.m = a.in(3).deviceData();
  u.formats = {formatOf(w.dtype()), formatOf(a.in(1).dtype()), formatOf(a.in(3).dtype()), FloatFormat::kF32,
               formatOf(wOut.dtype()), formatOf(mOut.dtype())};
  sgdUpdate(u, in(a.f32(2)), w.elements(), k, gpu.stream);
}

void adamOp(const KernelArgs& a, const GpuContext& gpu) {
  a.expectArity(5, 3);
  const Tensor& w = anyFloat(a, 0);
  expectShapeOf(a, w, 1, "the gradient");
  expectShapeOf(a, w, 3, "the first moment");
  expectShapeOf(a, w, 4, "the second moment");
  scalarOf(a, 2, "scale");
  if (a.ctx.step < 1) a.fail(fmt::format("step {} (steps count from 1)", a.ctx.step));
  const double beta1 = a.doubleAttr("beta1", 0.9), beta2 = a.doubleAttr("beta2", 0.999);
  const auto t = static_cast<double>(a.ctx.step);
  AdamConstants k{static_cast<float>(beta1),
                  static_cast<float>(beta2),
                  static_cast<float>(1.0 - std::pow(beta1, t)),
                  static_cast<float>(1.0 - std::pow(beta2, t)),
                  static_cast<float>(a.doubleAttr("eps", 1e-8)),
                  static_cast<float>(a.doubleAttr("weight_decay", 0.0)),
                  static_cast<float>(a.doubleAttr("lr")),
                  a.intAttr("decoupled", 0) != 0};
  Tensor& wOut = updateOutput(a, 0, w);
  Tensor& mOut = updateOutput(a, 1, w);
  Tensor& vOut = updateOutput(a, 2, w);
  UpdateOperands u;
  u.wOut = wOut.deviceData();
  u.mOut = mOut.deviceData();
  u.vOut = vOut.deviceData();
  u.w = w.deviceData();
  u.g = a.in(1).deviceData();
  u.m = a.in(3).deviceData();
  u.v = a.in(4).deviceData();
  u.formats = {formatOf(w.dtype()),    formatOf(a.in(1).dtype()), formatOf(a.in(3).dtype()),
               formatOf(a.in(4).dtype()), formatOf(wOut.dtype()),  formatOf(mOut.dtype()),
               formatOf(vOut.dtype())};
  adamUpdate(u, in(a.f32(2)), w.elements(), k, gpu.stream);
}

// `t` in `dtype`, converted on the GPU into a new tensor of the thread's memory.
Tensor converted(const Tensor& t, ir::DType dtype, const GpuContext& gpu) {
  if (t.dtype() == dtype) return t;
  Tensor y = Tensor::uninitialized(dtype, t.shape());
  convertFloats(t.deviceData(), formatOf(t.dtype()), y.deviceData(), formatOf(dtype), t.elements(), gpu.stream);
  return y;
}

void castOp(const KernelArgs& a, const GpuContext& gpu) {
  const ir::DType dtype = cpu::castTarget(a);
  a.rawOut(0) = converted(a.in(0), dtype, gpu);
}

// A copy the cpu kernels describe (cpu::StridedCopy), on the GPU.
void copyOnGpu(const KernelArgs& a, const cpu::StridedCopy& c, const GpuContext& gpu) {
  if (c.shape.size() > static_cast<std::size_t>(kMaxRank))
    a.fail(fmt::format("has rank {}; the GPU copies up to rank {}", c.shape.size(), kMaxRank));
  launchCopy(c, gpu.stream);
}

// The layout ops (cpu::layoutCopies: their checks, their outputs) and
// BroadcastTo (cpu::broadcastCopy: 0 strides along the broadcast axes).
void copyOp(const KernelArgs& a, const GpuContext& gpu) {
  if (a.op.kind == K::BroadcastTo) return copyOnGpu(a, cpu::broadcastCopy(a), gpu);
  for (const cpu::StridedCopy& c : cpu::layoutCopies(a)) copyOnGpu(a, c, gpu);
}

void launchOnGpu(const KernelArgs& a, const GpuContext& gpu, std::vector<Tensor>& scratch) {
  switch (a.op.kind) {
    case K::MatMul: return matMul(a, gpu);
    case K::Add: case K::Sub: case K::Mul: case K::Div: return binary(a, gpu);
    case K::Neg: case K::Relu: case K::Gelu: case K::Tanh: case K::Sigmoid: case K::Exp: case K::Scale:
      return unaryOp(a, gpu);
    case K::ReluGrad: case K::GeluGrad: case K::TanhGrad: case K::SigmoidGrad: return unaryGradOp(a, gpu);
    case K::Dropout: case K::DropoutGrad: return dropoutOp(a, gpu);
    case K::CausalMask: case K::CausalMaskGrad: return causalMaskOp(a, gpu);
    case K::Softmax: return softmaxOp(a, gpu);
    case K::SoftmaxGrad: return softmaxGradOp(a, gpu);
    case K::LayerNorm: return layerNormOp(a, gpu);
    case K::LayerNormGrad: return layerNormGradOp(a, gpu, scratch);
    case K::CrossEntropy: return crossEntropyOp(a, gpu, scratch);
    case K::CrossEntropyGrad: return crossEntropyGradOp(a, gpu);
    case K::Embedding: return embeddingOp(a, gpu);
    case K::EmbeddingGrad: return embeddingGradOp(a, gpu, scratch);
    case K::Sum: case K::Mean: case K::ReduceToShape: return sumOp(a, gpu, scratch);
    case K::BroadcastTo: return copyOp(a, gpu);
    case K::GlobalNorm: return globalNormOp(a, gpu, scratch);
    case K::SgdUpdate: return sgdOp(a, gpu);
    case K::AdamUpdate: return adamOp(a, gpu);
    case K::Cast: return castOp(a, gpu);
    case K::Transpose: case K::Concat: case K::Split: case K::SplitHeads: case K::MergeHeads: return copyOp(a, gpu);
    default: a.fail("has no CUDA kernel (KernelPlacement.h puts it on the host)");
  }
}

}  // namespace

BinaryKind binaryKind(ir::OpKind kind) {
  return kind == K::Add ? BinaryKind::kAdd : kind == K::Sub ? BinaryKind::kSub : kind == K::Mul ? BinaryKind::kMul
                                                                                              : BinaryKind::kDiv;
}

UnaryKind unaryKind(K kind) {
  switch (kind) {
    case K::Neg: return UnaryKind::kNeg;
    case K::Relu: return UnaryKind::kRelu;
    case K::Gelu: return UnaryKind::kGelu;
    case K::Tanh: return UnaryKind::kTanh;
    case K::Sigmoid: return UnaryKind::kSigmoid;
    case K::Exp: return UnaryKind::kExp;
    default: return UnaryKind::kScale;
  }
}

FloatFormat formatOf(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::F16: return FloatFormat::kF16;
    case ir::DType::BF16: return FloatFormat::kBF16;
    default: return FloatFormat::kF32;
  }
}

bool readsOnHost(ir::OpKind kind) {
  return kind == K::Embedding || kind == K::EmbeddingGrad || kind == K::CrossEntropy || kind == K::CrossEntropyGrad ||
         kind == K::SgdUpdate || kind == K::AdamUpdate;
}

void launchOp(const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
              const cpu::KernelContext& ctx, const GpuContext& gpu, std::vector<Tensor>& scratch, OperandPath path) {
  if (path == OperandPath::kAsStored) return launchOnGpu(KernelArgs(op, inputs, outputs, ctx), gpu, scratch);
  // The f32 kernel on widened copies, its results rounded: all on the stream,
  // so the copies may go back to the allocator's cache at once (the next
  // user of their blocks is ordered after them on the same stream).
  cpu::runWidenedWith([&](const KernelArgs& wide) { launchOnGpu(wide, gpu, scratch); },
                      [&](const Tensor& t, ir::DType dtype) { return converted(t, dtype, gpu); }, op, inputs,
                      outputs, ctx);
}

void launchCopy(const cpu::StridedCopy& c, CUstream_st* stream) {
  if (c.shape.size() > static_cast<std::size_t>(kMaxRank))
    throw std::invalid_argument(fmt::format("a copy of rank {}; the GPU copies up to rank {}", c.shape.size(), kMaxRank));
  CopyIndex index;
  index.rank = static_cast<int>(c.shape.size());
  for (std::size_t d = 0; d < c.shape.size(); ++d) {
    index.shape[d] = c.shape[d];
    index.srcStrides[d] = c.srcStrides[d];
    index.dstStrides[d] = c.dstStrides[d];
  }
  index.srcBase = c.srcBase;
  index.dstBase = c.dstBase;
  stridedCopy(c.src->deviceData(), c.dst->deviceData(), static_cast<int>(ir::dtypeBytes(c.src->dtype())), index,
              stream);
}

}  // namespace meshflow::runtime::cuda
