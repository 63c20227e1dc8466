// One member's part of one collective of the MPI transport (internal to
// meshflow_mpi): the call's number and tag on its member set, the headers it
// exchanges with its peers (compared as they arrive: a disagreement is a
// Mismatch), and its data receives, waited for by stage.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/CallSignature.h"
#include "runtime/mpi/MpiNodeCores.h"
#include "runtime/mpi/MpiWire.h"
#include "runtime/mpi/MpiWorld.h"

namespace meshflow::runtime::mpi {

// What a rank keeps of one member set: how many collectives it called on it,
// and the set's slot in the MPI tag (a hash of its members).
struct MemberSet {
  std::vector<int> members;  // sorted
  std::uint64_t key = 0;     // a hash of the members (NodeSlots::setKey)
  std::uint64_t nextCall = 0;
  int slot = -1;
};

// The group state a rank keeps: calls numbered per member set, the set of
// each group as it was called (found without sorting it again), and which
// member set owns each tag slot (two sets sharing one could mix their messages).
struct Groups {
  std::map<std::vector<int>, MemberSet> sets;
  std::map<std::vector<int>, MemberSet*> setOfGroup;
  std::map<int, const MemberSet*> setOfSlot;

  /// The member set of `group` (in any order), made on first use.
  MemberSet& of(const std::vector<int>& group) {
    auto known = setOfGroup.find(group);
    if (known != setOfGroup.end()) return *known->second;
    std::vector<int> members = group;
    std::sort(members.begin(), members.end());
    MemberSet& set = sets[members];
    set.key = NodeSlots::setKey(members);
    set.members = std::move(members);
    setOfGroup.emplace(group, &set);
    return set;
  }
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
//
// A call whose members all run on this node may post its header message
// once in the node's slots (postOnNode) instead of sending it to each peer:
// its peers then take theirs from the slots. A peer that sent its header
// through MPI instead called something else (the transport is chosen from
// the call alone): the call then sends its own header to every peer through
// MPI too and takes every peer's, so that each member, whichever way it
// went, sees every header and reports the Mismatch, as the cpu backend does.
class Call {
 public:
  Call(MpiWorld& world, Groups& groups, CallSignature info)
      : world_(world), info_(std::move(info)) {
    MemberSet& set = groups.of(info_.group);
    number_ = set.nextCall++;
    set_ = set.key;
    tag_ = tagOf(groups, set);
    position_ = static_cast<std::size_t>(
        std::find(info_.group.begin(), info_.group.end(), world_.rank) - info_.group.begin());
    peers_.resize(info_.group.size());
    header_ = encodeCall(info_, number_);
    world_.throwIfAborted(whatText());
  }

