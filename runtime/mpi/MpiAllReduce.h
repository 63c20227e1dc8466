// The MPI transport's all-reduces (internal to meshflow_mpi): the
// deterministic one — a direct reduce-scatter summed in group order, then an
// all-gather, or one exchange of whole operands when they are small (both
// through the node's slots when every member runs on this node) — that
// advances in the background while its rank waits for anything else, and
// MPI's own MPI_Iallreduce for deterministic = false.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/mpi/MpiCall.h"
#include "runtime/mpi/MpiSums.h"
#include "runtime/mpi/MpiWorld.h"

namespace meshflow::runtime::mpi {

// All-reduces of at most this many bytes exchange whole operands (one
// round of messages, n - 1 times the bytes) rather than chunks (two rounds).
constexpr std::size_t kWholeBytes = 16 * 1024;
// All-reduces of at most this many bytes whose members all run on this node
// post whole operands once in the node's slots, and every member sums them
// all. Not larger: at 64 KiB every member summing every operand took 3x as
// long (4 ranks on 2 cores) as the chunked MPI path, which sums each chunk once.
constexpr std::size_t kWholeOnNodeBytes = 16 * 1024;

// A deterministic all-reduce under way: stage 0 (headers and the
// reduce-scatter) was posted at the start; advance() sums this member's
// chunks once stage 0 is in and sends them out (stage 1). Between members
// that all run on this node, up to 16 KiB posts whole operands in the node's
// slots, and more posts each peer its chunks there, then the summed chunks.
class AllReduceOp final : public BackgroundOp {
 public:
  AllReduceOp(MpiWorld& world, Groups& groups, CallSignature info, std::vector<Tensor> inputs)
      : world_(world), buffers_(std::make_shared<Buffers>()) {
    buffers_->inputs = std::move(inputs);
    call_ = std::make_unique<Call>(world, groups, std::move(info));
    call_->holdBuffers(buffers_);
    std::size_t n = call_->members(), me = call_->position();
    for (const Tensor& input : buffers_->inputs)
      buffers_->outputs.push_back(Tensor::uninitialized(input.dtype(), input.shape()));
    buffers_->received.resize(buffers_->inputs.size() * n);
    std::size_t total = 0;
    for (const Tensor& input : buffers_->inputs) total += input.bytes();
    bool onNode = total <= kWholeOnNodeBytes && call_->postOnNode(total);
    whole_ = onNode || total <= kWholeBytes;
    // Chunks through the node's slots: each member's chunks of every peer's
    // operand come in that peer's header message for it, and its summed
    // chunks go out as one post for all (a call takes a slot per member).
    chunksOnNode_ = !whole_ && n <= NodeSlots::kSlots && call_->postOnNode(largestChunks());
    // Whole operands travel inside the header, one message: posted once in
    // the node's slots when every member runs on this node (no MPI message
    // at all), else the same to each peer when that message still goes
    // eagerly (a 4 KiB operand and its header, past Open MPI's 4 KiB, waited
    // for its receiver and took ~1.8x as long as with the limit raised to
    // 8 KiB). Else header and operands go as two messages, each eagerly.
    inHeader_ = onNode || chunksOnNode_ || (whole_ && call_->messageBytes(total) <= world.eagerBytes);
    if (chunksOnNode_) {
      for (std::size_t k = 0; k < n; ++k) {
        if (k == me) continue;
        call_->sendHeader(k, headerWithChunks(k));
        call_->expectHeader(k);
      }
      return;
    }
    if (inHeader_) {
      call_->sendHeaderToAll(headerWithChunks(me));  // whole: every chunk is all of it
      for (std::size_t k = 0; k < n; ++k)
        if (k != me) call_->expectHeader(k);
      return;
    }
    for (std::size_t k = 0; k < n; ++k) {
      if (k == me) continue;
      call_->sendHeader(k);
      call_->expectHeader(k);
      for (std::size_t i = 0; i < buffers_->inputs.size(); ++i) {
        auto [begin, bytes] = chunk(i, k);
        call_->sendData(k, kCallData, std::as_const(buffers_->inputs[i]).raw().data() + begin,
                        bytes, buffers_);
        std::size_t myBytes = chunk(i, me).second;
        auto& into = buffers_->received[i * n + k];
        if (myBytes > 0) into = world.takeScratch(myBytes);
        call_->recvData(k, kCallData, into.data(), myBytes, 0);
        if (whole_) continue;  // every member sums all: nothing comes back
        auto [theirs, theirBytes] = chunk(i, k);
        call_->recvData(k, kCallGather, buffers_->outputs[i].raw().data() + theirs, theirBytes, 1);
      }
    }
  }

  void advance() override {
    if (stage_ == 2 || error_) return;
    try {
      if (stage_ == 0 && call_->poll(0)) {
        sumAndSend();
        stage_ = whole_ ? 2 : 1;
      }
      if (stage_ == 1 && (chunksOnNode_ ? gatheredOnNode() : call_->poll(1))) stage_ = 2;
    } catch (...) {
      error_ = std::current_exception();
    }
  }
  bool done() const override { return stage_ == 2 || error_ != nullptr; }

