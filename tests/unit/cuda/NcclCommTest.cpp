// NcclComm's host-side logic on fake NCCL calls: the order in which a rank
// joins, and a wait that ends in success, in NCCL's asynchronous error or in
// the timeout — the last two aborting the communicator, never hanging.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/cuda/NcclComm.h"

namespace cuda = meshflow::runtime::cuda;
using Catch::Matchers::Contains;

namespace {

struct FakeNccl {
  std::vector<std::string> calls;
  int asyncError = 0;
  cuda::NcclId made{};

  cuda::NcclCalls bind() {
    cuda::NcclCalls c;
    c.getUniqueId = [this](cuda::NcclId& id) {
      calls.push_back("getUniqueId");
      id[0] = std::byte{42};
      made = id;
      return 0;
    };
    c.initRank = [this](cuda::NcclHandle& handle, int ranks, const cuda::NcclId& id, int rank) {
      calls.push_back("initRank " + std::to_string(rank) + "/" + std::to_string(ranks) + " id " +
                      std::to_string(static_cast<int>(id[0])));
      handle = this;
      return 0;
    };
    c.getAsyncError = [this](cuda::NcclHandle, int& error) {
      error = asyncError;
      return 0;
    };
    c.abort = [this](cuda::NcclHandle) {
      calls.push_back("abort");
      return 0;
    };
    c.destroy = [this](cuda::NcclHandle) {
      calls.push_back("destroy");
      return 0;
    };
    c.describe = [](int status) { return "fake error " + std::to_string(status); };
    return c;
  }
};

// The bootstrap broadcast of a job whose rank 0 already made id 42.
cuda::Broadcast broadcastFrom(std::vector<std::string>& calls) {
  return [&calls](std::span<std::byte> bytes, int root) {
    calls.push_back("broadcast from " + std::to_string(root));
    bytes[0] = std::byte{42};
  };
}

}  // namespace

TEST_CASE("rank 0 makes the unique id, every rank receives it, then joins", "[cuda][nccl]") {
  FakeNccl root, other;
  {
    cuda::NcclComm zero(root.bind(), broadcastFrom(root.calls), 0, 4);
    cuda::NcclComm two(other.bind(), broadcastFrom(other.calls), 2, 4);
    CHECK(two.rank() == 2);
  }
  CHECK(root.calls == std::vector<std::string>{"getUniqueId", "broadcast from 0", "initRank 0/4 id 42", "destroy"});
  CHECK(other.calls == std::vector<std::string>{"broadcast from 0", "initRank 2/4 id 42", "destroy"});
  CHECK_THROWS_WITH(cuda::NcclComm(other.bind(), broadcastFrom(other.calls), 4, 4), Contains("outside a group of 4"));
}

TEST_CASE("a failed join names the call and the rank", "[cuda][nccl]") {
  FakeNccl fake;
  cuda::NcclCalls calls = fake.bind();
  calls.initRank = [](cuda::NcclHandle&, int, const cuda::NcclId&, int) { return 3; };
  CHECK_THROWS_WITH(cuda::NcclComm(calls, broadcastFrom(fake.calls), 1, 2),
                    Contains("ncclCommInitRank failed on rank 1 of 2") && Contains("fake error 3"));
}

TEST_CASE("a wait returns when the work is done", "[cuda][nccl]") {
  FakeNccl fake;
  cuda::NcclComm comm(fake.bind(), broadcastFrom(fake.calls), 0, 2);
  int polls = 0;
  comm.wait([&] { return ++polls == 3; }, std::chrono::milliseconds(5000), "all-reduce");
  CHECK(polls == 3);
  CHECK_FALSE(comm.aborted());
}

TEST_CASE("NCCL's asynchronous error aborts the communicator and names the operation", "[cuda][nccl]") {
  FakeNccl fake;
  cuda::NcclComm comm(fake.bind(), broadcastFrom(fake.calls), 1, 2);
  fake.asyncError = 6;  // ncclRemoteError
  CHECK_THROWS_AS(comm.wait([] { return false; }, std::chrono::milliseconds(5000), "all-reduce of bucket 3"),
                  cuda::NcclError);
  CHECK(comm.aborted());
  CHECK(fake.calls.back() == "abort");
  CHECK_THROWS_WITH(comm.wait([] { return true; }, std::chrono::milliseconds(5000), "send"),
                    Contains("was aborted"));
}

TEST_CASE("a wait past the timeout aborts instead of hanging", "[cuda][nccl]") {
  FakeNccl fake;
  {
    cuda::NcclComm comm(fake.bind(), broadcastFrom(fake.calls), 0, 2);
    CHECK_THROWS_WITH(comm.wait([] { return false; }, std::chrono::milliseconds(20), "recv from rank 1"),
                      Contains("recv from rank 1 on rank 0 of 2 timed out after 20 ms"));
  }
  // Aborted: not destroyed as well.
  CHECK(std::count(fake.calls.begin(), fake.calls.end(), "abort") == 1);
  CHECK(std::count(fake.calls.begin(), fake.calls.end(), "destroy") == 0);
}

TEST_CASE("the real NCCL calls are bound, or the build says it has none", "[cuda][nccl]") {
#if MESHFLOW_HAVE_NCCL
  cuda::NcclCalls calls = cuda::ncclCalls();
  CHECK(calls.describe(0).find("ncclResult_t 0") != std::string::npos);
#else
  CHECK_THROWS_WITH(cuda::ncclCalls(), Contains("no NCCL"));
#endif
}
