#include "runtime/cuda/DeviceAllocator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/DeviceProbe.h"

namespace meshflow::runtime::cuda {

CudaBlocks::CudaBlocks(int index, bool managed) : index_(index), managed_(managed) {
  DeviceInfo info = deviceInfo(index);
  name_ = fmt::format("CUDA device {} ({}, {} memory)", index, info.name, managed ? "managed" : "device");
}

void* CudaBlocks::allocate(std::size_t bytes) {
  MESHFLOW_CUDA_CHECK(cudaSetDevice(index_));
  void* data = nullptr;
  cudaError_t status = managed_ ? cudaMallocManaged(&data, bytes, cudaMemAttachGlobal) : cudaMalloc(&data, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;
  }
  MESHFLOW_CUDA_CHECK(status);
  return data;
}

// Never throws: it runs in tensors' destructors, some of them (results a
// script keeps) after the CUDA runtime has begun to unload at exit, when the
// driver frees what is left anyway.
void CudaBlocks::free(void* data, std::size_t) noexcept {
  if (cudaSetDevice(index_) != cudaSuccess || cudaFree(data) != cudaSuccess) (void)cudaGetLastError();
}

std::string CudaBlocks::name() const { return name_; }

namespace {

// Runs a copy on GPU `index` with every stream of it finished before and
// after, and the calling thread's current GPU as it was.
template <class Copy>
void settledCopy(int index, Copy copy) {
  int current = 0;
  MESHFLOW_CUDA_CHECK(cudaGetDevice(&current));
  MESHFLOW_CUDA_CHECK(cudaSetDevice(index));
  MESHFLOW_CUDA_CHECK(cudaDeviceSynchronize());
  MESHFLOW_CUDA_CHECK(copy());
  MESHFLOW_CUDA_CHECK(cudaDeviceSynchronize());
  MESHFLOW_CUDA_CHECK(cudaSetDevice(current));
}

}  // namespace

void CudaBlocks::copyToHost(void* host, const void* block, std::size_t bytes) {
  settledCopy(index_, [&] { return cudaMemcpy(host, block, bytes, cudaMemcpyDefault); });
}

void CudaBlocks::copyFromHost(void* block, const void* host, std::size_t bytes) {
  settledCopy(index_, [&] { return cudaMemcpy(block, host, bytes, cudaMemcpyDefault); });
}

void CudaBlocks::copyBlocks(void* to, const void* from, std::size_t bytes) {
  settledCopy(index_, [&] { return cudaMemcpy(to, from, bytes, cudaMemcpyDefault); });
}

std::shared_ptr<DeviceMemory> makeDeviceMemory(int device, int index, std::int64_t limit, bool managed) {
  auto blocks = std::make_unique<CudaBlocks>(index, managed);
  if (limit == 0) limit = deviceInfo(index).totalMemory;
  return std::make_shared<DeviceMemory>(device, limit, std::move(blocks));
}

}  // namespace meshflow::runtime::cuda