  void finish(std::vector<Tensor*>& tensors) {
    // The world's progress advances it (it is among the background operations).
    call_->waitFor([&] { return done(); }, [&] { return missingText(); });
    if (error_) std::rethrow_exception(error_);
    for (std::size_t i = 0; i < tensors.size(); ++i) *tensors[i] = buffers_->outputs[i];
  }

 private:
  // Inputs, outputs and receive buffers: what the MPI requests read and write,
  // kept while any of them may still be in flight.
  struct Buffers {
    std::vector<Tensor> inputs;
    std::vector<Tensor> outputs;
    std::vector<Scratch> received;  // [tensor * n + member]
  };

  // Chunk k of tensor i: its first byte and its size in bytes. All of it
  // when the tensors are small: then every member sums every element, and
  // the all-reduce is one exchange instead of two.
  std::pair<std::size_t, std::size_t> chunk(std::size_t i, std::size_t k) const {
    const Tensor& t = buffers_->inputs[i];
    if (whole_) return {0, t.bytes()};
    auto elements = static_cast<std::size_t>(t.elements());
    std::size_t n = call_->members(), size = ir::dtypeBytes(t.dtype());
    std::size_t begin = chunkStart(elements, k, n), end = chunkStart(elements, k + 1, n);
    return {begin * size, (end - begin) * size};
  }

  // The bytes of chunk k of every tensor, back to back.
  std::size_t chunksBytes(std::size_t k) const {
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < buffers_->inputs.size(); ++i) bytes += chunk(i, k).second;
    return bytes;
  }
  std::size_t largestChunks() const {
    std::size_t largest = 0;
    for (std::size_t k = 0; k < call_->members(); ++k) largest = std::max(largest, chunksBytes(k));
    return largest;
  }

  // This call's header with chunk k of every input after it.
  std::shared_ptr<const std::vector<std::byte>> headerWithChunks(std::size_t k) const {
    std::vector<std::byte> message = call_->headerWithRoom(chunksBytes(k));
    std::byte* at = message.data() + (message.size() - chunksBytes(k));
    for (std::size_t i = 0; i < buffers_->inputs.size(); ++i) {
      auto [begin, bytes] = chunk(i, k);
      if (bytes > 0) std::memcpy(at, std::as_const(buffers_->inputs[i]).raw().data() + begin, bytes);
      at += bytes;
    }
    return std::make_shared<const std::vector<std::byte>>(std::move(message));
  }

  // Where member k's part of tensor i is: this member's own input, the
  // operands or chunks in k's header (when they fit it), or k's operand or
  // chunk received.
  const std::byte* partOf(std::size_t i, std::size_t k, std::size_t begin) const {
    if (k == call_->position()) return std::as_const(buffers_->inputs[i]).raw().data() + begin;
    if (!inHeader_) return buffers_->received[i * call_->members() + k].data();
    std::size_t offset = 0;
    for (std::size_t j = 0; j < i; ++j) offset += chunk(j, call_->position()).second;
    return call_->payload(k).data() + offset;
  }

  CommError sizeMismatch(std::size_t k) const {
    return world_.error(CommError::Kind::Mismatch,
                        fmt::format("{}: device {} sent a message of another size than this call "
                                    "expects",
                                    call_->describe(), call_->member(k)));
  }

  // Operands or chunks in the headers: every peer's header carried this
  // member's (a header that agrees with this call but with other bytes is a
  // Mismatch, as a data message of another size is).
  void checkPayloads() const {
    std::size_t expected = chunksBytes(call_->position());
    for (std::size_t k = 0; k < call_->members(); ++k)
      if (k != call_->position() && call_->payload(k).size() != expected) throw sizeMismatch(k);
  }

  // Chunks through the node's slots: takes the peers' summed chunks that are
  // posted; whether all are in (and this member's posted for them).
  bool gatheredOnNode() {
    call_->poll(1);  // a look at MPI too: a poll that yields the core when MPI yields when idle
    std::size_t n = call_->members();
    if (gathered_.empty()) gathered_.assign(n, false);
    std::vector<std::byte> bytes;
    for (std::size_t k = 0; k < n; ++k) {
      if (k == call_->position() || gathered_[k] || !call_->takeData(k, bytes)) continue;
      if (bytes.size() != chunksBytes(k)) throw sizeMismatch(k);
      std::size_t offset = 0;
      for (std::size_t i = 0; i < buffers_->inputs.size(); ++i) {
        auto [begin, size] = chunk(i, k);
        if (size > 0) std::memcpy(buffers_->outputs[i].raw().data() + begin, bytes.data() + offset, size);
        offset += size;
      }
      gathered_[k] = true;
      ++gatheredCount_;
    }
    return gatheredCount_ + 1 == n && call_->allPosted();
  }

