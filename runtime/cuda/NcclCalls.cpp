// NcclComm's seam bound to NCCL's own calls (or, in a build without NCCL, an
// error saying so).
#include <fmt/format.h>

#include <cstring>

#include "runtime/cuda/NcclComm.h"

#if MESHFLOW_HAVE_NCCL
#include <nccl.h>
#endif

namespace meshflow::runtime::cuda {

#if MESHFLOW_HAVE_NCCL
static_assert(sizeof(ncclUniqueId) == kNcclIdBytes, "NcclId must hold an ncclUniqueId");

NcclCalls ncclCalls() {
  NcclCalls calls;
  calls.getUniqueId = [](NcclId& id) {
    ncclUniqueId nccl;
    const int status = ncclGetUniqueId(&nccl);
    std::memcpy(id.data(), &nccl, sizeof nccl);
    return status;
  };
  calls.initRank = [](NcclHandle& handle, int ranks, const NcclId& id, int rank) {
    ncclUniqueId nccl;
    std::memcpy(&nccl, id.data(), sizeof nccl);
    ncclComm_t comm = nullptr;
    const int status = ncclCommInitRank(&comm, ranks, nccl, rank);
    handle = comm;
    return status;
  };
  calls.getAsyncError = [](NcclHandle handle, int& asyncError) {
    ncclResult_t result = ncclSuccess;
    const int status = ncclCommGetAsyncError(static_cast<ncclComm_t>(handle), &result);
    asyncError = static_cast<int>(result);
    return status;
  };
  calls.abort = [](NcclHandle handle) { return static_cast<int>(ncclCommAbort(static_cast<ncclComm_t>(handle))); };
  calls.destroy = [](NcclHandle handle) {
    return static_cast<int>(ncclCommDestroy(static_cast<ncclComm_t>(handle)));
  };
  calls.describe = [](int status) {
    return fmt::format("{} (ncclResult_t {})", ncclGetErrorString(static_cast<ncclResult_t>(status)), status);
  };
  return calls;
}
#else
NcclCalls ncclCalls() {
  throw NcclError("this build of meshflow has no NCCL (set NCCL_HOME to where it is installed and reconfigure)");
}
#endif

}  // namespace meshflow::runtime::cuda
