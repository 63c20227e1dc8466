// LayoutKernels.h: grid-stride loops, one element a thread; 32-bit index
// arithmetic when every offset fits (most tensors), 64-bit otherwise.
#include <stdexcept>
#include <string>

#include "runtime/cuda/IndexMerge.h"
#include "runtime/cuda/KernelSupport.cuh"
#include "runtime/cuda/LayoutKernels.h"

namespace meshflow::runtime::cuda {
namespace {

template <class Element, class Index>
__global__ void stridedCopyKernel(const Element* src, Element* dst, CopyIndex ix, Index n) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += Index(gridDim.x) * blockDim.x) {
    Index rest = i, from = Index(ix.srcBase), to = Index(ix.dstBase);
    for (int d = ix.rank - 1; d >= 0; --d) {
      const Index extent = Index(ix.shape[d]);
      const Index coordinate = rest % extent;
      rest /= extent;
      from += coordinate * Index(ix.srcStrides[d]);
      to += coordinate * Index(ix.dstStrides[d]);
    }
    dst[to] = src[from];
  }
}

// The largest offset the copy reaches on either side, plus one.
std::int64_t reach(const CopyIndex& ix, bool source) {
  std::int64_t last = source ? ix.srcBase : ix.dstBase;
  for (int d = 0; d < ix.rank; ++d) last += (ix.shape[d] - 1) * (source ? ix.srcStrides[d] : ix.dstStrides[d]);
  return last + 1;
}

template <class Element>
void launchCopy(const void* src, void* dst, const CopyIndex& ix, std::int64_t n, Stream stream) {
  const auto* from = static_cast<const Element*>(src);
  auto* to = static_cast<Element*>(dst);
  constexpr std::int64_t k32 = std::int64_t(1) << 31;
  if (n < k32 && reach(ix, true) < k32 && reach(ix, false) < k32)
    stridedCopyKernel<Element, std::uint32_t><<<blocksFor(n), kThreads, 0, stream>>>(from, to, ix, std::uint32_t(n));
  else
    stridedCopyKernel<Element, std::int64_t><<<blocksFor(n), kThreads, 0, stream>>>(from, to, ix, n);
  checkLaunch();
}

template <FloatFormat From, FloatFormat To>
__global__ void convertKernel(const void* src, void* dst, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) storeAs<To>(dst, i, loadAs<From>(src, i));
}

}  // namespace

CopyIndex simplified(const CopyIndex& index) {
  return mergedDimensions(index, &CopyIndex::shape, &CopyIndex::srcStrides, &CopyIndex::dstStrides);
}

void stridedCopy(const void* src, void* dst, int elementBytes, const CopyIndex& index, Stream stream) {
  if (index.rank < 0 || index.rank > kMaxRank) throw std::invalid_argument("cuda::stridedCopy: rank outside [0, 8]");
  std::int64_t n = 1;
  for (int d = 0; d < index.rank; ++d) {
    if (index.shape[d] < 0) throw std::invalid_argument("cuda::stridedCopy: a negative extent");
    n *= index.shape[d];
  }
  if (n == 0) return;
  if (!src || !dst) throw std::invalid_argument("cuda::stridedCopy: a null pointer");
  const CopyIndex ix = simplified(index);
  switch (elementBytes) {
    case 2: return launchCopy<std::uint16_t>(src, dst, ix, n, stream);
    case 4: return launchCopy<std::uint32_t>(src, dst, ix, n, stream);
    case 8: return launchCopy<std::uint64_t>(src, dst, ix, n, stream);
    default: throw std::invalid_argument("cuda::stridedCopy: elements of " + std::to_string(elementBytes) + " bytes");
  }
}

void convertFloats(const void* src, FloatFormat from, void* dst, FloatFormat to, std::int64_t n, Stream stream) {
  if (n < 0) throw std::invalid_argument("cuda::convertFloats: a negative count");
  if (n == 0) return;
  if (!src || !dst) throw std::invalid_argument("cuda::convertFloats: a null pointer");
  withFormat(from, [&](auto f) {
    withFormat(to, [&](auto t) { convertKernel<f(), t()><<<blocksFor(n), kThreads, 0, stream>>>(src, dst, n); });
  });
  checkLaunch();
}

}  // namespace meshflow::runtime::cuda