  // ", waiting for device 2": whom a wait that timed out waited for.
  std::string missingText() const {
    if (!chunksOnNode_ || stage_ != 1) return call_->missingText(stage_);
    std::vector<int> missing;
    for (std::size_t k = 0; k < call_->members(); ++k)
      if (k != call_->position() && (gathered_.empty() || !gathered_[k]))
        missing.push_back(call_->member(k));
    if (missing.empty()) return "";
    return fmt::format(", waiting for device{} {}", missing.size() == 1 ? "" : "s",
                       fmt::join(missing, ", "));
  }

  void sumAndSend() {
    std::size_t n = call_->members(), me = call_->position();
    if (inHeader_) checkPayloads();
    std::vector<std::byte> gather;  // the summed chunks, to post on the node
    for (std::size_t i = 0; i < buffers_->inputs.size(); ++i) {
      Tensor& out = buffers_->outputs[i];
      auto [begin, bytes] = chunk(i, me);
      std::vector<const std::byte*> parts;
      for (std::size_t k = 0; k < n; ++k) parts.push_back(partOf(i, k, begin));
      std::size_t size = ir::dtypeBytes(out.dtype());
      orderedSum(out.dtype(), parts, out.raw().data() + begin, bytes / size);
      if (whole_) continue;
      if (chunksOnNode_) {
        const std::byte* summed = out.raw().data() + begin;
        gather.insert(gather.end(), summed, summed + bytes);
        continue;
      }
      for (std::size_t k = 0; k < n; ++k)
        if (k != me) call_->sendData(k, kCallGather, out.raw().data() + begin, bytes, buffers_);
    }
    if (chunksOnNode_) call_->postData(std::move(gather));
    // The reduce-scatter's buffers are no longer needed.
    for (auto& received : buffers_->received) world_.giveScratch(std::move(received));
  }

  MpiWorld& world_;
  std::shared_ptr<Buffers> buffers_;
  std::unique_ptr<Call> call_;
  int stage_ = 0;
  bool whole_ = false;     // small tensors: one exchange of whole operands
  bool inHeader_ = false;  // ... inside the header's message
  bool chunksOnNode_ = false;  // chunks through the node's slots
  std::vector<bool> gathered_;  // ... and which peers' summed chunks are in
  std::size_t gatheredCount_ = 0;
  std::exception_ptr error_;
};

class MpiPendingAllReduce final : public PendingAllReduce {
 public:
  MpiPendingAllReduce(std::shared_ptr<AllReduceOp> op, std::vector<Tensor*> tensors)
      : op_(std::move(op)), tensors_(std::move(tensors)) {}

  void finish() override {
    if (!op_) return;
    auto op = std::move(op_);
    op->finish(tensors_);
  }

 private:
  // Also in MpiWorld::background until done, so an all-reduce whose handle
  // is dropped still sends the other members their sums.
  std::shared_ptr<AllReduceOp> op_;
  std::vector<Tensor*> tensors_;
};

// A non-deterministic all-reduce: MPI_Iallreduce on a communicator of the group.
class MpiOwnAllReduce final : public PendingAllReduce {
 public:
  MpiOwnAllReduce(MpiWorld& world, std::string what, MPI_Comm comm, std::vector<Tensor*> tensors)
      : world_(world),
        what_(std::move(what)),
        tensors_(std::move(tensors)),
        buffers_(std::make_shared<std::vector<Tensor>>()) {
    for (Tensor* t : tensors_) {
      buffers_->push_back(t->clone());
      Tensor& sum = buffers_->back();
      MPI_Datatype type = sum.dtype() == ir::DType::F32 ? MPI_FLOAT : MPI_INT32_T;
      auto* data = sum.raw().data();
      auto count = static_cast<std::size_t>(sum.elements());
      std::size_t size = ir::dtypeBytes(sum.dtype()), step = kPieceBytes / size;
      for (std::size_t at = 0; at < count; at += step) {
        MPI_Request request;
        checkMpi(MPI_Iallreduce(MPI_IN_PLACE, data + at * size,
                                static_cast<int>(std::min(step, count - at)), type, MPI_SUM, comm,
                                &request),
                 "MPI_Iallreduce");
        requests_.push_back(request);
      }
    }
  }

  // A collective's requests cannot be cancelled: they stay until MPI ends them.
  ~MpiOwnAllReduce() override { world_.abandon(requests_, buffers_, false); }

  void finish() override {
    world_.await([&] { return what_; }, world_.options.timeout,
                 [&] {
                   int flag = 0;
                   checkMpi(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag,
                                        MPI_STATUSES_IGNORE),
                            "MPI_Testall");
                   return flag != 0;
                 },
                 [] { return std::string(); });
    requests_.clear();
    for (std::size_t i = 0; i < tensors_.size(); ++i) *tensors_[i] = (*buffers_)[i];
  }

 private:
  MpiWorld& world_;
  std::string what_;
  std::vector<Tensor*> tensors_;
  std::shared_ptr<std::vector<Tensor>> buffers_;
  std::vector<MPI_Request> requests_;
};

}  // namespace meshflow::runtime::mpi