  ~Call() {
    // Receives this call no longer waits for (it failed): MPI may still
    // write into their buffers, which live on with them.
    world_.abandon(requests_, holder_);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  /// "allReduce #3 over group [2, 0, 1]": made when first asked for (an
  /// error's message), since most calls never need it.
  const std::string& describe() const {
    if (!describe_) describe_ = info_.describe(number_);
    return *describe_;
  }
  /// describe() as the waits take it.
  Text whatText() const {
    return [this] { return describe(); };
  }
  const CallSignature& info() const { return info_; }
  std::size_t position() const { return position_; }
  std::uint64_t number() const { return number_; }
  std::size_t members() const { return info_.group.size(); }
  int member(std::size_t k) const { return info_.group[k]; }
  /// Keeps the buffers of this call's receives alive if the call is abandoned.
  void holdBuffers(std::shared_ptr<const void> holder) { holder_ = std::move(holder); }

  /// The bytes of this call's header message with `payloadBytes` after it.
  std::size_t messageBytes(std::size_t payloadBytes) const {
    return payloadBytes > 0 ? payloadStart(header_.size()) + payloadBytes : header_.size();
  }
  /// This call's header with room for `payloadBytes` after it, starting at
  /// a multiple of kPayloadAlignment bytes (so that the receiver reads its
  /// elements in place): a small operand goes in the header's message, one
  /// message instead of two halving the latency.
  std::vector<std::byte> headerWithRoom(std::size_t payloadBytes) const {
    std::vector<std::byte> message;
    message.reserve(payloadStart(header_.size()) + payloadBytes);
    message = header_;
    if (payloadBytes > 0) message.resize(payloadStart(header_.size()) + payloadBytes);
    return message;
  }
  /// Whether this call's messages — headers with at most `payloadBytes`
  /// after them — go through the node's slots (every member on this node,
  /// and each fits one); if so, from now on sendHeader and sendHeaderToAll
  /// post them there.
  bool postOnNode(std::size_t payloadBytes) {
    NodeCores* node = world_.nodeCores.get();
    if (!node || !node->hasSlots() || members() < 2 ||
        messageBytes(payloadBytes) > NodeSlots::kMessageBytes)
      return false;
    for (int m : info_.group)
      if (node->slotOf(m) < 0) return false;
    onNode_ = true;
    return true;
  }
  /// Sends member k `message`: this call's header (headerWithRoom), and its
  /// payload if any.
  void sendHeader(std::size_t k, const std::shared_ptr<const std::vector<std::byte>>& message) {
    if (onNode_)
      addPost(forRank(member(k)), message, 1);
    else
      world_.postSend(kCallHeaders, member(k), tag_, message->data(), message->size(), message);
  }
  /// Sends every peer the same `message` (posted once on the node).
  void sendHeaderToAll(const std::shared_ptr<const std::vector<std::byte>>& message) {
    if (onNode_) {
      addPost(kForAll, message, static_cast<std::uint32_t>(members() - 1));
      return;
    }
    for (std::size_t k = 0; k < members(); ++k)
      if (k != position_) sendHeader(k, message);
  }
  /// On the node: posts `bytes` for every peer to take with takeData (after
  /// the headers: e.g. an all-reduce's summed chunk).
  void postData(std::vector<std::byte> bytes) {
    addPost(kData, std::make_shared<const std::vector<std::byte>>(std::move(bytes)),
            static_cast<std::uint32_t>(members() - 1));
  }
  /// On the node: member k's postData bytes, if posted; posts what this
  /// call has not posted yet.
  bool takeData(std::size_t k, std::vector<std::byte>& into) {
    post();
    NodeCores& node = *world_.nodeCores;
    return node.slots().take(node.slotOf(member(k)), keyOf(kData), into);
  }
  /// On the node: whether every message of this call is posted (its peers
  /// may need them even once this member has all it needs).
  bool allPosted() {
    post();
    for (const Post& p : posts_)
      if (!p.posted) return false;
    return true;
  }
  /// Sends member k the header alone.
  void sendHeader(std::size_t k) {
    if (!headerOnly_) headerOnly_ = std::make_shared<const std::vector<std::byte>>(header_);
    sendHeader(k, headerOnly_);
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
    std::size_t before = requests_.size();
    world_.postRecv(channel, member(k), tag_, data, bytes, requests_);
    for (std::size_t i = before; i < requests_.size(); ++i)
      receives_.push_back({k, stage, std::min(kPieceBytes, bytes - (i - before) * kPieceBytes)});
  }

  // Whether every expected header and every receive of a stage up to `stage`
  // has arrived. Once every header is in, throws Mismatch when any member's
  // call differs from this one: the first such member in group order, as the
  // cpu backend reports it.
  bool poll(int stage) {
    bool complete = true, headersIn = true;
    std::optional<int> wrongSize;
    receiveHeaders();
    testReceives(stage);
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      Peer& peer = peers_[k];
      if (peer.headerExpected && !peer.arrived) complete = headersIn = false;
      if (peer.wrongSize && !wrongSize) wrongSize = member(k);
    }
    for (std::size_t i = 0; i < requests_.size(); ++i)
      if (requests_[i] != MPI_REQUEST_NULL && receives_[i].stage <= stage) complete = false;
    if (onNode_ && (!allPosted() || mpiHeadersIn_ < mpiHeadersExpected_)) complete = false;
    // After a peer's header came through MPI, every peer's does: all are
    // taken before the call is judged.
    if (!headersIn || mpiHeadersIn_ < mpiHeadersExpected_) return false;
    if (!checked_) {
      checked_ = true;
      if (auto differs = difference())
        throw world_.error(CommError::Kind::Mismatch, describe() + ": " + *differs);
    }
    // Headers that agree with a message of another size: not a call that
    // this one can tell apart, but not one it can complete either.
    if (wrongSize)
      throw world_.error(CommError::Kind::Mismatch,
                         fmt::format("{}: device {} sent a message of another size than this call "
                                     "expects",
                                     describe(), *wrongSize));
    return complete;
  }

