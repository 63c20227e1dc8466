// mpi::NodeSlots — where the ranks of one node post the messages of their
// small collectives for each other to read, in the node's shared memory
// (NodeCores'), instead of sending each peer a copy through MPI.
//
// A small all-reduce on 4 ranks and 2 cores spent its time in MPI's message
// matching and in the polls that yield the core, not in moving its bytes:
// through MPI it took ~1.4x as long as MPI_Allreduce, whatever the algorithm
// (a recursive doubling was slower still). Posted once in shared memory and
// read by every member in place, the same header and operands need no
// message at all (bench/README.md, "The MPI all-reduce").
//
// Each rank owns kSlots slots. A writer posts a message into a free slot of
// its own, keyed by the call (its member set and number), for `readers`
// readers; each reader finds it by key, copies it out and releases it; the
// slot is free again once every reader has (or once its writer retracts it:
// a call that failed). A post and a take race as a sequence lock does: a
// slot's stamp is 0 while it is written, and a reader copies a message only
// if the stamp it read before the key is still there once it has said that
// it is copying.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace meshflow::runtime::mpi {

class NodeSlots {
 public:
  static constexpr std::size_t kSlots = 8;              // per rank
  static constexpr std::size_t kMessageBytes = 20 * 1024;  // header and operands

  /// Bytes of shared memory for `ranks` ranks' slots.
  static std::size_t sharedBytes(int ranks);
  /// The slots in `memory` (sharedBytes(ranks) bytes, zeroed by whoever made
  /// it), this rank's being those of node slot `self`.
  NodeSlots(void* memory, int ranks, int self) : memory_(memory), ranks_(ranks), self_(self) {}

  /// Which call a message belongs to — its member set and number — and
  /// which of the call's messages it is (the caller's numbering: e.g. one
  /// for every peer, or one per reader).
  struct Key {
    std::uint64_t set = 0;
    std::uint64_t number = 0;
    std::uint32_t part = 0;
  };
  /// The key of the member set `members` (any order).
  static std::uint64_t setKey(std::vector<int> members);

  /// Posts `message` (at most kMessageBytes) for `readers` readers into a
  /// free slot of this rank; false when every slot is still being read.
  bool post(Key key, std::span<const std::byte> message, std::uint32_t readers);
  /// The message that the rank of node slot `slot` posted under `key`,
  /// copied into `into` and released; false when it has not posted it (yet).
  bool take(int slot, Key key, std::vector<std::byte>& into);
  /// Takes back this rank's post under `key` whoever has not read it (a
  /// call that failed: some members may never read it), so that the slot
  /// is free again.
  void retract(Key key);

 private:
  struct Slot;
  Slot& slotOf(int rank, std::size_t index) const;

  void* memory_;
  int ranks_;
  int self_;
  std::uint64_t stamps_ = 0;  // this rank's posts so far
};

}  // namespace meshflow::runtime::mpi
