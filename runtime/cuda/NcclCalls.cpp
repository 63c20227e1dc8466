// The NCCL seam bound to NCCL's own calls and cudaStreamQuery (or, in a build
// without NCCL, an error saying so).
#include <fmt/format.h>

#include <cstring>

#include "runtime/cuda/NcclComm.h"

#if MESHFLOW_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "runtime/cuda/CudaError.h"
#endif

namespace meshflow::runtime::cuda {

#if MESHFLOW_HAVE_NCCL
static_assert(sizeof(ncclUniqueId) == kNcclIdBytes, "NcclId must hold an ncclUniqueId");

namespace {

ncclComm_t comm(NcclHandle handle) { return static_cast<ncclComm_t>(handle); }
cudaStream_t stream(NcclStream s) { return static_cast<cudaStream_t>(s); }

ncclDataType_t ncclType(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::F32:
      return ncclFloat32;
    case ir::DType::F16:
      return ncclFloat16;
    case ir::DType::BF16:
      return ncclBfloat16;
    case ir::DType::I32:
      return ncclInt32;
    case ir::DType::I64:
      return ncclInt64;
  }
  throw NcclError(fmt::format("NCCL has no type for {}", ir::dtypeName(dtype)));
}

void bindLife(NcclCalls& calls) {
  calls.getUniqueId = [](NcclId& id) {
    ncclUniqueId nccl;
    const int status = ncclGetUniqueId(&nccl);
    std::memcpy(id.data(), &nccl, sizeof nccl);
    return status;
  };
  calls.initRank = [](NcclHandle& handle, int ranks, const NcclId& id, int rank) {
    ncclUniqueId nccl;
    std::memcpy(&nccl, id.data(), sizeof nccl);
    ncclComm_t made = nullptr;
    const int status = ncclCommInitRank(&made, ranks, nccl, rank);
    handle = made;
    return status;
  };
  calls.getAsyncError = [](NcclHandle handle, int& asyncError) {
    ncclResult_t result = ncclSuccess;
    const int status = ncclCommGetAsyncError(comm(handle), &result);
    asyncError = static_cast<int>(result);
    return status;
  };
  calls.abort = [](NcclHandle handle) { return static_cast<int>(ncclCommAbort(comm(handle))); };
  calls.destroy = [](NcclHandle handle) { return static_cast<int>(ncclCommDestroy(comm(handle))); };
  calls.describe = [](int status) {
    return fmt::format("{} (ncclResult_t {})",
                       ncclGetErrorString(static_cast<ncclResult_t>(status)), status);
  };
}

void bindData(NcclCalls& calls) {
  calls.groupStart = [] { return static_cast<int>(ncclGroupStart()); };
  calls.groupEnd = [] { return static_cast<int>(ncclGroupEnd()); };
  calls.send = [](const void* data, std::size_t count, ir::DType dtype, int peer, NcclHandle h,
                  NcclStream s) {
    return static_cast<int>(ncclSend(data, count, ncclType(dtype), peer, comm(h), stream(s)));
  };
  calls.recv = [](void* data, std::size_t count, ir::DType dtype, int peer, NcclHandle h,
                  NcclStream s) {
    return static_cast<int>(ncclRecv(data, count, ncclType(dtype), peer, comm(h), stream(s)));
  };
  calls.allReduce = [](const void* in, void* out, std::size_t count, ir::DType dtype, NcclHandle h,
                       NcclStream s) {
    return static_cast<int>(
        ncclAllReduce(in, out, count, ncclType(dtype), ncclSum, comm(h), stream(s)));
  };
  calls.allGather = [](const void* in, void* out, std::size_t count, ir::DType dtype, NcclHandle h,
                       NcclStream s) {
    return static_cast<int>(ncclAllGather(in, out, count, ncclType(dtype), comm(h), stream(s)));
  };
  calls.reduceScatter = [](const void* in, void* out, std::size_t count, ir::DType dtype,
                           NcclHandle h, NcclStream s) {
    return static_cast<int>(
        ncclReduceScatter(in, out, count, ncclType(dtype), ncclSum, comm(h), stream(s)));
  };
  calls.broadcast = [](const void* in, void* out, std::size_t count, ir::DType dtype, int root,
                       NcclHandle h, NcclStream s) {
    return static_cast<int>(
        ncclBroadcast(in, out, count, ncclType(dtype), root, comm(h), stream(s)));
  };
  calls.streamDone = [](NcclStream s) {
    const cudaError_t status = cudaStreamQuery(stream(s));
    if (status == cudaErrorNotReady) return false;
    MESHFLOW_CUDA_CHECK(status);
    return true;
  };
  calls.makeStream = [] {
    cudaStream_t made = nullptr;
    MESHFLOW_CUDA_CHECK(cudaStreamCreateWithFlags(&made, cudaStreamNonBlocking));
    return static_cast<NcclStream>(made);
  };
  calls.destroyStream = [](NcclStream s) { cudaStreamDestroy(stream(s)); };
  calls.recordEvent = [](NcclStream s) {
    cudaEvent_t event = nullptr;
    MESHFLOW_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    MESHFLOW_CUDA_CHECK(cudaEventRecord(event, stream(s)));
    return static_cast<NcclEvent>(event);
  };
  calls.eventDone = [](NcclEvent e) {
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (status == cudaErrorNotReady) return false;
    MESHFLOW_CUDA_CHECK(status);
    return true;
  };
  calls.destroyEvent = [](NcclEvent e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); };
}

}  // namespace

NcclCalls ncclCalls() {
  NcclCalls calls;
  bindLife(calls);
  bindData(calls);
  return calls;
}
#else
NcclCalls ncclCalls() {
  throw NcclError(
      "this build of meshflow has no NCCL (set NCCL_HOME to where it is installed and "
      "reconfigure)");
}
#endif

}  // namespace meshflow::runtime::cuda
