// The NCCL communicator's host-side logic, behind a seam of the NCCL calls
// (NcclCalls) so that it is unit-tested without a GPU or NCCL: joining in
// order (rank 0 makes the unique id, the bootstrap broadcast — MPI_Bcast in a
// job — hands it to every rank, then each joins), and waiting for enqueued
// work with the collective timeout while polling NCCL's asynchronous error,
// aborting the communicator on an error or a timeout so that no rank hangs in
// it. NcclCalls.cpp binds NCCL's own calls. NcclCommunicator makes one per
// device group and enqueues its collectives on it.
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>

#include "runtime/cuda/NcclCalls.h"

namespace meshflow::runtime::cuda {

/// Hands `bytes` from rank `root` to every rank of the group.
using Broadcast = std::function<void(std::span<std::byte> bytes, int root)>;

class NcclError : public std::runtime_error {
 public:
  enum class Kind {
    Failed,  // a call failed, NCCL reported an asynchronous error, or the communicator was aborted
    TimedOut,  // a wait outlived its timeout (the communicator was aborted then)
  };
  explicit NcclError(const std::string& message, Kind kind = Kind::Failed)
      : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

class NcclComm {
 public:
  /// Joins as rank `rank` of `ranks`. Throws NcclError naming the call that
  /// failed, or std::invalid_argument for a rank outside [0, ranks).
  NcclComm(NcclCalls calls, const Broadcast& broadcast, int rank, int ranks);
  /// Joins with an id made (makeId) and handed to every rank already.
  NcclComm(NcclCalls calls, const NcclId& id, int rank, int ranks);
  /// A fresh unique id (ncclGetUniqueId); throws NcclError.
  static NcclId makeId(const NcclCalls& calls);
  /// Destroys the communicator (an aborted one is gone already).
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  /// Returns once done() answers true, polling done() and NCCL's
  /// asynchronous error every `poll`. On an error, or when `timeout` passes
  /// first, aborts the communicator and throws NcclError naming `what`, the
  /// rank and the error or the timeout (Kind::TimedOut). done() may itself
  /// call abort() to stop waiting (the job stopped).
  void wait(const std::function<bool()>& done, std::chrono::milliseconds timeout,
            const std::string& what, std::chrono::milliseconds poll = std::chrono::milliseconds(1));

  /// Aborts the communicator (once) and throws NcclError(message): its
  /// enqueued work is abandoned and every later wait fails at once.
  [[noreturn]] void abort(const std::string& message,
                          NcclError::Kind kind = NcclError::Kind::Failed);

  /// After enqueuing a data call: a failed status aborts the communicator and
  /// throws NcclError naming `what` and the error.
  void checkEnqueued(int status, const std::string& what);

  NcclHandle handle() const { return handle_; }
  const NcclCalls& calls() const { return calls_; }
  int rank() const { return rank_; }
  bool aborted() const { return aborted_; }

 private:
  void check(int status, const char* call) const;
  void requireRank() const;

  NcclCalls calls_;
  NcclHandle handle_ = nullptr;
  int rank_ = 0, ranks_ = 1;
  bool aborted_ = false;
};

}  // namespace meshflow::runtime::cuda
