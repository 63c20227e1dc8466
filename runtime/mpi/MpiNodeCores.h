// mpi::NodeCores — what the ranks of one node share in memory: the host
// cores, when the ranks outnumber them, and a doorbell per rank.
//
// Cores: 4 ranks on a 2-core machine, left to the kernel, are time-sliced
// (every kernel at half speed, and the rank a pipeline waits for runnable
// behind ranks nobody waits for). One cpu::CoreGate in POSIX shared memory
// makes them take turns as the cpu backend's device threads do: a rank
// computes only while it holds a core and gives it up whenever it waits
// (MpiWorld::await).
//
// Doorbells: a rank that has waited a while sleeps between looks for its
// messages; every send rings the receiver's bell, which ends that sleep at
// once, so a message from a rank of the node is seen the moment it is sent.
//
// Slots (NodeSlots): where the node's ranks post the messages of small
// collectives for each other.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/cpu/CoreGate.h"
#include "runtime/mpi/NodeSlots.h"

namespace meshflow::runtime::mpi {

class NodeCores {
 public:
  /// Collective over `node`, the ranks of this node (MPI_Comm_split_type),
  /// `worldRank` being this rank: the memory they share, with a gate of
  /// `cores` cores (none when the node has no more ranks than cores, or
  /// `cores` is 0), and message slots unless `slots` is false on any of
  /// them. Null for a rank alone on its node, or when the memory cannot be
  /// made (each rank then computes freely and polls).
  static std::unique_ptr<NodeCores> share(MPI_Comm node, int worldRank, int cores, bool slots);
  ~NodeCores();
  NodeCores(const NodeCores&) = delete;
  NodeCores& operator=(const NodeCores&) = delete;

  /// The gate of the node's cores; null when each rank has a core.
  cpu::CoreGate* gate() { return gate_->cores() > 0 ? gate_.get() : nullptr; }

  /// The node's message slots (none without hasSlots()).
  bool hasSlots() const { return slots_ != nullptr; }
  NodeSlots& slots() { return *slots_; }
  /// The node slot of `worldRank`, -1 when it runs on another node.
  int slotOf(int worldRank) const {
    return worldRank >= 0 && static_cast<std::size_t>(worldRank) < slotOfRank_.size()
               ? slotOfRank_[static_cast<std::size_t>(worldRank)]
               : -1;
  }

  /// Rings the bell of `worldRank` if it runs on this node (after a send to it).
  void ring(int worldRank);
  /// This rank's bell: read it before looking for messages, then sleep
  /// until it changes (sleepUntilRung(seen, ...)).
  std::uint32_t bell() const;
  /// Sleeps until this rank's bell rings after `seen`, at most `limit`.
  void sleepUntilRung(std::uint32_t seen, std::chrono::microseconds limit);

  /// The cores this node's ranks share: MESHFLOW_HOST_CORES when set (0: as
  /// many as ranks, no gate), else the machine's online cores.
  static int hostCores();

 private:
  struct Bell;
  NodeCores(void* memory, std::size_t bytes) : memory_(memory), bytes_(bytes) {}
  Bell& bellOf(int slot) const;

  void* memory_;
  std::size_t bytes_;
  std::size_t bellsAt_ = 0;          // where the bells start in memory_
  std::unique_ptr<cpu::CoreGate> gate_;
  std::unique_ptr<NodeSlots> slots_;
  std::vector<int> slotOfRank_;      // world rank -> node slot, -1 off this node
  int slot_ = 0;
};

}  // namespace meshflow::runtime::mpi
