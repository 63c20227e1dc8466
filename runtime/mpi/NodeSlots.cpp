#include "runtime/mpi/NodeSlots.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace meshflow::runtime::mpi {

// One slot: its stamp (0: free or being written; else the post's number on
// its rank, never reused), key, readers still to take it, readers copying
// it right now, and the message.
struct alignas(64) NodeSlots::Slot {
  std::atomic<std::uint64_t> stamp;
  std::atomic<std::uint64_t> set;
  std::atomic<std::uint64_t> number;
  std::atomic<std::uint32_t> part;
  std::atomic<std::uint32_t> readersLeft;
  std::atomic<std::uint32_t> reading;
  std::atomic<std::uint32_t> bytes;
  std::byte message[kMessageBytes];
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

std::size_t NodeSlots::sharedBytes(int ranks) {
  return static_cast<std::size_t>(ranks) * kSlots * sizeof(Slot);
}

std::uint64_t NodeSlots::setKey(std::vector<int> members) {
  std::sort(members.begin(), members.end());
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (int m : members) {
    hash ^= static_cast<std::uint32_t>(m);
    hash *= 1099511628211ull;
  }
  return hash;
}

NodeSlots::Slot& NodeSlots::slotOf(int rank, std::size_t index) const {
  return static_cast<Slot*>(memory_)[static_cast<std::size_t>(rank) * kSlots + index];
}

bool NodeSlots::post(Key key, std::span<const std::byte> message, std::uint32_t readers) {
  if (message.size() > kMessageBytes)
    throw std::logic_error("a message too long for a node slot");
  for (std::size_t i = 0; i < kSlots; ++i) {
    Slot& slot = slotOf(self_, i);
    // Free: never posted, or every reader has taken it (only this rank
    // writes its slots, so it stays free until posted again).
    if (slot.stamp.load(std::memory_order_relaxed) != 0 &&
        slot.readersLeft.load(std::memory_order_acquire) != 0)
      continue;
    slot.stamp.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    slot.set.store(key.set, std::memory_order_relaxed);
    slot.number.store(key.number, std::memory_order_relaxed);
    slot.part.store(key.part, std::memory_order_relaxed);
    slot.bytes.store(static_cast<std::uint32_t>(message.size()), std::memory_order_relaxed);
    slot.readersLeft.store(readers, std::memory_order_relaxed);
    slot.reading.store(0, std::memory_order_relaxed);
    if (!message.empty()) std::memcpy(slot.message, message.data(), message.size());
    slot.stamp.store(++stamps_, std::memory_order_release);
    return true;
  }
  return false;
}

bool NodeSlots::take(int rank, Key key, std::vector<std::byte>& into) {
  for (std::size_t i = 0; i < kSlots; ++i) {
    Slot& slot = slotOf(rank, i);
    std::uint64_t stamp = slot.stamp.load(std::memory_order_acquire);
    if (stamp == 0) continue;
    bool ours = slot.set.load(std::memory_order_relaxed) == key.set &&
                slot.number.load(std::memory_order_relaxed) == key.number &&
                slot.part.load(std::memory_order_relaxed) == key.part;
    if (!ours) continue;
    // Copying: a retract waits for it to end. A stamp changed under the key
    // or since: the slot is being posted again (for another call, since this
    // one's is not taken yet), or retracted.
    slot.reading.fetch_add(1);
    if (slot.stamp.load() != stamp) {
      slot.reading.fetch_sub(1);
      continue;
    }
    // Posted for this call and not yet taken by this reader: its writer
    // posts over it only once it is released, or after retracting it.
    std::size_t bytes = std::min<std::size_t>(slot.bytes.load(std::memory_order_relaxed),
                                              kMessageBytes);
    into.assign(slot.message, slot.message + bytes);
    slot.readersLeft.fetch_sub(1, std::memory_order_release);
    slot.reading.fetch_sub(1, std::memory_order_release);
    return true;
  }
  return false;
}

void NodeSlots::retract(Key key) {
  for (std::size_t i = 0; i < kSlots; ++i) {
    Slot& slot = slotOf(self_, i);
    if (slot.stamp.load(std::memory_order_relaxed) == 0 ||
        slot.set.load(std::memory_order_relaxed) != key.set ||
        slot.number.load(std::memory_order_relaxed) != key.number ||
        slot.part.load(std::memory_order_relaxed) != key.part)
      continue;
    // No reader starts a copy once the stamp is 0; the ones under way end
    // within a copy's time.
    slot.stamp.store(0);
    while (slot.reading.load() != 0) std::this_thread::yield();
    slot.readersLeft.store(0, std::memory_order_release);
  }
}

}  // namespace meshflow::runtime::mpi
