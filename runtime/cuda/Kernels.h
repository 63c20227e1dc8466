// The first CUDA kernels, each the GPU twin of a cpu kernel
// (runtime/cpu/*Kernels.cpp) on fp32 device arrays, launched asynchronously on
// a stream. Each checks its arguments on the host first and throws
// std::invalid_argument before anything reaches the GPU, so the checks are
// tested on machines without one.
//
// The math is the cpu kernels': the same GeLU (tanh form) and its derivative,
// softmax as exp(x - max) / Σ with the row sum in double, layer norm with the
// mean and variance in double. The cpu kernels' tanh and exp are their own
// vectorisable approximations (runtime/cpu/FastMath.h, a few ulp); these use
// CUDA's tanhf and expf, so the two agree to fp32 tolerance, not to the bit.
#pragma once

#include <cstdint>
#include <initializer_list>

struct CUstream_st;

namespace meshflow::runtime::cuda {

using Stream = CUstream_st*;

/// How elements are stored: f32, or f16/bf16 bits (runtime/HalfBits.h).
enum class FloatFormat { kF32, kF16, kBF16 };

/// y[i] = a[i] + b[i % nb], i < n: b is a's shape or a suffix of it (a bias
/// over rows), repeating; nb must divide n. Add and Mul of the cpu kernels
/// where b's shape is a trailing part of a's (their general broadcast is still
/// to come).
void add(const float* a, const float* b, float* y, std::int64_t n, std::int64_t nb, Stream stream);
void mul(const float* a, const float* b, float* y, std::int64_t n, std::int64_t nb, Stream stream);

void relu(const float* x, float* y, std::int64_t n, Stream stream);
/// dx = dy where x > 0, else 0 (ReluGrad).
void reluGrad(const float* x, const float* dy, float* dx, std::int64_t n, Stream stream);
/// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
void gelu(const float* x, float* y, std::int64_t n, Stream stream);
/// dx = dy · gelu'(x) (GeluGrad).
void geluGrad(const float* x, const float* dy, float* dx, std::int64_t n, Stream stream);

/// Softmax over rows of `width`: y = softmax(mask(x · scale)), the cpu
/// kernels' Scale → CausalMask → Softmax in one pass. `causal`: the rows are
/// [..., s, s] score matrices (width s, rows a multiple of s) and row i keeps
/// entries j <= i, the others weigh 0.
void softmax(const float* x, float* y, std::int64_t rows, std::int64_t width, float scale, bool causal,
             Stream stream);
/// The same on x and y stored as `format` (TrainingKernels.h: computed in
/// f32, each result rounded once).
void softmax(FloatFormat format, const void* x, void* y, std::int64_t rows, std::int64_t width, float scale,
             bool causal, Stream stream);

/// y = (x - mean) / sqrt(var + eps) · gamma + beta per row of `width`
/// (LayerNorm's forward; the biased variance, as the cpu kernel's).
void layerNorm(const float* x, const float* gamma, const float* beta, float* y, std::int64_t rows,
               std::int64_t width, double eps, Stream stream);
/// The same with x, gamma, beta and y stored as `format`: moments and each
/// output in double as the f32 kernel, the output rounded to f32 and then to
/// `format` once stored — the widened f32 kernel's bits, in one pass.
void layerNorm(FloatFormat format, const void* x, const void* gamma, const void* beta, void* y, std::int64_t rows,
               std::int64_t width, double eps, Stream stream);

namespace detail {
// The host-side argument checks, in KernelChecks.cpp (compiled without nvcc).
void checkElementwise(const char* kernel, std::int64_t n, std::int64_t nb);
void checkRows(const char* kernel, std::int64_t rows, std::int64_t width, bool causal);
void checkPointers(const char* kernel, std::int64_t n, std::initializer_list<const void*> pointers);
}  // namespace detail

}  // namespace meshflow::runtime::cuda
