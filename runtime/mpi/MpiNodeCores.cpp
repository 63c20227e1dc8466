#include "runtime/mpi/MpiNodeCores.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

namespace meshflow::runtime::mpi {

// A rank's doorbell, on a cache line of its own: rung (counted up) by the
// node's ranks that send to it, `sleeping` while it waits on it (a ring
// wakes it only then: the futex call costs a system call).
struct alignas(64) NodeCores::Bell {
  std::atomic<std::uint32_t> rung;
  std::atomic<std::uint32_t> sleeping;
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

namespace {

constexpr std::size_t kNameBytes = 64;

// Maps `bytes` of the shared memory object `name`, creating it when `create`;
// null when that fails.
void* mapShared(const char* name, std::size_t bytes, bool create) {
  int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) return nullptr;
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    shm_unlink(name);
    return nullptr;
  }
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return memory == MAP_FAILED ? nullptr : memory;
}

std::size_t roundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// The futex word of `bell` (an atomic of 32 bits is its value alone).
std::uint32_t* word(std::atomic<std::uint32_t>& bell) { return reinterpret_cast<std::uint32_t*>(&bell); }

}  // namespace

int NodeCores::hostCores() {
  if (const char* set = std::getenv("MESHFLOW_HOST_CORES"); set && *set) return std::atoi(set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

std::unique_ptr<NodeCores> NodeCores::share(MPI_Comm node, int worldRank, int cores, bool slots) {
  int nodeRank = 0, nodeSize = 1, worldSize = 1;
  MPI_Comm_rank(node, &nodeRank);
  MPI_Comm_size(node, &nodeSize);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  if (nodeSize < 2) return nullptr;
  int gateCores = cores > 0 && nodeSize > cores ? cores : 0;
  std::size_t bellsAt = roundUp(cpu::CoreGate::sharedBytes(nodeSize), alignof(Bell));
  std::size_t slotsAt = roundUp(bellsAt + static_cast<std::size_t>(nodeSize) * sizeof(Bell), 64);
  std::size_t bytes = slotsAt + NodeSlots::sharedBytes(nodeSize);
  // The node's first rank makes the memory and the gate in it, then names it
  // to the others (an empty name: none could be made).
  std::array<char, kNameBytes> name{};
  std::unique_ptr<NodeCores> shared;
  auto attach = [&](void* memory, bool create) {
    if (!memory) return;
    shared.reset(new NodeCores(memory, bytes));
    shared->bellsAt_ = bellsAt;
    shared->slot_ = nodeRank;
    shared->slots_ = std::make_unique<NodeSlots>(static_cast<char*>(memory) + slotsAt, nodeSize,
                                                 nodeRank);
    shared->gate_ = cpu::CoreGate::attach(memory, create, gateCores, nodeSize, worldRank, nodeRank,
                                          std::chrono::milliseconds(0));
  };
  if (nodeRank == 0) {
    auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    std::string made = fmt::format("/meshflow-node-{}-{}", getpid(), stamp % 1000000007);
    void* memory = mapShared(made.c_str(), bytes, true);
    if (memory) {
      std::memset(memory, 0, bytes);  // the bells start at 0, nobody sleeping
      attach(memory, true);
      std::strncpy(name.data(), made.c_str(), name.size() - 1);
    }
  }
  MPI_Bcast(name.data(), static_cast<int>(name.size()), MPI_CHAR, 0, node);
  if (name[0] == '\0') return nullptr;
  if (nodeRank != 0) attach(mapShared(name.data(), bytes, false), false);
  // Every rank has tried to map it: the name can go, and the memory goes
  // with the last rank to unmap it, however the job ends. Shared by all the
  // node's ranks or by none: a rank without it would not read its peers'
  // slots.
  int agreed[2] = {shared ? 1 : 0, slots ? 1 : 0};
  MPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT, MPI_MIN, node);
  if (nodeRank == 0) shm_unlink(name.data());
  if (!agreed[0]) return nullptr;
  if (!agreed[1]) shared->slots_.reset();
  if (shared) {
    // Which world ranks are on this node, and in which slot.
    MPI_Group worldGroup, nodeGroup;
    MPI_Comm_group(MPI_COMM_WORLD, &worldGroup);
    MPI_Comm_group(node, &nodeGroup);
    std::vector<int> nodeRanks(static_cast<std::size_t>(nodeSize)), worldRanks(nodeRanks.size());
    for (int i = 0; i < nodeSize; ++i) nodeRanks[static_cast<std::size_t>(i)] = i;
    MPI_Group_translate_ranks(nodeGroup, nodeSize, nodeRanks.data(), worldGroup, worldRanks.data());
    MPI_Group_free(&nodeGroup);
    MPI_Group_free(&worldGroup);
    shared->slotOfRank_.assign(static_cast<std::size_t>(worldSize), -1);
    for (int i = 0; i < nodeSize; ++i)
      shared->slotOfRank_[static_cast<std::size_t>(worldRanks[static_cast<std::size_t>(i)])] = i;
  }
  return shared;
}

NodeCores::~NodeCores() {
  gate_.reset();
  slots_.reset();
  munmap(memory_, bytes_);
}

NodeCores::Bell& NodeCores::bellOf(int slot) const {
  return reinterpret_cast<Bell*>(static_cast<char*>(memory_) + bellsAt_)[slot];
}

void NodeCores::ring(int worldRank) {
  int slot = slotOf(worldRank);
  if (slot < 0 || slot == slot_) return;
  Bell& bell = bellOf(slot);
  // Sequentially consistent, against sleepUntilRung's: either the sleeper
  // sees the new count, or this sees it sleeping and wakes it.
  bell.rung.fetch_add(1);
  if (bell.sleeping.load())
    syscall(SYS_futex, word(bell.rung), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

std::uint32_t NodeCores::bell() const { return bellOf(slot_).rung.load(); }

void NodeCores::sleepUntilRung(std::uint32_t seen, std::chrono::microseconds limit) {
  Bell& bell = bellOf(slot_);
  bell.sleeping.store(1);
  if (bell.rung.load() == seen) {
    timespec wait{};
    wait.tv_sec = static_cast<time_t>(limit.count() / 1'000'000);
    wait.tv_nsec = static_cast<long>(limit.count() % 1'000'000 * 1000);
    // Returns at once when the count is no longer `seen`.
    syscall(SYS_futex, word(bell.rung), FUTEX_WAIT, seen, &wait, nullptr, 0);
  }
  bell.sleeping.store(0);
}

}  // namespace meshflow::runtime::mpi
