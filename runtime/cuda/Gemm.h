// Row-major matrix products on the GPU through cuBLAS, for the shapes the cpu
// matmul kernel takes (runtime/cpu/MatMulKernels.cpp): y[.., m, n] =
// a[.., m, k] · b[.., k, n], either operand transposed in place (a GEMM flag,
// never a copy), b batched like a or one matrix shared by every batch.
// fp32 computes in fp32 (no TF32); bf16 and f16 run on tensor cores with fp32
// accumulation and round the result to their type, as the cpu backend's
// widened kernels do.
#pragma once

#include <cstdint>

struct cublasContext;
struct CUstream_st;

namespace meshflow::runtime::cuda {

enum class GemmType { kF32, kBF16, kF16 };

struct GemmShape {
  std::int64_t batch = 1;  ///< Matrices in a (and in y).
  std::int64_t m = 0, n = 0, k = 0;
  bool transA = false;  ///< a's matrices are [k, m].
  bool transB = false;  ///< b's matrices are [n, k].
  bool sharedB = false; ///< b is one matrix for every batch.
};

/// Throws std::invalid_argument, naming the field, unless the sizes are
/// non-negative, the batch at least 1 and every size and leading dimension
/// fits cuBLAS's int. Needs no GPU.
void validateGemm(const GemmShape& shape);

/// One cuBLAS handle on one stream of the current device.
class Gemm {
 public:
  /// `stream` null: the default stream.
  explicit Gemm(CUstream_st* stream = nullptr);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  /// y = a · b on the device, asynchronously on the stream. a, b and y are
  /// device pointers of `type`, contiguous row-major.
  void run(const GemmShape& shape, GemmType type, const void* a, const void* b, void* y) {
    run(shape, type, type, a, b, y);
  }
  /// The same with y of type `output`: f32 from half operands (a half
  /// model's weight gradients, kept in fp32) is the one mixed form.
  void run(const GemmShape& shape, GemmType operands, GemmType output, const void* a, const void* b, void* y);

 private:
  cublasContext* handle_ = nullptr;
};

}  // namespace meshflow::runtime::cuda
