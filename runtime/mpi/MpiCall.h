// One member's part of one collective of the MPI transport (internal to
// meshflow_mpi): the call's number and tag on its member set, the headers it
// exchanges with its peers (compared as they arrive: a disagreement is a
// Mismatch), and its data receives, waited for by stage.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/CallSignature.h"
#include "runtime/mpi/MpiWire.h"
#include "runtime/mpi/MpiWorld.h"

namespace meshflow::runtime::mpi {

// The group state a rank keeps: calls numbered per member set, and which
// member set owns each tag hash (two sets sharing one could mix their messages).
struct Groups {
  std::map<std::vector<int>, std::uint64_t> nextCall;
  std::map<int, std::vector<int>> setOfHash;
};

constexpr int kCallBits = 7;  // call numbers modulo 128 in the tag

/// Where a payload starts after a header of `headerBytes`: the next multiple
/// of 8 bytes, the widest element a tensor has.
constexpr std::size_t kPayloadAlignment = 8;
constexpr std::size_t payloadStart(std::size_t headerBytes) {
  return (headerBytes + kPayloadAlignment - 1) / kPayloadAlignment * kPayloadAlignment;
}

// One member's part of one collective. Headers are exchanged with the peers
// named by exchangeHeaders(); data receives are posted with a stage (0 or 1),
// and poll(stage) says whether every header and every receive up to that
// stage has arrived. Headers are checked as they arrive.
class Call {
 public:
  Call(MpiWorld& world, Groups& groups, CallSignature info) : world_(world), info_(std::move(info)) {
    std::vector<int> members = info_.group;
    std::sort(members.begin(), members.end());
    number_ = groups.nextCall[members]++;
    describe_ = info_.describe(number_);
    tag_ = tagOf(groups, members);
    position_ = static_cast<std::size_t>(
        std::find(info_.group.begin(), info_.group.end(), world_.rank) - info_.group.begin());
    peers_.resize(info_.group.size());
    world_.throwIfAborted(describe_);
  }

  ~Call() {
    // Receives this call no longer waits for (it failed): MPI may still
    // write into their buffers, which live on with them.
    for (Peer& peer : peers_) world_.abandon(peer.requests, holder_);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  const std::string& describe() const { return describe_; }
  const CallSignature& info() const { return info_; }
  std::size_t position() const { return position_; }
  std::size_t members() const { return info_.group.size(); }
  int member(std::size_t k) const { return info_.group[k]; }
  /// Keeps the buffers of this call's receives alive if the call is abandoned.
  void holdBuffers(std::shared_ptr<const void> holder) { holder_ = std::move(holder); }

  /// Sends member k this call's header, and `payload` after it in the same
  /// message (a small operand: one message instead of two halves the latency).
  /// The payload starts at a multiple of kPayloadAlignment bytes, so that
  /// the receiver reads its elements in place.
  void sendHeader(std::size_t k, std::span<const std::byte> payload = {}) {
    std::vector<std::byte> message = encodeCall(info_, number_);
    if (!payload.empty()) message.resize(payloadStart(message.size()));
    message.insert(message.end(), payload.begin(), payload.end());
    auto bytes = std::make_shared<const std::vector<std::byte>>(std::move(message));
    world_.postSend(kCallHeaders, member(k), tag_, bytes->data(), bytes->size(), bytes);
  }
  /// What member k sent after its header (once the header is in), aligned
  /// for any element type (the message's bytes come from the allocator).
  std::span<const std::byte> payload(std::size_t k) const {
    const Peer& peer = peers_[k];
    return std::span<const std::byte>(peer.message)
        .subspan(std::min(payloadStart(peer.headerBytes), peer.message.size()));
  }
  void expectHeader(std::size_t k) { peers_[k].headerExpected = true; }

  void sendData(std::size_t k, Channel channel, const std::byte* data, std::size_t bytes,
                std::shared_ptr<const void> holder) {
    if (bytes > 0) world_.postSend(channel, member(k), tag_, data, bytes, std::move(holder));
  }
  void recvData(std::size_t k, Channel channel, std::byte* data, std::size_t bytes, int stage) {
    if (bytes == 0) return;
    Peer& peer = peers_[k];
    std::size_t before = peer.requests.size();
    world_.postRecv(channel, member(k), tag_, data, bytes, peer.requests);
    peer.stages.resize(peer.requests.size(), stage);
    peer.expectedBytes.resize(peer.requests.size(), 0);
    for (std::size_t i = before; i < peer.requests.size(); ++i)
      peer.expectedBytes[i] = std::min(kPieceBytes, bytes - (i - before) * kPieceBytes);
  }

  // Whether every expected header and every receive of a stage up to `stage`
  // has arrived. Once every header is in, throws Mismatch when any member's
  // call differs from this one: the first such member in group order, as the
  // cpu backend reports it.
  bool poll(int stage) {
    bool complete = true, headersIn = true;
    std::optional<int> wrongSize;
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      Peer& peer = peers_[k];
      if (peer.headerExpected && !peer.header) receiveHeader(k);
      if (peer.headerExpected && !peer.header) complete = headersIn = false;
      for (std::size_t i = 0; i < peer.requests.size(); ++i) {
        if (peer.requests[i] == MPI_REQUEST_NULL || peer.stages[i] > stage) continue;
        int flag = 0;
        MPI_Status status;
        int code = MPI_Test(&peer.requests[i], &flag, &status);
        if (!flag && code == MPI_SUCCESS) {
          complete = false;
          continue;
        }
        int got = -1;
        if (code == MPI_SUCCESS) MPI_Get_count(&status, MPI_BYTE, &got);
        if (code != MPI_SUCCESS || static_cast<std::size_t>(got) != peer.expectedBytes[i]) {
          peer.requests[i] = MPI_REQUEST_NULL;
          peer.wrongSize = true;
        }
      }
      if (peer.wrongSize && !wrongSize) wrongSize = member(k);
    }
    if (!headersIn) return false;
    if (!checked_) {
      checked_ = true;
      if (auto differs = difference())
        throw world_.error(CommError::Kind::Mismatch, describe_ + ": " + *differs);
    }
    // Headers that agree with a message of another size: not a call that
    // this one can tell apart, but not one it can complete either.
    if (wrongSize)
      throw world_.error(CommError::Kind::Mismatch,
                         fmt::format("{}: device {} sent a message of another size than this call "
                                     "expects",
                                     describe_, *wrongSize));
    return complete;
  }

