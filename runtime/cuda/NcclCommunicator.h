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
// signature at once and, once the group's communicator is joined, enqueues
// the reduction at once on a stream of the group's own (after the device's
// kernel stream is done), where it runs beside the device's next kernels
// (the gradient all-reduces overlap the rest of the backward); finish()
// compares the members' signatures then and waits for an event recorded
// after that reduction alone. A disagreement there aborts the group's NCCL
// communicator (NCCL already has the call) and is a Mismatch on every
// member. A group's first all-reduce cannot start so: joining waits for
// every member, and a started call never waits for the others; it is
// enqueued at finish() or at the next collective on the member set, which
// first takes the started calls' signatures and waits for their reductions.
//
// Reductions are NCCL's: ring or tree order, not the group order of the
// Communicator contract, so the sums may differ from the cpu backend's in
// the last bits (within the precision's tolerance).
//
// Point to point. Communicator::send never blocks and recv matches (peer,
// tag) in any order, while NCCL's send blocks its stream until the peer
// posts the matching receive, matches in posting order and has no tags. So:
// - each ordered pair of devices (sender → receiver) has a two-rank NCCL
//   communicator of its own, with a stream of its own on each side, so that a
//   send waiting for its receive holds up nothing else (not the device's
//   collectives, not its messages to other peers, not the peer's messages
//   back: two devices that each send, then receive, do not deadlock);
// - send() waits for the device's own kernel stream (the data is written),
//   sends a header (tag, tensor types; with the first message the pair's
//   ncclUniqueId) over the control channel and queues the message for the
//   pair's sending thread (NcclPairSender), which joins the communicator and
//   sends the messages in order — so send() never waits for the peer, and a
//   device that has returned from its body still delivers what it sent;
// - recv(peer, T) reads the peer's headers over the control channel, in the
//   order sent, until one has tag T, posting the receives of each message in
//   that same order (NcclInbox): sends and receives pair up one for one
//   whatever order the tags are asked for in, so they cannot mismatch; then
//   it waits for T's receives under the collective timeout.
// A device's messages to itself stay in a mailbox here. What it assumes:
// the GPU runs a pending send's kernel beside the other kernels (NCCL's
// usual caveat for several communicators on one GPU).
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
#include "runtime/cuda/NcclInbox.h"
#include "runtime/cuda/NcclPairSender.h"

namespace meshflow::runtime::cuda {

struct NcclCommunicatorOptions {
  NcclCalls calls;
  /// Where the collectives are enqueued: the device's kernel stream.
  NcclStream stream = nullptr;
  /// The longest wait for a collective's data.
  std::chrono::milliseconds timeout{60000};
  /// Whether the job has stopped (a device failed): a wait then ends in
  /// CommError (Aborted). Null: only NCCL's errors and the timeout end one.
  /// Called from the sending threads too.
  std::function<bool()> stopped;
  /// Run first on each sending thread (the GPU process: cudaSetDevice).
  std::function<void()> prepareThread;
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

  /// NCCL communicators joined so far for collectives (one per ordered group).
  std::size_t ncclCommunicators() const { return comms_.size(); }
  /// Peers this device has sent messages to over NCCL.
  std::size_t sendChannels() const { return senders_.size(); }

  /// A started all-reduce: its call, its tensors, how far it has got.
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
  /// Takes the signatures of the started all-reduces on `group`'s member set,
  /// oldest first, up to `upTo` (null: all), enqueuing those not enqueued yet.
  void flushStarted(const std::vector<int>& group, const Deferred* upTo = nullptr);
  void checkStartedSignatures(const Deferred& started);
  /// flushStarted, then waits for the started reductions of the member set.
  void settleStarted(const std::vector<int>& group);
  void enqueueAllReduce(Deferred& started, NcclStream stream);
  void enqueueStarted(Deferred& started);
  /// The stream `group`'s started all-reduces run on.
  NcclStream startedStream(const std::vector<int>& group);
  /// finish() of a started all-reduce.
  void finishStarted(Deferred& started);
  NcclComm& commOf(const std::vector<int>& group);
  /// Enqueues `calls` as one NCCL group on `group`'s communicator and waits
  /// for the stream; NCCL failures become CommError.
  void runGroup(const Call& call, const std::function<void(NcclComm&)>& calls);
  void enqueue(const Call& call, const std::function<void(NcclComm&)>& calls);
  /// Waits until `done` (null: the device's kernel stream is done).
  void waitFor(const std::vector<int>& group, const std::string& what,
               const std::function<bool()>& done = nullptr);
  [[noreturn]] void rethrow(const NcclError& error) const;
  void checkPeer(std::uint64_t tag, const char* op, int peer) const;
  /// Waits for the device's kernel stream: what a message holds is written.
  void settleKernels(const std::string& what);
  /// Releases the messages the sending threads have sent: at every send,
  /// recv and collective, so a sent message's memory is not held past the
  /// device's next communication.
  void releaseSent();

  Communicator& control_;
  NcclCommunicatorOptions options_;
  std::map<std::vector<int>, std::uint64_t> nextCall_;                         // by member set
  std::map<std::vector<int>, NcclStream> startedStreams_;                      // by ordered group
  std::map<std::vector<int>, std::unique_ptr<NcclComm>> comms_;                // by ordered group
  std::map<std::vector<int>, std::deque<std::shared_ptr<Deferred>>> started_;  // by member set
  std::map<std::uint64_t, std::deque<std::vector<Tensor>>> toSelf_;            // by tag
  std::map<int, std::unique_ptr<NcclInbox>> inboxes_;                          // by sender
  std::map<int, std::unique_ptr<NcclPairSender>> senders_;                     // by receiver
};

}  // namespace meshflow::runtime::cuda
