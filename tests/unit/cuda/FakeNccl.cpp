#include "tests/unit/cuda/FakeNccl.h"

#include <algorithm>

namespace meshflow::test {
namespace cuda = runtime::cuda;

namespace {

// A thread's open groups: how deep, and the calls held until the outermost ends.
thread_local int groupDepth = 0;
thread_local std::vector<std::function<void()>> heldCalls;

std::size_t bytesOf(std::size_t count, ir::DType dtype) { return count * ir::dtypeBytes(dtype); }

// out = the sum of `ins` in descending rank order; false for a dtype the fake cannot sum.
bool sum(const std::vector<const std::byte*>& ins, std::byte* out, std::size_t count,
         ir::DType dtype) {
  std::vector<std::byte> total(bytesOf(count, dtype));
  for (std::size_t k = ins.size(); k-- > 0;) {
    for (std::size_t i = 0; i < count; ++i) {
      if (dtype == ir::DType::F32) {
        float a, b;
        std::memcpy(&a, total.data() + 4 * i, 4);
        std::memcpy(&b, ins[k] + 4 * i, 4);
        a = k + 1 == ins.size() ? b : a + b;
        std::memcpy(total.data() + 4 * i, &a, 4);
      } else if (dtype == ir::DType::I32) {
        std::uint32_t a, b;
        std::memcpy(&a, total.data() + 4 * i, 4);
        std::memcpy(&b, ins[k] + 4 * i, 4);
        a = k + 1 == ins.size() ? b : a + b;
        std::memcpy(total.data() + 4 * i, &a, 4);
      } else {
        return false;
      }
    }
  }
  if (!total.empty()) std::memcpy(out, total.data(), total.size());
  return true;
}

}  // namespace

std::shared_ptr<bool> FakeNccl::track(cuda::NcclStream stream) {
  auto done = std::make_shared<bool>(false);
  static_cast<Stream*>(stream)->done.push_back(done);
  return done;
}

void FakeNccl::post(int device, cuda::NcclStream stream, Post call) {
  {
    std::lock_guard lock(mutex_);
    if (hung_[device] || asyncErrors_[device]) {  // its GPU never gets to it
      track(stream);
      return;
    }
  }
  if (groupDepth > 0) {
    heldCalls.push_back(std::move(call));
    return;
  }
  call();
}

void FakeNccl::fail(Comm& comm, int status) { failed_[&comm] = status; }

void FakeNccl::enqueueCollective(Member& m, cuda::NcclStream stream, Part part) {
  std::lock_guard lock(mutex_);
  part.done = track(stream);
  part.member = &m;
  Comm& comm = *m.comm;
  auto& parts = comm.collectives[comm.nextCollective[m.rank]++];
  parts[m.rank] = part;
  if (static_cast<int>(parts.size()) == comm.ranks) completeCollective(comm, parts);
}

void FakeNccl::completeCollective(Comm& comm, std::map<int, Part>& parts) {
  const Part& first = parts.begin()->second;
  for (const auto& [rank, part] : parts)
    if (part.member->aborted) return;
  for (const auto& [rank, part] : parts)
    if (part.kind != first.kind || part.count != first.count || part.dtype != first.dtype ||
        part.root != first.root)
      return fail(comm, kInvalidUsage);  // NCCL would hang or garble; the fake reports it
  const std::size_t bytes = bytesOf(first.count, first.dtype);
  const auto n = static_cast<std::size_t>(comm.ranks);
  std::vector<const std::byte*> ins;
  for (const auto& [rank, part] : parts) ins.push_back(static_cast<const std::byte*>(part.in));
  std::vector<std::byte> reduced;
  if (first.kind == "allReduce" || first.kind == "reduceScatter") {
    const std::size_t total = first.kind == "allReduce" ? first.count : first.count * n;
    reduced.resize(bytesOf(total, first.dtype));
    if (!sum(ins, reduced.data(), total, first.dtype)) return fail(comm, kInvalidUsage);
  }
  for (auto& [rank, part] : parts) {
    auto* out = static_cast<std::byte*>(part.out);
    const auto r = static_cast<std::size_t>(rank);
    if (bytes > 0) {
      if (first.kind == "allReduce") std::memcpy(out, reduced.data(), bytes);
      if (first.kind == "reduceScatter") std::memcpy(out, reduced.data() + r * bytes, bytes);
      if (first.kind == "allGather")
        for (std::size_t k = 0; k < n; ++k) std::memcpy(out + k * bytes, ins[k], bytes);
      if (first.kind == "broadcast")
        std::memmove(out, ins[static_cast<std::size_t>(first.root)], bytes);
    }
    *part.done = true;
  }
  parts.clear();
}

void FakeNccl::enqueueP2p(Member& m, cuda::NcclStream stream, int peer, Part part, bool sending) {
  std::lock_guard lock(mutex_);
  part.done = track(stream);
  part.member = &m;
  const std::pair<int, int> pair = sending ? std::pair{m.rank, peer} : std::pair{peer, m.rank};
  (sending ? m.comm->sends : m.comm->recvs)[pair].push_back(part);
  matchP2p(*m.comm, pair.first, pair.second);
}

void FakeNccl::matchP2p(Comm& comm, int from, int to) {
  auto& sends = comm.sends[{from, to}];
  auto& recvs = comm.recvs[{from, to}];
  while (!sends.empty() && !recvs.empty()) {
    Part send = sends.front(), recv = recvs.front();
    if (send.member->aborted || recv.member->aborted) return;
    if (send.count != recv.count || send.dtype != recv.dtype) return fail(comm, kInvalidUsage);
    if (send.count > 0) std::memcpy(recv.out, send.in, bytesOf(send.count, send.dtype));
    *send.done = *recv.done = true;
    sends.pop_front();
    recvs.pop_front();
  }
}

cuda::NcclCalls FakeNccl::calls(int device) {
  cuda::NcclCalls c;
  c.getUniqueId = [self = shared_from_this()](cuda::NcclId& id) {
    std::lock_guard lock(self->mutex_);
    const std::uint64_t made = static_cast<std::uint64_t>(++self->idsMade_);
    id.fill(std::byte{0});
    std::memcpy(id.data(), &made, sizeof made);
    return 0;
  };
  c.initRank = [self = shared_from_this(), device](cuda::NcclHandle& handle, int ranks,
                                                   const cuda::NcclId& id, int rank) {
    return self->join(device, handle, ranks, id, rank);
  };
  c.getAsyncError = [self = shared_from_this(), device](cuda::NcclHandle handle, int& error) {
    return self->asyncError(device, handle, error);
  };
  c.abort = [self = shared_from_this()](cuda::NcclHandle handle) {
    std::lock_guard lock(self->mutex_);
    auto* m = static_cast<Member*>(handle);
    m->aborted = m->comm->aborted = true;
    return 0;
  };
  c.destroy = [](cuda::NcclHandle) { return 0; };
  c.describe = [](int status) { return "fake NCCL status " + std::to_string(status); };
  c.groupStart = [] {
    ++groupDepth;
    return 0;
  };
  c.groupEnd = [] {
    if (groupDepth == 0) return kInvalidUsage;
    if (--groupDepth == 0) {
      auto held = std::move(heldCalls);
      heldCalls.clear();
      for (auto& call : held) call();
    }
    return 0;
  };
  bindData(c, device);
  return c;
}

int FakeNccl::join(int device, cuda::NcclHandle& handle, int ranks, const cuda::NcclId& id,
                   int rank) {
  std::uint64_t key = 0;
  std::memcpy(&key, id.data(), sizeof key);
  std::unique_lock lock(mutex_);
  ++joins_[device];
  if (key == 0) return kInvalidUsage;  // an id nobody made
  auto& comm = comms_[key];
  if (!comm) {
    comm = std::make_unique<Comm>();
    comm->ranks = ranks;
    comm->members.assign(static_cast<std::size_t>(ranks), nullptr);
    comm->nextCollective.assign(static_cast<std::size_t>(ranks), 0);
  }
  if (comm->ranks != ranks || comm->members[static_cast<std::size_t>(rank)]) return kInvalidUsage;
  members_.push_back(std::make_unique<Member>(Member{comm.get(), rank, device}));
  comm->members[static_cast<std::size_t>(rank)] = members_.back().get();
  handle = members_.back().get();
  ++comm->joined;
  joinedAll_.notify_all();
  Comm* joining = comm.get();
  const bool all = joinedAll_.wait_for(lock, std::chrono::seconds(10),
                                       [&] { return joining->joined == joining->ranks; });
  return all ? 0 : kSystemError;
}

int FakeNccl::asyncError(int device, cuda::NcclHandle handle, int& error) {
  std::lock_guard lock(mutex_);
  auto* m = static_cast<Member*>(handle);
  error = asyncErrors_[device];
  if (!error && failed_.count(m->comm)) error = failed_[m->comm];
  if (!error && peersSeeAborts && m->comm->aborted && !m->aborted) error = kRemoteError;
  return 0;
}

void FakeNccl::bindData(cuda::NcclCalls& c, int device) {
  auto collective = [this, device](std::string kind) {
    return [self = shared_from_this(), device, kind](const void* in, void* out, std::size_t count,
                                                     ir::DType dtype, cuda::NcclHandle h,
                                                     cuda::NcclStream s) {
      auto* m = static_cast<Member*>(h);
      self->post(device, s, [=] {
        self->enqueueCollective(*m, s, Part{kind, in, out, count, dtype, -1, nullptr});
      });
      return 0;
    };
  };
  c.allReduce = collective("allReduce");
  c.allGather = collective("allGather");
  c.reduceScatter = collective("reduceScatter");
  c.broadcast = [self = shared_from_this(), device](const void* in, void* out, std::size_t count,
                                                    ir::DType dtype, int root, cuda::NcclHandle h,
                                                    cuda::NcclStream s) {
    auto* m = static_cast<Member*>(h);
    self->post(device, s, [=] {
      self->enqueueCollective(*m, s, Part{"broadcast", in, out, count, dtype, root, nullptr});
    });
    return 0;
  };
  c.send = [self = shared_from_this(), device](const void* data, std::size_t count, ir::DType dtype,
                                               int peer, cuda::NcclHandle h, cuda::NcclStream s) {
    auto* m = static_cast<Member*>(h);
    self->post(device, s, [=] {
      self->enqueueP2p(*m, s, peer, Part{"send", data, nullptr, count, dtype, -1, nullptr}, true);
    });
    return 0;
  };
  c.recv = [self = shared_from_this(), device](void* data, std::size_t count, ir::DType dtype,
                                               int peer, cuda::NcclHandle h, cuda::NcclStream s) {
    auto* m = static_cast<Member*>(h);
    self->post(device, s, [=] {
      self->enqueueP2p(*m, s, peer, Part{"recv", nullptr, data, count, dtype, -1, nullptr}, false);
    });
    return 0;
  };
  c.streamDone = [self = shared_from_this()](cuda::NcclStream s) {
    std::lock_guard lock(self->mutex_);
    auto& done = static_cast<Stream*>(s)->done;
    std::erase_if(done, [](const std::shared_ptr<bool>& d) { return *d; });
    return done.empty();
  };
  c.makeStream = [self = shared_from_this()] {
    std::lock_guard lock(self->mutex_);
    self->madeStreams_.push_back(std::make_unique<Stream>());
    return static_cast<cuda::NcclStream>(self->madeStreams_.back().get());
  };
  c.destroyStream = [](cuda::NcclStream) {};
  c.recordEvent = [self = shared_from_this()](cuda::NcclStream s) {
    std::lock_guard lock(self->mutex_);
    self->events_.push_back(std::make_unique<Stream>(*static_cast<Stream*>(s)));
    return static_cast<cuda::NcclEvent>(self->events_.back().get());
  };
  c.eventDone = [self = shared_from_this()](cuda::NcclEvent e) {
    std::lock_guard lock(self->mutex_);
    auto& done = static_cast<Stream*>(e)->done;
    std::erase_if(done, [](const std::shared_ptr<bool>& d) { return *d; });
    return done.empty();
  };
  c.destroyEvent = [](cuda::NcclEvent) {};
}

}  // namespace meshflow::test
