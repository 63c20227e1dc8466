// The CUDA kernels a training step needs beyond Kernels.h, each the GPU twin
// of a cpu kernel (runtime/cpu/*Kernels.cpp) on device arrays of fp32 or, where
// a FloatFormat says so, f16/bf16 elements read as f32 and each result
// rounded once (i32 for ids and labels), launched asynchronously on a stream.
// CudaKernels.cpp dispatches graph ops to them after the cpu kernels' own
// argument checks (cpu::KernelArgs), so these launchers check only what
// reaches the GPU: counts and null pointers (std::invalid_argument, before
// any launch).
//
// Reductions are deterministic (a fixed order for a given size) and
// accumulate in double where the cpu kernel does; results agree with the cpu
// kernels to fp32 tolerance, not to the bit (other summation order, CUDA's
// expf/tanhf against the cpu's FastMath.h).
#pragma once

#include <cstdint>

#include "runtime/cuda/Kernels.h"

namespace meshflow::runtime::cuda {

/// Up to this many dimensions in a broadcast (the IR's tensors have fewer).
constexpr int kMaxRank = 8;

/// An output shape and, per operand, the strides that read it while walking
/// the output (0 along broadcast dimensions), as cpu::broadcastStrides gives.
struct BroadcastIndex {
  int rank = 0;
  // Plain arrays: the kernel takes the struct by value and indexes it on the GPU.
  std::int64_t shape[kMaxRank] = {};
  std::int64_t stridesA[kMaxRank] = {};
  std::int64_t stridesB[kMaxRank] = {};
};

/// The same walk with fewer dimensions: those of size 1 dropped, neighbours
/// both operands walk contiguously (or both broadcast) merged.
BroadcastIndex simplified(const BroadcastIndex& index);

enum class BinaryKind { kAdd, kSub, kMul, kDiv };
enum class UnaryKind { kNeg, kRelu, kGelu, kTanh, kSigmoid, kExp, kScale };
/// The gradients dx = dy · f(v), v the forward input (relu, gelu) or output (tanh, sigmoid).
enum class UnaryGradKind { kRelu, kGelu, kTanh, kSigmoid };

/// y = a ∘ b over `index` (general NumPy broadcasting).
void broadcastBinary(BinaryKind kind, const float* a, const float* b, float* y, const BroadcastIndex& index,
                     Stream stream);
/// y = f(x); `factor` for kScale.
void unary(UnaryKind kind, const float* x, float* y, std::int64_t n, float factor, Stream stream);
void unaryGrad(UnaryGradKind kind, const float* v, const float* dy, float* dx, std::int64_t n, Stream stream);
/// The same on operands and results stored as `format`: f16/bf16 elements
/// are read as f32, computed on in f32 and each result rounded once — the
/// bits that widening the operands, the f32 kernel and rounding back give
/// (cpu::runWidened), in one pass over memory instead of three.
void broadcastBinary(BinaryKind kind, FloatFormat format, const void* a, const void* b, void* y,
                     const BroadcastIndex& index, Stream stream);
void unary(UnaryKind kind, FloatFormat format, const void* x, void* y, std::int64_t n, float factor, Stream stream);
void unaryGrad(UnaryGradKind kind, FloatFormat format, const void* v, const void* dy, void* dx, std::int64_t n,
               Stream stream);

/// Dropout with the cpu backend's counter-based mask (cpu::dropoutKeep's
/// splitmix64 hash of seed, op, step and element offset + i): y = x / (1 - p)
/// where kept, else 0 (p = 1 drops all).
void dropout(const float* x, float* y, std::int64_t n, std::uint64_t seed, std::uint64_t opIndex, std::int64_t step,
             std::uint64_t elementOffset, double p, Stream stream);
/// dropout, causalMask: the same on x and y stored as `format`.
void dropout(FloatFormat format, const void* x, void* y, std::int64_t n, std::uint64_t seed, std::uint64_t opIndex,
             std::int64_t step, std::uint64_t elementOffset, double p, Stream stream);
void causalMask(FloatFormat format, const void* x, void* y, std::int64_t matrices, std::int64_t s, float fill,
                Stream stream);
/// scores[..., s, s]: entries above the diagonal set to `fill` (-1e9 forward, 0 backward).
void causalMask(const float* x, float* y, std::int64_t matrices, std::int64_t s, float fill, Stream stream);

/// dx = y · (dy − Σ y·dy) per row (the dot in double).
void softmaxGrad(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t width, Stream stream);
void softmaxGrad(FloatFormat format, const void* y, const void* dy, void* dx, std::int64_t rows, std::int64_t width,
                 Stream stream);
/// LayerNorm's backward: dx per row, dgamma and dbeta summed over rows in row
/// order (double), long columns in chunks whose partial sums are added in a
/// fixed order (ChunkSums.h). x, gamma, dy and dx stored as `format`,
/// dgamma and dbeta each as its own format (f32 for a half model's parameter
/// gradients, ir::kF32Outputs); every result computed as the f32 kernel's and
/// rounded once. `scratch`: layerNormGradScratch(rows, width) doubles of
/// device memory.
std::int64_t layerNormGradScratch(std::int64_t rows, std::int64_t width);
void layerNormGrad(FloatFormat format, const void* x, const void* gamma, const void* dy, void* dx,
                   FloatFormat dgammaFormat, void* dgamma, FloatFormat dbetaFormat, void* dbeta, std::int64_t rows,
                   std::int64_t width, double eps, double* scratch, Stream stream);

/// loss = mean over rows of logsumexp(row) − row[label]. `rowLoss`: `rows`
/// doubles of scratch device memory. Labels must be in range (the caller checks).
void crossEntropy(const float* logits, const std::int32_t* labels, float* loss, std::int64_t rows,
                  std::int64_t vocab, double* rowLoss, Stream stream);
/// dlogits = (softmax − onehot) · dloss / rows; `dloss` a device scalar.
void crossEntropyGrad(const float* logits, const std::int32_t* labels, const float* dloss, float* dlogits,
                      std::int64_t rows, std::int64_t vocab, Stream stream);
/// crossEntropy, crossEntropyGrad: the same on logits (and dlogits) stored as
/// `format`; the loss and dloss stay f32.
void crossEntropy(FloatFormat format, const void* logits, const std::int32_t* labels, float* loss, std::int64_t rows,
                  std::int64_t vocab, double* rowLoss, Stream stream);
void crossEntropyGrad(FloatFormat format, const void* logits, const std::int32_t* labels, const float* dloss,
                      void* dlogits, std::int64_t rows, std::int64_t vocab, Stream stream);

/// y[p, :] = table[ids[p], :]. Ids must be in range (the caller checks).
void embedding(const float* table, const std::int32_t* ids, float* y, std::int64_t positions, std::int64_t h,
               Stream stream);
/// The same with table and y stored as `format` (their elements copied as they are).
void embedding(FloatFormat format, const void* table, const std::int32_t* ids, void* y, std::int64_t positions,
               std::int64_t h, Stream stream);
/// dtable = 0, then dtable[id, :] = Σ dy[p, :] over the positions p of each
/// id in position order (fp32, as the cpu kernel), a thread per (id, column),
/// each sum rounded once to the table's format. `groups`:
/// PositionGroups::packed() of the ids in device memory (`count` groups over
/// `positions` positions; ids in range, the caller checks).
void embeddingGrad(const std::int32_t* groups, std::int64_t count, FloatFormat dyFormat, const void* dy,
                   FloatFormat tableFormat, void* dtable, std::int64_t positions, std::int64_t vocab, std::int64_t h,
                   Stream stream);
/// A sum over some dimensions of x: y has one element per index of the kept
/// dimensions (row-major in x's order), each the sum of x over the summed
/// dimensions (row-major), strides in elements of x.
struct SumIndex {
  int keptRank = 0, summedRank = 0;
  std::int64_t kept[kMaxRank] = {}, keptStrides[kMaxRank] = {};
  std::int64_t summed[kMaxRank] = {}, summedStrides[kMaxRank] = {};
};
/// y[o] = factor · Σ x over o's summed elements, in double, in x's row-major
/// order (Sum, Mean, ReduceToShape), x stored as `xFormat` and y as
/// `yFormat` (each sum rounded to f32, then to y's format: the widened f32
/// kernel's bits). With few outputs and long sums (bias and layer-norm
/// gradients: thousands of outputs, thousands of rows each) one thread per
/// output leaves most of the GPU idle, so the sum is cut into chunks of
/// consecutive elements summed in parallel into `scratch`, and each output's
/// chunks are added in a fixed order (by a block when there are many,
/// ChunkSums.h): deterministic, and within a rounding of the cpu kernel's one
/// running sum. sumOverScratch says how many
/// doubles of scratch that takes (0: one pass, scratch unused).
std::int64_t sumOverScratch(const SumIndex& index);
void sumOver(FloatFormat xFormat, const void* x, FloatFormat yFormat, void* y, const SumIndex& index, double factor,
             double* scratch, Stream stream);

/// *sumSquares += Σ x[i]² (double) over x stored as `format`: blocks (up to
/// 1,024, by n alone) sum strided parts into `scratch`, which one block adds in
/// a fixed order. `scratch`: addSquaresScratch(n) doubles of device memory.
std::int64_t addSquaresScratch(std::int64_t n);
void addSquares(FloatFormat format, const void* x, std::int64_t n, double* sumSquares, double* scratch,
                Stream stream);
/// *y = sqrt(*sumSquares) as float, or with `root` false *sumSquares itself.
void sqrtToFloat(const double* sumSquares, float* y, Stream stream, bool root = true);

/// The arrays of an update (w, g and the state in; w', m', v' out; v and v'
/// for Adam only), each stored in its own format: a training graph updates
/// f32 master weights with f32 gradients and state, but the op takes any
/// float type per operand (ir/OpRulesUpdate.cpp). In place allowed (wOut ==
/// w, mOut == m, vOut == v).
struct UpdateFormats {
  FloatFormat w = FloatFormat::kF32, g = FloatFormat::kF32, m = FloatFormat::kF32, v = FloatFormat::kF32;
  FloatFormat wOut = FloatFormat::kF32, mOut = FloatFormat::kF32, vOut = FloatFormat::kF32;
};
struct UpdateOperands {
  const void *w = nullptr, *g = nullptr, *m = nullptr, *v = nullptr;
  void *wOut = nullptr, *mOut = nullptr, *vOut = nullptr;
  UpdateFormats formats;
};

struct SgdConstants {
  float lr, momentum, decay;
};
/// m' = momentum·m + (g·scale + decay·w); w' = w − lr·m', in f32, each
/// result rounded once to its format. `scale` is a device scalar.
void sgdUpdate(const UpdateOperands& u, const float* scale, std::int64_t n, SgdConstants k, Stream stream);

struct AdamConstants {
  float beta1, beta2, correction1, correction2, eps, decay, lr;
  bool decoupled;
};
/// The cpu kernel's Adam/AdamW step (runtime/cpu/OptimizerKernels.cpp) in
/// f32, each result rounded once to its format. `scale` is a device scalar.
void adamUpdate(const UpdateOperands& u, const float* scale, std::int64_t n, AdamConstants k, Stream stream);

}  // namespace meshflow::runtime::cuda
