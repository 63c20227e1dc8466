#include "runtime/cuda/NcclComm.h"

#include <fmt/format.h>

#include <thread>

namespace meshflow::runtime::cuda {

NcclComm::NcclComm(NcclCalls calls, const Broadcast& broadcast, int rank, int ranks)
    : calls_(std::move(calls)), rank_(rank), ranks_(ranks) {
  requireRank();
  NcclId id{};
  if (rank == 0) check(calls_.getUniqueId(id), "ncclGetUniqueId");
  broadcast(id, 0);
  check(calls_.initRank(handle_, ranks, id, rank), "ncclCommInitRank");
}

NcclComm::NcclComm(NcclCalls calls, const NcclId& id, int rank, int ranks)
    : calls_(std::move(calls)), rank_(rank), ranks_(ranks) {
  requireRank();
  check(calls_.initRank(handle_, ranks, id, rank), "ncclCommInitRank");
}

NcclId NcclComm::makeId(const NcclCalls& calls) {
  NcclId id{};
  const int status = calls.getUniqueId(id);
  if (status != 0) throw NcclError("ncclGetUniqueId failed: " + calls.describe(status));
  return id;
}

void NcclComm::requireRank() const {
  if (ranks_ < 1 || rank_ < 0 || rank_ >= ranks_)
    throw std::invalid_argument(
        fmt::format("NCCL rank {} is outside a group of {}", rank_, ranks_));
}

NcclComm::~NcclComm() {
  if (handle_ && !aborted_) calls_.destroy(handle_);
}

void NcclComm::check(int status, const char* call) const {
  if (status != 0)
    throw NcclError(fmt::format("{} failed on rank {} of {}: {}", call, rank_, ranks_,
                                calls_.describe(status)));
}

void NcclComm::abort(const std::string& message, NcclError::Kind kind) {
  if (!aborted_) {
    aborted_ = true;
    calls_.abort(handle_);
  }
  throw NcclError(message, kind);
}

void NcclComm::checkEnqueued(int status, const std::string& what) {
  if (status != 0)
    abort(fmt::format("{} could not be enqueued on rank {} of {}: {}", what, rank_, ranks_,
                      calls_.describe(status)));
}

void NcclComm::wait(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                    const std::string& what, std::chrono::milliseconds poll) {
  if (aborted_)
    throw NcclError(fmt::format("{} on rank {}: the communicator was aborted", what, rank_));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return;
    int asyncError = 0;
    const int status = calls_.getAsyncError(handle_, asyncError);
    if (status != 0 || asyncError != 0)
      abort(fmt::format("{} failed on rank {} of {}: {}", what, rank_, ranks_,
                        calls_.describe(status != 0 ? status : asyncError)));
    if (std::chrono::steady_clock::now() >= deadline)
      abort(fmt::format("{} on rank {} of {} timed out after {} ms; the communicator was aborted",
                        what, rank_, ranks_, timeout.count()),
            NcclError::Kind::TimedOut);
    std::this_thread::sleep_for(poll);
  }
}

}  // namespace meshflow::runtime::cuda