  // Waits for stage `stage`. A wait that times out with a header in that
  // disagrees is a Mismatch: the disagreement, not the wait, is the error.
  void wait(int stage) {
    waitFor([&] { return poll(stage); }, [&] { return missingText(stage); });
  }
  void waitFor(const std::function<bool()>& ready, const std::function<std::string()>& missing) {
    try {
      world_.await(whatText(), world_.options.timeout, ready, missing);
    } catch (const CommError& e) {
      // A member may never read this call's post: one that failed or left.
      // (On a Mismatch every member has read every post before judging.)
      if (e.kind() == CommError::Kind::Timeout || e.kind() == CommError::Kind::Aborted)
        retract();
      if (e.kind() != CommError::Kind::Timeout) throw;
      if (auto differs = difference())
        throw world_.error(CommError::Kind::Mismatch, describe() + ": " + *differs);
      throw;
    }
  }

  // How the first member in group order whose header has arrived and differs
  // from this call differs from it.
  std::optional<std::string> difference() const {
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      if (!peers_[k].arrived || !peers_[k].header) continue;  // none, or this call's own
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

  /// What member k called (once its header is in).
  const CallSignature& headerOf(std::size_t k) const {
    return peers_[k].header ? *peers_[k].header : info_;
  }

  // ", waiting for device 2" / ", waiting for devices 1, 3".
  std::string missingText(int stage) const {
    std::vector<int> missing;
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      const Peer& peer = peers_[k];
      bool waiting = peer.headerExpected && !peer.arrived;
      for (std::size_t i = 0; i < requests_.size(); ++i)
        waiting = waiting || (receives_[i].peer == k && requests_[i] != MPI_REQUEST_NULL &&
                              receives_[i].stage <= stage);
      if (waiting) missing.push_back(member(k));
    }
    if (missing.empty()) return "";
    return fmt::format(", waiting for device{} {}", missing.size() == 1 ? "" : "s",
                       fmt::join(missing, ", "));
  }

 private:
  struct Peer {
    bool headerExpected = false;
    bool arrived = false;  // its header is in
    // What it called, when that differs from this call's header byte for
    // byte (else none: decoding every agreeing header cost more than the
    // rest of a small all-reduce's bookkeeping).
    std::optional<CallSignature> header;
    bool wrongSize = false;          // a receive from it had another size
    std::uint64_t number = 0;        // the call number in its header
    std::vector<std::byte> message;  // the header's message, payload included
    std::size_t headerBytes = 0;     // where the header ends in it
  };

  int tagOf(Groups& groups, MemberSet& set) {
    if (set.slot < 0) set.slot = slotOf(groups, set);
    return (set.slot << kCallBits) | static_cast<int>(number_ & ((1u << kCallBits) - 1));
  }

  // The member set's hash folded into the tag bits left above the call
  // number; checked once per member set against the sets seen before.
  int slotOf(Groups& groups, const MemberSet& set) {
    const std::uint64_t hash = set.key;
    int bits = 0;
    while (bits < 30 && (std::int64_t(1) << (bits + 1)) - 1 <= world_.tagLimit) ++bits;
    int hashBits = bits - kCallBits;
    int slot = static_cast<int>((hash ^ (hash >> 32)) & ((std::uint64_t(1) << hashBits) - 1));
    auto [owner, added] = groups.setOfSlot.emplace(slot, &set);
    if (!added && owner->second != &set)
      throw world_.error(CommError::Kind::Usage,
                         fmt::format("{}: the MPI tags of this group and of group {} coincide "
                                     "(hash {}); one process cannot use both",
                                     describe(), groupText(owner->second->members), slot));
    return slot;
  }

  // One receive of data: from which peer, of which stage, how many bytes.
  struct Receive {
    std::size_t peer;
    int stage;
    std::size_t bytes;
  };

