// A fake NCCL behind the NcclCalls seam, for unit tests without a GPU: the
// ranks are threads of this process and "device pointers" are host memory.
//
// Data calls are enqueued on a FakeStream and complete when every party has
// enqueued its side: sends and receives match in order per (sender, receiver)
// pair of a communicator, collectives rendezvous by their sequence number on
// the communicator. Inside groupStart/groupEnd a thread's calls are held and
// enqueued together at groupEnd, as NCCL launches a group. Joining
// (initRank) waits for every rank, as ncclCommInitRank does.
//
// Sums run in descending rank order — not the group order the cpu backend
// uses, as NCCL's ring and tree orders are not — and support f32 and i32.
//
// Failures to inject: injectAsyncError(device, status) makes every
// communicator of that device report `status` from getAsyncError; hang(device)
// makes that device's data calls never complete (as do those of a device
// with an injected error). A call with an aborted member never completes:
// its buffers may be gone. A rank that aborts makes the
// other ranks of its communicator report ncclRemoteError (6), as NCCL's
// network transports do when a peer goes away (set peersSeeAborts = false to
// model a transport where they just hang).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/NcclCalls.h"

namespace meshflow::test {

/// Made with std::make_shared: the calls it hands out keep it alive (a
/// sending thread may outlive the test's objects).
class FakeNccl : public std::enable_shared_from_this<FakeNccl> {
 public:
  static constexpr int kInvalidUsage = 5;  // ncclInvalidUsage
  static constexpr int kRemoteError = 6;   // ncclRemoteError
  static constexpr int kSystemError = 2;   // ncclSystemError

  /// A stream: its enqueued calls.
  struct Stream {
    std::vector<std::shared_ptr<bool>> done;
  };

  bool peersSeeAborts = true;

  /// The seam as device `device`'s process sees it.
  runtime::cuda::NcclCalls calls(int device);
  /// Device `device`'s kernel stream.
  runtime::cuda::NcclStream stream(int device) {
    std::lock_guard lock(mutex_);
    return &streams_[device];
  }

  void injectAsyncError(int device, int status) {
    std::lock_guard lock(mutex_);
    asyncErrors_[device] = status;
  }
  void hang(int device) {
    std::lock_guard lock(mutex_);
    hung_[device] = true;
  }
  int uniqueIdsMade() const { return idsMade_; }
  /// initRank calls made by `device`.
  int joins(int device) {
    std::lock_guard lock(mutex_);
    return joins_[device];
  }

 private:
  struct Comm;
  struct Member {  // what a handle points to: one rank of one communicator
    Comm* comm;
    int rank;
    int device;
    bool aborted = false;
  };
  // One rank's part of a call: what it passed, and its done flag.
  struct Part {
    std::string kind;
    const void* in = nullptr;
    void* out = nullptr;
    std::size_t count = 0;
    ir::DType dtype = ir::DType::F32;
    int root = -1;
    std::shared_ptr<bool> done;
    const Member* member = nullptr;
  };
  struct Comm {
    int ranks = 0;
    std::vector<Member*> members;
    int joined = 0;
    bool aborted = false;
    std::vector<std::uint64_t> nextCollective;                     // per rank
    std::map<std::uint64_t, std::map<int, Part>> collectives;      // by sequence, by rank
    std::map<std::pair<int, int>, std::deque<Part>> sends, recvs;  // by (sender, receiver)
  };

  using Post = std::function<void()>;

  int join(int device, runtime::cuda::NcclHandle& handle, int ranks,
           const runtime::cuda::NcclId& id, int rank);
  int asyncError(int device, runtime::cuda::NcclHandle handle, int& error);
  void bindData(runtime::cuda::NcclCalls& calls, int device);

  void post(int device, runtime::cuda::NcclStream stream, Post post);
  void enqueueCollective(Member& m, runtime::cuda::NcclStream stream, Part part);
  void enqueueP2p(Member& m, runtime::cuda::NcclStream stream, int peer, Part part, bool sending);
  void completeCollective(Comm& comm, std::map<int, Part>& parts);
  void matchP2p(Comm& comm, int from, int to);
  void fail(Comm& comm, int status);
  std::shared_ptr<bool> track(runtime::cuda::NcclStream stream);

  std::mutex mutex_;
  std::condition_variable joinedAll_;
  std::map<std::uint64_t, std::unique_ptr<Comm>> comms_;  // by unique id
  std::vector<std::unique_ptr<Member>> members_;
  std::map<int, Stream> streams_;                     // kernel streams, by device
  std::vector<std::unique_ptr<Stream>> madeStreams_;  // by makeStream
  std::vector<std::unique_ptr<Stream>> events_;       // by recordEvent: its stream's calls then
  std::map<int, int> asyncErrors_, joins_;
  std::map<int, bool> hung_;
  std::map<Comm*, int>
      failed_;  // a communicator whose calls disagreed: the status its ranks report
  int idsMade_ = 0;
};

}  // namespace meshflow::test
