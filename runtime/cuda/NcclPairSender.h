// One device's channel for its messages to one peer over NCCL: a thread of
// its own that joins a two-rank NCCL communicator (this device rank 0, the
// peer rank 1) and sends the queued messages in order, each as one NCCL group
// of ncclSend calls on a stream of its own, waiting for each to complete
// before the next. So Communicator::send never blocks on the peer: the caller
// only queues (NcclCommunicator.h says why a thread is needed).
//
// The thread touches no Tensor: it is handed the device pointers, and the
// messages it has sent come back to the caller's thread (takeSent) to be
// released there, where their memory came from.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/Tensor.h"
#include "runtime/cuda/NcclCalls.h"

namespace meshflow::runtime::cuda {

struct NcclPairOptions {
  NcclCalls calls;
  /// Run first on the thread (the GPU process: makes the device's GPU current).
  std::function<void()> prepareThread;
  /// Whether the job has stopped: a send under way is then abandoned.
  std::function<bool()> stopped;
  /// "messages from device 0 to device 1": for errors.
  std::string what;
};

class NcclPairSender {
 public:
  /// Starts the thread, which joins with `id` (already sent to the peer).
  NcclPairSender(NcclPairOptions options, const NcclId& id);
  /// Stops the thread: a send the peer has not received is aborted with the
  /// communicator (a thread still joining, because the peer never received
  /// anything, is left to end with the process).
  ~NcclPairSender();
  NcclPairSender(const NcclPairSender&) = delete;
  NcclPairSender& operator=(const NcclPairSender&) = delete;

  /// Queues `message` (held until sent) whose elements are at `data` (one
  /// pointer per tensor, null for an empty or unallocated one). Throws
  /// NcclError when the channel has failed.
  void post(std::vector<Tensor> message, std::vector<const void*> data);
  /// The messages sent so far, to release on the caller's thread.
  std::vector<std::vector<Tensor>> takeSent();

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace meshflow::runtime::cuda