  // Tests the data receives of a stage up to `stage`; a receive of another
  // size than expected marks its peer. One MPI_Test each: one MPI_Testsome
  // over all of them (fewer polls, each a yield when MPI yields when idle)
  // made the tiny GPT's step on 4 ranks and 2 cores slower (median of four
  // alternating runs 1.4x the cpu backend's against 1.0x): a waiting rank
  // that yields less takes more of the cores from the ranks that compute.
  void testReceives(int stage) {
    for (std::size_t i = 0; i < requests_.size(); ++i) {
      if (requests_[i] == MPI_REQUEST_NULL || receives_[i].stage > stage) continue;
      int flag = 0;
      MPI_Status status;
      int code = MPI_Test(&requests_[i], &flag, &status);
      if (!flag && code == MPI_SUCCESS) continue;
      int got = -1;
      if (code == MPI_SUCCESS) MPI_Get_count(&status, MPI_BYTE, &got);
      if (code != MPI_SUCCESS || static_cast<std::size_t>(got) != receives_[i].bytes)
        peers_[receives_[i].peer].wrongSize = true;
      requests_[i] = MPI_REQUEST_NULL;
    }
  }

  // Takes the headers that have come. One probe for any sender rather than
  // one per peer: a probe that finds nothing is an MPI poll, which yields
  // the core when MPI yields when idle.
  void receiveHeaders() {
    if (onNode_) {
      receiveOnNode();
      return;
    }
    if (headersIn_ == expectedHeaders()) return;
    MPI_Status status;
    while (probeHeader(MPI_ANY_SOURCE, status)) {
      std::size_t k = positionOf(status.MPI_SOURCE);
      if (k >= peers_.size() || !peers_[k].headerExpected || peers_[k].arrived) {
        // Not a header this call waits for (no member sends one): look per peer.
        for (std::size_t j = 0; j < peers_.size(); ++j)
          if (peers_[j].headerExpected && !peers_[j].arrived) receiveHeader(j);
        return;
      }
      receiveHeader(k, status);
    }
  }

  // The parts of a call's messages in the node's slots: the one message for
  // every peer, the one for world rank r alone (kForRank + r: by rank, not by
  // position, so that a peer that orders the group otherwise still finds its
  // message, and reports the Mismatch), data after the headers.
  static constexpr std::uint32_t kForAll = 0, kData = 1, kForRank = 2;
  static std::uint32_t forRank(int rank) { return kForRank + static_cast<std::uint32_t>(rank); }
  NodeSlots::Key keyOf(std::uint32_t part) const { return {set_, number_, part}; }

  void addPost(std::uint32_t part, std::shared_ptr<const std::vector<std::byte>> message,
               std::uint32_t readers) {
    posts_.push_back({keyOf(part), std::move(message), readers, false});
    post();
  }

  // Posts this call's messages that are not posted yet in free slots, as
  // long as there are free ones, and rings the peers.
  void post() {
    if (posts_.empty()) return;
    NodeCores& node = *world_.nodeCores;
    bool any = false;
    for (Post& p : posts_) {
      if (p.posted) continue;
      if (!node.slots().post(p.key, *p.message, p.readers)) break;
      p.posted = any = true;
      p.message.reset();
    }
    if (any)
      for (std::size_t k = 0; k < members(); ++k)
        if (k != position_) node.ring(member(k));
  }

  // Takes this call's posts back (and gives up posting the rest): some
  // member will not read them.
  void retract() {
    if (!onNode_) return;
    for (Post& p : posts_) {
      if (p.posted) world_.nodeCores->slots().retract(p.key);
      p.posted = true;
      p.message.reset();
    }
  }

  // Node slots: posts, looks for headers sent through MPI (a peer that called
  // something else, or one that saw such a peer), and takes the expected
  // peers' messages from their slots.
  void receiveOnNode() {
    post();
    MPI_Status status;
    while (probeHeader(MPI_ANY_SOURCE, status)) {
      std::size_t k = positionOf(status.MPI_SOURCE);
      if (k >= peers_.size() || k == position_) break;  // not from a member: not this call's
      if (!sentThroughMpi_) sendEveryPeerThroughMpi();
      std::vector<std::byte> message = receiveProbed(k, status);
      ++mpiHeadersIn_;
      if (!peers_[k].arrived) takeHeader(k, std::move(message));
    }
    // A peer's message for every peer, or for this member alone (a peer that
    // called something else may have posted either).
    NodeCores& node = *world_.nodeCores;
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      Peer& peer = peers_[k];
      if (!peer.headerExpected || peer.arrived) continue;
      std::vector<std::byte> message;
      int slot = node.slotOf(member(k));
      if (node.slots().take(slot, keyOf(kForAll), message) ||
          node.slots().take(slot, keyOf(forRank(world_.rank)), message))
        takeHeader(k, std::move(message));
    }
  }

