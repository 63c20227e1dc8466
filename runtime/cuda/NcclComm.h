// The NCCL communicator's host-side logic, behind a seam of the NCCL calls
// (NcclCalls) so that it is unit-tested without a GPU or NCCL: joining in
// order (rank 0 makes the unique id, the bootstrap broadcast — MPI_Bcast in a
// job — hands it to every rank, then each joins), and waiting for enqueued
// work with the collective timeout while polling NCCL's asynchronous error,
// aborting the communicator on an error or a timeout so that no rank hangs in
// it. NcclCalls.cpp binds NCCL's own calls. Not yet used by the executor
// (docs/cuda.md: sends, receives and collectives are still to come).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>

namespace meshflow::runtime::cuda {

constexpr std::size_t kNcclIdBytes = 128;  ///< NCCL_UNIQUE_ID_BYTES
using NcclId = std::array<std::byte, kNcclIdBytes>;
using NcclHandle = void*;  ///< An ncclComm_t.

/// The NCCL calls the communicator makes, answering NCCL's status (0: ncclSuccess).
struct NcclCalls {
  std::function<int(NcclId&)> getUniqueId;
  std::function<int(NcclHandle&, int ranks, const NcclId&, int rank)> initRank;
  std::function<int(NcclHandle, int& asyncError)> getAsyncError;
  std::function<int(NcclHandle)> abort;
  std::function<int(NcclHandle)> destroy;
  std::function<std::string(int status)> describe;
};

/// NCCL's own calls; throws NcclError in a build without NCCL.
NcclCalls ncclCalls();

/// Hands `bytes` from rank `root` to every rank of the group.
using Broadcast = std::function<void(std::span<std::byte> bytes, int root)>;

class NcclError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class NcclComm {
 public:
  /// Joins as rank `rank` of `ranks`. Throws NcclError naming the call that
  /// failed, or std::invalid_argument for a rank outside [0, ranks).
  NcclComm(NcclCalls calls, const Broadcast& broadcast, int rank, int ranks);
  /// Destroys the communicator (an aborted one is gone already).
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  /// Returns once done() answers true, polling done() and NCCL's
  /// asynchronous error every `poll`. On an error, or when `timeout` passes
  /// first, aborts the communicator and throws NcclError naming `what`, the
  /// rank and the error or the timeout.
  void wait(const std::function<bool()>& done, std::chrono::milliseconds timeout, const std::string& what,
            std::chrono::milliseconds poll = std::chrono::milliseconds(1));

  NcclHandle handle() const { return handle_; }
  int rank() const { return rank_; }
  bool aborted() const { return aborted_; }

 private:
  [[noreturn]] void abortWith(const std::string& message);
  void check(int status, const char* call) const;

  NcclCalls calls_;
  NcclHandle handle_ = nullptr;
  int rank_ = 0, ranks_ = 1;
  bool aborted_ = false;
};

}  // namespace meshflow::runtime::cuda
