// cuda::NcclCommunicator — a runtime::Communicator whose collectives move the
// tensors' device data (Tensor::deviceData) with NCCL, beside a *control*
// Communicator (the mpi transport in a job; a cpu::LocalCluster endpoint in
// the tests) that carries the small things.
//
// Collectives. Each ordered device group gets its own NCCL communicator
// (NcclComm), joined at the group's first collective: member 0 makes the
// ncclUniqueId and sends it to the others over the control channel. A call
// is numbered, as on the other backends, by the collectives this device
// called before on the same member set. Before any data moves, every member
// sends its CallSignature (operation, group order, root, operand types) to
// every other over the control channel and compares theirs with its own, so
// a disagreement is a CommError (Mismatch) on every member, worded as the
// cpu and mpi backends word it, instead of NCCL garbling or hanging (a
// broadcast into an allocated tensor of another type than the root's is a
// Mismatch on every member, not only on that one). Then
// the call is enqueued (inside ncclGroupStart/End) on the device's stream —
// the stream its kernels run on, so NCCL reads what they wrote — and waited
// for with NcclComm::wait under the collective timeout: NCCL's asynchronous
// error, the timeout or the job's stop (options.stopped) aborts that group's
// NCCL communicator and throws CommError (Aborted, or Timeout) naming the
// device, the call and its group — never a hang. allToAll is grouped
// ncclSend/ncclRecv, a member's own slice included. startAllReduce sends its
// signature at once and enqueues the reduction at finish() or at the next
// collective on the member set, whichever comes first (so a started
// all-reduce never waits for the others at its start; it does not yet
// overlap compute either).
//
// Reductions are NCCL's: ring or tree order, not the group order of the
// Communicator contract, so the sums may differ from the cpu backend's in
// the last bits (within the precision's tolerance).
//
// Point to point (send, recv, self included) goes over the control channel,
// not NCCL. Communicator::send never blocks and recv matches (peer, tag) in
// any order, while NCCL's send blocks its stream until the peer posts the
// matching receive, matches in posting order and has no tags. Every mapping
// we considered deadlocks some program that the contract allows: posting
// ncclSend at send() stalls whatever follows it on the stream (two devices
// that each send, then receive, each wait for the other's receive); letting
// the receiver ask the sender for a tag needs the sender inside a
// communicator call when asked (one that has returned from its body never
// answers), and a receiver waiting on one peer's answers cannot hear a
// third's request (a ring of three deadlocks). Without a progress thread, or
// an executor that posts matching send/recv pairs together, pipeline
// transfers therefore stay on the control transport (host memory).
// Control tags from 2^63 up are this communicator's own; a send or recv
// with one is a CommError (Usage).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/CallSignature.h"
#include "runtime/Communicator.h"
#include "runtime/cuda/NcclComm.h"

namespace meshflow::runtime::cuda {

struct NcclCommunicatorOptions {
  NcclCalls calls;
  /// Where the collectives are enqueued: the device's kernel stream.
  NcclStream stream = nullptr;
  /// The longest wait for a collective's data.
  std::chrono::milliseconds timeout{60000};
  /// Whether the job has stopped (a device failed): a wait then ends in
  /// CommError (Aborted). Null: only NCCL's errors and the timeout end one.
  std::function<bool()> stopped;
};

class NcclCommunicator final : public Communicator {
 public:
  /// `control` must outlive this communicator and serve the same device.
  NcclCommunicator(Communicator& control, NcclCommunicatorOptions options);
  ~NcclCommunicator() override;

  int device() const override { return control_.device(); }
  int deviceCount() const override { return control_.deviceCount(); }

  void send(int peer, std::uint64_t tag, std::vector<Tensor> message) override;
  std::vector<Tensor> recv(int peer, std::uint64_t tag) override;

  void allReduce(const std::vector<int>& group, std::vector<Tensor*> tensors) override;
  std::unique_ptr<PendingAllReduce> startAllReduce(const std::vector<int>& group,
                                                   std::vector<Tensor*> tensors) override;
  void allGather(const std::vector<int>& group, const Tensor& input, Tensor& output) override;
  void reduceScatter(const std::vector<int>& group, const Tensor& input, Tensor& output) override;
  void allToAll(const std::vector<int>& group, const Tensor& input, Tensor& output) override;
  void broadcast(const std::vector<int>& group, int root, Tensor& tensor) override;
  void barrier(const std::vector<int>& group) override;

  /// NCCL communicators joined so far (one per ordered group).
  std::size_t ncclCommunicators() const { return comms_.size(); }

  /// A started all-reduce whose reduction is not yet enqueued.
  struct Deferred;

 private:
  friend class NcclPendingAllReduce;
  // A numbered call on its way: its signature sent, its text for errors.
  struct Call {
    CallSignature signature;
    std::uint64_t number = 0;
    std::string what;
  };

  Call begin(CallSignature signature);
  /// Receives the other members' signatures of `call` and compares them;
  /// answers every member's, in group order.
  std::vector<CallSignature> checkSignatures(const Call& call);
  /// Enqueues the started all-reduces on `group`'s member set, oldest first.
  void flushStarted(const std::vector<int>& group);
  void enqueueAllReduce(Deferred& started);
  /// finish() of a started all-reduce.
  void finishStarted(Deferred& started);
  NcclComm& commOf(const std::vector<int>& group);
  /// Enqueues `calls` as one NCCL group on `group`'s communicator and waits
  /// for the stream; NCCL failures become CommError.
  void runGroup(const Call& call, const std::function<void(NcclComm&)>& calls);
  void enqueue(const Call& call, const std::function<void(NcclComm&)>& calls);
  void waitFor(const std::vector<int>& group, const std::string& what);
  [[noreturn]] void rethrow(const NcclError& error) const;
  void checkTag(std::uint64_t tag, const char* op, int peer) const;

  Communicator& control_;
  NcclCommunicatorOptions options_;
  std::map<std::vector<int>, std::uint64_t> nextCall_;               // by member set
  std::map<std::vector<int>, std::unique_ptr<NcclComm>> comms_;      // by ordered group
  std::map<std::vector<int>, std::deque<std::shared_ptr<Deferred>>> started_;  // by member set
};

}  // namespace meshflow::runtime::cuda
