// One device's messages from one peer over NCCL: the receiving end of the
// peer's NcclPairSender. The peer's headers (tag, tensor types, and with the
// first one the two-rank communicator's unique id) come over the control
// channel in the order sent; for each, in that order, the inbox allocates the
// tensors and posts their ncclRecv calls on a stream of its own, so its
// receives match the sender's sends one for one however the tags are asked
// for. A message is handed out once the stream has done its receives.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/Tensor.h"
#include "runtime/cuda/NcclComm.h"

namespace meshflow::runtime::cuda {

/// The header a sender puts before a message: {tag, tensor types, the id (first message only)}.
std::vector<Tensor> messageHeader(std::uint64_t tag, const std::vector<Tensor>& message,
                                  const NcclId* id);

class NcclInbox {
 public:
  /// `what`: "messages from device 1 to device 0", for errors.
  NcclInbox(NcclCalls calls, std::string what);
  /// Aborts the communicator if receives are still under way.
  ~NcclInbox();
  NcclInbox(const NcclInbox&) = delete;
  NcclInbox& operator=(const NcclInbox&) = delete;

  /// Takes the peer's next header: joins the communicator when it carries
  /// the id, allocates the message's tensors (current MemoryScope) and posts
  /// their receives. Throws NcclError, or std::invalid_argument for a header
  /// that is none.
  void accept(const std::vector<Tensor>& header);
  bool has(std::uint64_t tag) const;
  /// The oldest message with `tag` (has(tag) must hold), once its receives
  /// are done: NcclComm::wait with `timeout`, ended early by stopped().
  std::vector<Tensor> take(std::uint64_t tag, std::chrono::milliseconds timeout,
                           const std::function<bool()>& stopped, const std::string& what);

 private:
  NcclCalls calls_;
  std::string what_;
  NcclStream stream_ = nullptr;
  std::unique_ptr<NcclComm> comm_;
  std::map<std::uint64_t, std::deque<std::vector<Tensor>>> mailbox_;
};

}  // namespace meshflow::runtime::cuda