  // A peer went through MPI: this call's plain header goes to every peer
  // through MPI, and every peer's comes (each member that sees one does the
  // same), so that all of them are taken off MPI's queue.
  void sendEveryPeerThroughMpi() {
    sentThroughMpi_ = true;
    // The member that went through MPI never reads this call's post, and
    // the others now take this header from MPI too.
    retract();
    if (!headerOnly_) headerOnly_ = std::make_shared<const std::vector<std::byte>>(header_);
    for (std::size_t k = 0; k < members(); ++k) {
      if (k == position_) continue;
      world_.postSend(kCallHeaders, member(k), tag_, headerOnly_->data(), headerOnly_->size(),
                      headerOnly_);
      peers_[k].headerExpected = true;
      ++mpiHeadersExpected_;
    }
  }

  std::size_t expectedHeaders() const {
    std::size_t count = 0;
    for (const Peer& peer : peers_) count += peer.headerExpected ? 1 : 0;
    return count;
  }

  std::size_t positionOf(int rank) const {
    return static_cast<std::size_t>(std::find(info_.group.begin(), info_.group.end(), rank) -
                                    info_.group.begin());
  }

  void receiveHeader(std::size_t k) {
    MPI_Status status;
    if (probeHeader(member(k), status)) receiveHeader(k, status);
  }

  // Whether a header message from `source` (a rank, or MPI_ANY_SOURCE) has
  // come on this call's tag; `status` then says whose and how long.
  bool probeHeader(int source, MPI_Status& status) {
    int flag = 0;
    MPI_Iprobe(source, tag_, world_.comms[kCallHeaders], &flag, &status);
    return flag != 0;
  }

  // Receives the header message from member k that `status` (a probe's) says has come.
  std::vector<std::byte> receiveProbed(std::size_t k, MPI_Status& status) {
    int length = 0;
    MPI_Get_count(&status, MPI_BYTE, &length);
    std::vector<std::byte> message(static_cast<std::size_t>(length));
    checkMpi(MPI_Recv(message.data(), length, MPI_BYTE, member(k), tag_,
                      world_.comms[kCallHeaders], MPI_STATUS_IGNORE),
             "MPI_Recv");
    return message;
  }

  // Receives member k's header, which `status` (a probe's) says has come.
  void receiveHeader(std::size_t k, MPI_Status& status) { takeHeader(k, receiveProbed(k, status)); }

  // Takes `message` (through MPI or a node slot) as member k's header, and
  // compares it with this call's own.
  void takeHeader(std::size_t k, std::vector<std::byte> message) {
    Peer& peer = peers_[k];
    peer.message = std::move(message);
    peer.arrived = true;
    ++headersIn_;
    // A header equal to this call's own, number included, is a call that
    // agrees with this one.
    if (peer.message.size() >= header_.size() &&
        std::memcmp(peer.message.data(), header_.data(), header_.size()) == 0) {
      peer.number = number_;
      peer.headerBytes = header_.size();
      return;
    }
    peer.header = decodeCall(peer.message, peer.number, peer.headerBytes);
  }

  MpiWorld& world_;
  CallSignature info_;
  std::uint64_t number_ = 0;
  mutable std::optional<std::string> describe_;
  std::vector<std::byte> header_;  // this call's header as it is sent
  std::shared_ptr<const std::vector<std::byte>> headerOnly_;
  int tag_ = 0;
  std::size_t position_ = 0;
  std::vector<Peer> peers_;
  bool checked_ = false;
  // The data receives, and what each is.
  std::vector<MPI_Request> requests_;
  std::vector<Receive> receives_;
  std::size_t headersIn_ = 0;  // headers received
  std::shared_ptr<const void> holder_;
  // Through the node's slots: this call's key there, its message, whether it
  // is posted, and the headers that also go through MPI after a peer's came
  // that way.
  bool onNode_ = false;
  std::uint64_t set_ = 0;  // the member set's key (MemberSet::key)
  // A message to post, and whether it is (then its bytes are in the slot).
  struct Post {
    NodeSlots::Key key;
    std::shared_ptr<const std::vector<std::byte>> message;
    std::uint32_t readers = 0;
    bool posted = false;
  };
  std::vector<Post> posts_;
  bool sentThroughMpi_ = false;
  std::size_t mpiHeadersExpected_ = 0, mpiHeadersIn_ = 0;
};

}  // namespace meshflow::runtime::mpi