  // Waits for stage `stage`. A wait that times out with a header in that
  // disagrees is a Mismatch: the disagreement, not the wait, is the error.
  void wait(int stage) {
    waitFor(
        describe_, [&] { return poll(stage); }, [&] { return missingText(stage); });
  }
  void waitFor(const std::string& what, const std::function<bool()>& ready,
               const std::function<std::string()>& missing) {
    try {
      world_.await(what, world_.options.timeout, ready, missing);
    } catch (const CommError& e) {
      if (e.kind() != CommError::Kind::Timeout) throw;
      if (auto differs = difference())
        throw world_.error(CommError::Kind::Mismatch, describe_ + ": " + *differs);
      throw;
    }
  }

  // How the first member in group order whose header has arrived and differs
  // from this call differs from it.
  std::optional<std::string> difference() const {
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      if (!peers_[k].header) continue;
      const CallSignature& theirs = *peers_[k].header;
      int other = member(k);
      auto differs = k > position_ ? callDifference(world_.rank, info_, other, theirs)
                                   : callDifference(other, theirs, world_.rank, info_);
      if (!differs && peers_[k].number != number_)
        differs = fmt::format("device {} is at call #{} on this group but device {} at #{}",
                              world_.rank, number_, other, peers_[k].number);
      if (differs) return differs;
    }
    return std::nullopt;
  }

  const CallSignature& headerOf(std::size_t k) const { return *peers_[k].header; }

  // ", waiting for device 2" / ", waiting for devices 1, 3".
  std::string missingText(int stage) const {
    std::vector<int> missing;
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      const Peer& peer = peers_[k];
      bool waiting = peer.headerExpected && !peer.header;
      for (std::size_t i = 0; i < peer.requests.size(); ++i)
        waiting = waiting || (peer.requests[i] != MPI_REQUEST_NULL && peer.stages[i] <= stage);
      if (waiting) missing.push_back(member(k));
    }
    if (missing.empty()) return "";
    return fmt::format(", waiting for device{} {}", missing.size() == 1 ? "" : "s",
                       fmt::join(missing, ", "));
  }

 private:
  struct Peer {
    bool headerExpected = false;
    std::optional<CallSignature> header;
    std::vector<MPI_Request> requests;
    std::vector<int> stages;
    std::vector<std::size_t> expectedBytes;
    bool wrongSize = false;
    std::uint64_t number = 0;  // the call number in its header
    std::vector<std::byte> message;  // the header's message, payload included
    std::size_t headerBytes = 0;     // where the header ends in it
  };

  int tagOf(Groups& groups, const std::vector<int>& members) {
    // FNV-1a over the sorted members, folded into the tag bits left above
    // the call number.
    std::uint64_t hash = 1469598103934665603ull;
    for (int m : members) {
      hash ^= static_cast<std::uint32_t>(m);
      hash *= 1099511628211ull;
    }
    int bits = 0;
    while (bits < 30 && (std::int64_t(1) << (bits + 1)) - 1 <= world_.tagLimit) ++bits;
    int hashBits = bits - kCallBits;
    int slot = static_cast<int>((hash ^ (hash >> 32)) & ((std::uint64_t(1) << hashBits) - 1));
    auto [owner, added] = groups.setOfHash.emplace(slot, members);
    if (!added && owner->second != members)
      throw world_.error(CommError::Kind::Usage,
                         fmt::format("{}: the MPI tags of this group and of group {} coincide "
                                     "(hash {}); one process cannot use both",
                                     describe_, groupText(owner->second), slot));
    return (slot << kCallBits) | static_cast<int>(number_ & ((1u << kCallBits) - 1));
  }

  void receiveHeader(std::size_t k) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(member(k), tag_, world_.comms[kCallHeaders], &flag, &status);
    if (!flag) return;
    int length = 0;
    MPI_Get_count(&status, MPI_BYTE, &length);
    Peer& peer = peers_[k];
    peer.message.resize(static_cast<std::size_t>(length));
    checkMpi(MPI_Recv(peer.message.data(), length, MPI_BYTE, member(k), tag_,
                      world_.comms[kCallHeaders], MPI_STATUS_IGNORE),
             "MPI_Recv");
    peer.header = decodeCall(peer.message, peer.number, peer.headerBytes);
  }

  MpiWorld& world_;
  CallSignature info_;
  std::uint64_t number_ = 0;
  std::string describe_;
  int tag_ = 0;
  std::size_t position_ = 0;
  std::vector<Peer> peers_;
  bool checked_ = false;
  std::shared_ptr<const void> holder_;
};

}  // namespace meshflow::runtime::mpi
