#include "runtime/cuda/NcclInbox.h"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "runtime/CallSignature.h"
#include "runtime/cuda/SignatureTensor.h"

namespace meshflow::runtime::cuda {

std::vector<Tensor> messageHeader(std::uint64_t tag, const std::vector<Tensor>& message,
                                  const NcclId* id) {
  CallSignature types;
  types.op = "message";
  for (const Tensor& t : message) types.operands.push_back(OperandType::of(t));
  std::vector<Tensor> header = {Tensor::fromI32({2}, {static_cast<std::int32_t>(tag & 0xffffffff),
                                                      static_cast<std::int32_t>(tag >> 32)}),
                                signatureTensor(types)};
  if (id) {
    Tensor bytes =
        Tensor::uninitialized(ir::DType::I32, {static_cast<std::int64_t>(kNcclIdBytes / 4)});
    std::memcpy(bytes.raw().data(), id->data(), kNcclIdBytes);
    header.push_back(std::move(bytes));
  }
  return header;
}

NcclInbox::NcclInbox(NcclCalls calls, std::string what)
    : calls_(std::move(calls)), what_(std::move(what)) {}

NcclInbox::~NcclInbox() {
  if (comm_ && !comm_->aborted() && !calls_.streamDone(stream_)) try {
      comm_->abort(what_ + ": receives abandoned");
    } catch (const NcclError&) {
    }
  comm_.reset();
  if (stream_) calls_.destroyStream(stream_);
}

void NcclInbox::accept(const std::vector<Tensor>& header) {
  if (header.size() < 2 || header[0].dtype() != ir::DType::I32 || header[0].elements() != 2)
    throw std::invalid_argument(what_ + ": a message header is malformed");
  const auto words = header[0].i32();
  const std::uint64_t tag = static_cast<std::uint64_t>(static_cast<std::uint32_t>(words[1])) << 32 |
                            static_cast<std::uint32_t>(words[0]);
  const CallSignature types = signatureOf(header[1]);
  if (!comm_) {
    if (header.size() < 3 || header[2].bytes() != kNcclIdBytes)
      throw std::invalid_argument(what_ + ": the first message header carries no NCCL unique id");
    NcclId id;
    std::memcpy(id.data(), header[2].raw().data(), kNcclIdBytes);
    if (!stream_) stream_ = calls_.makeStream();
    comm_ = std::make_unique<NcclComm>(calls_, id, 1, 2);
  }
  std::vector<Tensor> message;
  for (const OperandType& type : types.operands)
    message.push_back(type.allocated ? Tensor::uninitialized(type.dtype, type.shape) : Tensor());
  comm_->checkEnqueued(calls_.groupStart(), what_ + " (ncclGroupStart)");
  for (Tensor& t : message)
    if (t.allocated() && t.elements() > 0)
      comm_->checkEnqueued(calls_.recv(t.deviceData(), static_cast<std::size_t>(t.elements()),
                                       t.dtype(), 0, comm_->handle(), stream_),
                           what_);
  comm_->checkEnqueued(calls_.groupEnd(), what_ + " (ncclGroupEnd)");
  mailbox_[tag].push_back(std::move(message));
}

bool NcclInbox::has(std::uint64_t tag) const {
  auto found = mailbox_.find(tag);
  return found != mailbox_.end() && !found->second.empty();
}

std::vector<Tensor> NcclInbox::take(std::uint64_t tag, std::chrono::milliseconds timeout,
                                    const std::function<bool()>& stopped, const std::string& what) {
  comm_->wait(
      [&] {
        if (stopped && stopped()) comm_->abort(what + ": the job stopped (another device failed)");
        return calls_.streamDone(stream_);
      },
      timeout, what);
  auto queue = mailbox_.find(tag);
  std::vector<Tensor> message = std::move(queue->second.front());
  queue->second.pop_front();
  if (queue->second.empty()) mailbox_.erase(queue);
  return message;
}

}  // namespace meshflow::runtime::cuda
