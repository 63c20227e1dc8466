// mpi::NodeSlots: posts keyed by call and part, taken once per reader, free again
// once every reader took them or their writer retracted them; and a post
// racing takes on other threads never hands a reader a torn message.
#include "runtime/mpi/NodeSlots.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

using meshflow::runtime::mpi::NodeSlots;

namespace {

// Shared memory of `ranks` ranks' slots, zeroed as NodeCores makes it.
struct Memory {
  explicit Memory(int ranks) : bytes(NodeSlots::sharedBytes(ranks) / 64 + 1) {}
  void* data() { return bytes.data(); }
  std::vector<std::uint64_t[8]> bytes;  // 64-byte units, zeroed
};

std::vector<std::byte> message(std::size_t size, int seed) {
  std::vector<std::byte> out(size);
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return out;
}

}  // namespace

TEST_CASE("a post is taken by key, once by each reader, then its slot is free") {
  Memory memory(3);
  NodeSlots writer(memory.data(), 3, 0), readerA(memory.data(), 3, 1), readerB(memory.data(), 3, 2);
  NodeSlots::Key key{NodeSlots::setKey({2, 0, 1}), 5};
  REQUIRE(key.set == NodeSlots::setKey({0, 1, 2}));  // the member set, in any order
  REQUIRE(key.set != NodeSlots::setKey({0, 1}));

  std::vector<std::byte> got;
  CHECK_FALSE(readerA.take(0, key, got));  // not posted yet
  auto sent = message(1000, 7);
  REQUIRE(writer.post(key, sent, 2));
  CHECK_FALSE(readerA.take(0, {key.set, 6}, got));  // another call's number
  CHECK_FALSE(readerA.take(0, {key.set + 1, 5}, got));  // another member set's
  CHECK_FALSE(readerA.take(0, {key.set, 5, 1}, got));  // another part of the call
  REQUIRE(readerA.take(0, key, got));
  CHECK(got == sent);
  REQUIRE(readerB.take(0, key, got));
  CHECK(got == sent);

  // Every slot but the one both readers took is filled by posts nobody reads:
  // kSlots more posts fit, then none until one is read.
  for (std::uint64_t n = 0; n < NodeSlots::kSlots; ++n)
    REQUIRE(writer.post({key.set, 100 + n}, message(10, 1), 1));
  CHECK_FALSE(writer.post({key.set, 200}, message(10, 1), 1));
  REQUIRE(readerA.take(0, {key.set, 103}, got));
  CHECK(writer.post({key.set, 200}, message(10, 2), 1));
  CHECK_FALSE(writer.post({key.set, 201}, message(10, 2), 1));
}

TEST_CASE("a retracted post is taken by nobody and frees its slot") {
  Memory memory(2);
  NodeSlots writer(memory.data(), 2, 0), reader(memory.data(), 2, 1);
  std::uint64_t set = NodeSlots::setKey({0, 1});
  for (std::uint64_t n = 0; n < NodeSlots::kSlots; ++n)
    REQUIRE(writer.post({set, n}, message(64, 3), 1));
  CHECK_FALSE(writer.post({set, 99}, message(64, 3), 1));
  writer.retract({set, 4});
  std::vector<std::byte> got;
  CHECK_FALSE(reader.take(0, {set, 4}, got));
  CHECK(reader.take(0, {set, 5}, got));
  REQUIRE(writer.post({set, 99}, message(64, 4), 1));
  REQUIRE(writer.post({set, 100}, message(64, 4), 1));  // the slot of 5, read
  CHECK_FALSE(writer.post({set, 101}, message(64, 4), 1));
}

TEST_CASE("a message longer than a slot is refused") {
  Memory memory(2);
  NodeSlots writer(memory.data(), 2, 0);
  CHECK_THROWS(writer.post({1, 1}, message(NodeSlots::kMessageBytes + 1, 0), 1));
  CHECK(writer.post({1, 1}, message(NodeSlots::kMessageBytes, 0), 1));
}

TEST_CASE("posts racing takes on other threads are never torn") {
  // One writer posts calls 0..N-1 as fast as slots free up, each message
  // filled with its call number; three readers take every call in order and
  // check every byte. A reader that copied a slot while it was posted over
  // would see two numbers.
  constexpr int kReaders = 3;
  constexpr std::uint64_t kCalls = 3000;
  Memory memory(kReaders + 1);
  std::uint64_t set = NodeSlots::setKey({0, 1, 2, 3});
  std::atomic<int> torn{0};
  std::thread writerThread([&] {
    NodeSlots writer(memory.data(), kReaders + 1, 0);
    std::mt19937 sizes(11);
    for (std::uint64_t n = 0; n < kCalls; ++n) {
      std::vector<std::byte> body(64 + sizes() % 4000, static_cast<std::byte>(n & 0xff));
      while (!writer.post({set, n}, body, kReaders)) std::this_thread::yield();
    }
  });
  std::vector<std::thread> readers;
  for (int r = 1; r <= kReaders; ++r)
    readers.emplace_back([&, r] {
      NodeSlots reader(memory.data(), kReaders + 1, r);
      std::vector<std::byte> got;
      for (std::uint64_t n = 0; n < kCalls; ++n) {
        while (!reader.take(0, {set, n}, got)) std::this_thread::yield();
        for (std::byte b : got)
          if (b != static_cast<std::byte>(n & 0xff)) {
            ++torn;
            break;
          }
      }
    });
  writerThread.join();
  for (auto& t : readers) t.join();
  CHECK(torn.load() == 0);
}
