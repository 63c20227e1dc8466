#include "runtime/mpi/MpiProcess.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <thread>

#include "runtime/mpi/MpiWorld.h"

namespace meshflow::runtime::mpi {

using Kind = CommError::Kind;

void checkMpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(fmt::format("{} failed: {}", call, std::string(text, length)));
}

std::string durationText(std::chrono::milliseconds duration) {
  if (duration.count() > 0 && duration.count() % 1000 == 0)
    return fmt::format("{} s", duration.count() / 1000);
  return fmt::format("{} ms", duration.count());
}

// ---- MpiWorld ----

namespace {

// The unsigned integer of `size` bytes at `bytes` (a bool is 1 byte).
std::optional<std::uint64_t> unsignedOf(const unsigned char* bytes, int size) {
  auto read = [&](auto value) {
    std::memcpy(&value, bytes, sizeof value);
    return static_cast<std::uint64_t>(value);
  };
  switch (size) {
    case 1:
      return read(std::uint8_t{});
    case 2:
      return read(std::uint16_t{});
    case 4:
      return read(std::uint32_t{});
    case 8:
      return read(std::uint64_t{});
    default:
      return std::nullopt;
  }
}

// An MPI control variable with a whole-number value (a bool, an int, a
// size), by name through MPI_T; none when this MPI has no such variable.
std::optional<std::uint64_t> readSetting(const char* name) {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return std::nullopt;
  std::optional<std::uint64_t> value;
  int index = 0, count = 0, verbosity = 0, bind = 0, scope = 0, size = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype;
  MPI_T_cvar_handle handle;
  if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS &&
      MPI_T_cvar_get_info(index, nullptr, nullptr, &verbosity, &type, &enumtype, nullptr, nullptr,
                          &bind, &scope) == MPI_SUCCESS &&
      MPI_Type_size(type, &size) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    alignas(8) unsigned char bytes[64] = {};
    if (count == 1 && MPI_T_cvar_read(handle, bytes) == MPI_SUCCESS)
      value = unsignedOf(bytes, size);
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return value;
}

}  // namespace

MpiWorld::MpiWorld(int* argc, char*** argv, MpiOptions options) : options(options) {
  if (options.timeout.count() <= 0)
    throw std::invalid_argument(fmt::format("the communication timeout must be positive, not {}",
                                            durationText(options.timeout)));
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // Serialized rather than funneled: the device's thread need not be the
    // one that started MPI (one thread at a time calls it either way).
    checkMpi(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    initializedHere = true;
    if (provided < MPI_THREAD_FUNNELED)
      throw std::runtime_error("this MPI does not support MPI_THREAD_FUNNELED");
  }
  // Errors come back as codes (and become exceptions) instead of ending the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  checkMpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  checkMpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  for (MPI_Comm& comm : comms) {
    checkMpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }
  MPI_Comm node;
  checkMpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
           "MPI_Comm_split_type");
  int onNode = 1;
  MPI_Comm_size(node, &onNode);
  int cores = NodeCores::hostCores();
  const char* slots = std::getenv("MESHFLOW_NODE_SLOTS");
  nodeCores = NodeCores::share(node, rank, cores, !(slots && std::string(slots) == "0"));
  if (nodeCores && nodeCores->gate()) nodeCores->gate()->setWaitLimit(options.timeout);
  MPI_Comm_free(&node);
  if (onNode > cores) spinBeforeYield = std::chrono::microseconds(0);
  mpiYieldsWhenIdle = readSetting("mpi_yield_when_idle").value_or(0) != 0;
  // Open MPI's shared-memory transport (vader) sends up to this many bytes
  // at once; a longer message waits for its receiver to take it.
  // Every rank takes the least, so that all split a call's messages alike.
  std::uint64_t eager = readSetting("btl_vader_eager_limit").value_or(UINT64_MAX);
  checkMpi(MPI_Allreduce(MPI_IN_PLACE, &eager, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD),
           "MPI_Allreduce");
  if (eager > 0 && eager < UINT64_MAX) eagerBytes = static_cast<std::size_t>(eager);
  int* limit = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &limit, &found);
  if (found && limit) tagLimit = *limit;
}

MpiWorld::~MpiWorld() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Let what was sent leave (an abort notice above all), then finalize only
  // when no rank may be gone: MPI_Finalize waits for every rank.
  if (failed) {
    drainSends(std::min(options.timeout, std::chrono::milliseconds(2000)));
    background.clear();
    return;
  }
  bool sent = drainSends(options.timeout);
  background.clear();
  if (!sent || !initializedHere) return;
  for (MPI_Comm& comm : comms) MPI_Comm_free(&comm);
  MPI_Finalize();
}

void MpiWorld::postSend(Channel channel, int peer, int tag, const void* data, std::size_t bytes,
                        std::shared_ptr<const void> holder) {
  auto* from = static_cast<const char*>(data);
  do {
    std::size_t piece = std::min(bytes, kPieceBytes);
    MPI_Request request;
    checkMpi(
        MPI_Isend(from, static_cast<int>(piece), MPI_BYTE, peer, tag, comms[channel], &request),
        "MPI_Isend");
    sendRequests.push_back(request);
    sendHolders.push_back(holder);
    from += piece;
    bytes -= piece;
  } while (bytes > 0);
  if (nodeCores) nodeCores->ring(peer);
}

void MpiWorld::postRecv(Channel channel, int peer, int tag, void* data, std::size_t bytes,
                        std::vector<MPI_Request>& requests) {
  auto* into = static_cast<char*>(data);
  do {
    std::size_t piece = std::min(bytes, kPieceBytes);
    MPI_Request request;
    checkMpi(
        MPI_Irecv(into, static_cast<int>(piece), MPI_BYTE, peer, tag, comms[channel], &request),
        "MPI_Irecv");
    requests.push_back(request);
    into += piece;
    bytes -= piece;
  } while (bytes > 0);
}

void MpiWorld::abandon(std::vector<MPI_Request>& requests, std::shared_ptr<const void> holder,
                       bool cancel) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // the test ended MPI itself; nothing is in flight any more
  for (MPI_Request& request : requests) {
    if (request == MPI_REQUEST_NULL) continue;
    if (cancel) MPI_Cancel(&request);
    strayRequests.push_back(request);
    strayHolders.push_back(holder);
    request = MPI_REQUEST_NULL;
  }
}

Scratch MpiWorld::takeScratch(std::size_t bytes) {
  // The smallest kept buffer that is big enough.
  auto best = scratch.end();
  for (auto it = scratch.begin(); it != scratch.end(); ++it)
    if (it->capacity >= bytes && (best == scratch.end() || it->capacity < best->capacity))
      best = it;
  if (best != scratch.end()) {
    Scratch found = std::move(*best);
    scratch.erase(best);
    return found;
  }
  return Scratch{std::unique_ptr<std::byte[]>(new std::byte[std::max<std::size_t>(bytes, 1)]),
                 bytes};
}

void MpiWorld::giveScratch(Scratch buffer) {
  if (!buffer.bytes) return;
  scratch.push_back(std::move(buffer));
  if (scratch.size() <= kScratchKept) return;
  // Keep the biggest ones: they are the ones that cost to make again.
  auto smallest =
      std::min_element(scratch.begin(), scratch.end(),
                       [](const Scratch& a, const Scratch& b) { return a.capacity < b.capacity; });
  scratch.erase(smallest);
}

namespace {

// Tests every request of `requests`, dropping the completed ones with their
// holders; returns whether any completed. Errors of sends and strays are
// not this operation's: the operation that waits on their peer reports it.
bool testAndDrop(std::vector<MPI_Request>& requests,
                 std::vector<std::shared_ptr<const void>>& holders, std::vector<int>& indices) {
  if (requests.empty()) return false;
  int count = static_cast<int>(requests.size());
  if (indices.size() < requests.size()) indices.resize(requests.size());
  int completed = 0;
  MPI_Testsome(count, requests.data(), &completed, indices.data(), MPI_STATUSES_IGNORE);
  if (completed <= 0) return false;  // none, or MPI_UNDEFINED: all were null
  std::size_t kept = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    requests[kept] = requests[i];
    holders[kept] = std::move(holders[i]);
    ++kept;
  }
  requests.resize(kept);
  holders.resize(kept);
  return true;
}

}  // namespace

bool MpiWorld::progress() {
  bool any = testAndDrop(sendRequests, sendHolders, completedIndices);
  any = testAndDrop(strayRequests, strayHolders, completedIndices) || any;
  for (std::size_t i = 0; i < background.size();) {
    // Hold it: advance() may finish it, and its handle may then let it go.
    std::shared_ptr<BackgroundOp> op = background[i];
    op->advance();
    if (op->done()) {
      background.erase(background.begin() + static_cast<std::ptrdiff_t>(i));
      any = true;
    } else {
      ++i;
    }
  }
  return any;
}

bool MpiWorld::drainSends(std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  while (!sendRequests.empty() || !background.empty()) {
    try {
      if (!progress() && Clock::now() > deadline) return false;
    } catch (const std::exception&) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

void MpiWorld::throwIfAborted(const Text& what) {
  if (abortReason) throw error(Kind::Aborted, what() + ": aborted: " + *abortReason);
}

void MpiWorld::lookForAbort() {
  if (!abortReason) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, 0, comms[kAbortChannel], &flag, &status);
    if (flag) {
      int length = 0;
      MPI_Get_count(&status, MPI_CHAR, &length);
      std::string reason(static_cast<std::size_t>(std::max(length, 0)), '\0');
      MPI_Recv(reason.data(), length, MPI_CHAR, status.MPI_SOURCE, 0, comms[kAbortChannel],
               MPI_STATUS_IGNORE);
      abortReason = fmt::format("rank {} failed: {}", status.MPI_SOURCE, reason);
      failed = true;
    }
  }
}

void MpiWorld::abort(const std::string& reason) {
  failed = true;
  if (!abortReason) abortReason = fmt::format("rank {} failed: {}", rank, reason);
  if (sentAbort) return;
  sentAbort = true;
  auto text = std::make_shared<const std::string>(reason);
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) postSend(kAbortChannel, peer, 0, text->data(), text->size(), text);
  progress();
}

void MpiWorld::await(const Text& what, std::optional<std::chrono::milliseconds> timeout,
                     const std::function<bool()>& ready,
                     const std::function<std::string()>& missing, bool abortEnds) {
  auto start = Clock::now();
  auto idleSince = start;
  // A rank that must wait gives its host core to the next in line (when the
  // node's ranks share cores) and takes it back once what it waits for came.
  std::optional<cpu::CoreGate::Yield> offCore;
  std::optional<Clock::time_point> abortLooked;
  for (;;) {
    // The bell as it was before looking: a message that comes after the look
    // rings it, and the sleep below returns at once.
    std::uint32_t bell = nodeCores ? nodeCores->bell() : 0;
    bool moved = progress();
    // What has arrived is taken even after an abort (the controller still
    // gathers the failed step's replies); only a wait for more ends.
    if (ready()) return;
    if (!offCore && nodeCores && nodeCores->gate()) offCore.emplace(nodeCores->gate(), rank);
    auto now = Clock::now();
    // Abort notices are looked for at most every kAbortLook: each look is an
    // MPI poll, and a poll that finds nothing yields the core when MPI
    // yields when idle (as Open MPI does when ranks outnumber cores).
    if (abortEnds) {
      if (!abortLooked || now - *abortLooked >= kAbortLook) {
        abortLooked = now;
        lookForAbort();
      }
      throwIfAborted(what);
    }
    if (timeout && now - start > *timeout) {
      failed = true;
      throw error(Kind::Timeout, fmt::format("{} timed out after {}{}", what(),
                                             durationText(*timeout), missing()));
    }
    // Poll while things move, and for 50 us after when each rank has a core
    // of its own: a message from a peer that is on its way comes within
    // microseconds, and a yield costs more. Then give the core away: yields
    // until 200 us, which keep MPI's progress (and a large transfer) going,
    // then short sleeps, which still see an abort notice within a fraction
    // of a millisecond. Yielding longer starves the ranks that compute when
    // ranks outnumber cores: the tiny GPT's step on 4 ranks and 2 cores took
    // 43 ms with 10 ms of yields, 19.5 ms with 200 us (bench/mpi/step_time.sh).
    if (moved) idleSince = now;
    auto idle = now - idleSince;
    if (idle < spinBeforeYield) continue;
    // A sleep ends early when a rank of the node sends this one something
    // (NodeCores' doorbells), and after 50 us in any case: not everything
    // that moves a wait rings a bell (messages from other nodes, MPI's own
    // protocol messages). Sleeping up to 2 ms on the bell made the tiny
    // GPT's step on 4 ranks and 2 cores 2.0x the cpu backend's; 50 us, 1.1x.
    if (idle < std::chrono::microseconds(200)) {
      // MPI's own polls above have yielded already when it yields when idle.
      if (!mpiYieldsWhenIdle) sched_yield();
    } else if (nodeCores)
      nodeCores->sleepUntilRung(bell, std::chrono::microseconds(50));
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// ---- MpiProcess ----

struct MpiProcess::State {
  State(int* argc, char*** argv, MpiOptions options) : world(argc, argv, options) {}
  MpiWorld world;
  std::unique_ptr<Communicator> communicator;
  // Control messages to this rank itself, in order.
  std::deque<std::string> selfControl;
};

MpiProcess::MpiProcess(int* argc, char*** argv, MpiOptions options)
    : state_(std::make_unique<State>(argc, argv, options)) {
  state_->communicator = makeMpiCommunicator(state_->world);
}

MpiProcess::~MpiProcess() {
  // The communicator's operations go before the world they run in.
  state_->communicator.reset();
}

int MpiProcess::rank() const { return state_->world.rank; }
int MpiProcess::size() const { return state_->world.size; }
const MpiOptions& MpiProcess::options() const { return state_->world.options; }

void MpiProcess::setOptions(const MpiOptions& options) {
  if (options.timeout.count() <= 0)
    throw std::invalid_argument(fmt::format("the communication timeout must be positive, not {}",
                                            durationText(options.timeout)));
  state_->world.options = options;
  if (cpu::CoreGate* gate = hostCores()) gate->setWaitLimit(options.timeout);
}

Communicator& MpiProcess::communicator() { return *state_->communicator; }

bool MpiProcess::postsOnNode() const {
  return state_->world.nodeCores && state_->world.nodeCores->hasSlots();
}

cpu::CoreGate* MpiProcess::hostCores() {
  return state_->world.nodeCores ? state_->world.nodeCores->gate() : nullptr;
}

namespace {

void checkPeer(const MpiWorld& world, int peer, const std::string& what) {
  if (peer < 0 || peer >= world.size)
    throw world.error(Kind::Usage, fmt::format("{}: there is no rank {} (the job has {})", what,
                                               peer, world.size));
}

}  // namespace

void MpiProcess::sendControl(int peer, std::string bytes) {
  MpiWorld& world = state_->world;
  std::string what = fmt::format("control message to rank {}", peer);
  checkPeer(world, peer, what);
  // Sent even after an abort: a worker still answers the failed command.
  if (peer == world.rank) {
    state_->selfControl.push_back(std::move(bytes));
    return;
  }
  if (bytes.size() > static_cast<std::size_t>(INT32_MAX))
    throw world.error(Kind::Usage, fmt::format("{}: {} bytes is more than one MPI message holds",
                                               what, bytes.size()));
  auto text = std::make_shared<const std::string>(std::move(bytes));
  MPI_Request request;
  checkMpi(MPI_Isend(text->data(), static_cast<int>(text->size()), MPI_BYTE, peer, 0,
                     world.comms[kControlChannel], &request),
           "MPI_Isend");
  world.sendRequests.push_back(request);
  world.sendHolders.push_back(text);
}

std::string MpiProcess::recvControl(int peer, std::optional<std::chrono::milliseconds> timeout,
                                    bool evenAfterAbort) {
  MpiWorld& world = state_->world;
  std::string what = fmt::format("control message from rank {}", peer);
  checkPeer(world, peer, what);
  if (peer == world.rank) {
    if (state_->selfControl.empty())
      throw world.error(Kind::Usage, what + ": this rank sent itself none to wait for");
    std::string bytes = std::move(state_->selfControl.front());
    state_->selfControl.pop_front();
    return bytes;
  }
  MPI_Status status;
  world.await([&] { return what; }, timeout,
              [&] {
                int flag = 0;
                MPI_Iprobe(peer, 0, world.comms[kControlChannel], &flag, &status);
                return flag != 0;
              },
              [] { return std::string(); }, !evenAfterAbort);
  // A long message (a serialised Program) arrives while this rank polls, so
  // an abort still ends the wait; the buffer outlives an abandoned receive.
  int length = 0;
  MPI_Get_count(&status, MPI_BYTE, &length);
  auto bytes = std::make_shared<std::string>(static_cast<std::size_t>(length), '\0');
  std::vector<MPI_Request> requests;
  world.postRecv(kControlChannel, peer, 0, bytes->data(), bytes->size(), requests);
  try {
    world.await([&] { return what; }, timeout,
                [&] {
                  int flag = 0;
                  checkMpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag,
                                       MPI_STATUSES_IGNORE),
                           "MPI_Testall");
                  return flag != 0;
                },
                [] { return std::string(); }, !evenAfterAbort);
  } catch (...) {
    world.abandon(requests, bytes);
    throw;
  }
  return std::move(*bytes);
}

void MpiProcess::abort(const std::string& reason) { state_->world.abort(reason); }

bool MpiProcess::stopSeen() {
  state_->world.lookForAbort();
  return state_->world.abortReason.has_value();
}

void MpiProcess::terminate(int code) {
  // A moment for this rank's abort notice (if any) to leave.
  state_->world.drainSends(std::chrono::milliseconds(200));
  std::fflush(stdout);
  std::fflush(stderr);
  // Under Open MPI's mpirun a rank that exits with a non-zero code makes
  // mpirun end every other rank and exit with that code: what MPI_Abort
  // does, without its report to mpirun, which in Open MPI 4.1.4 made mpirun
  // crash (PMIx_server_finalize, after "Data unpack would read past end of
  // buffer" in show_help.c) or hang in about one run in five of the
  // stopped-rank test.
  if (code != 0 && std::getenv("OMPI_COMM_WORLD_SIZE")) std::_Exit(code);
  // Elsewhere MPI_Abort; should it hang in its report, this process ends on
  // its own after a while, and its launcher, seeing it gone, ends the rest.
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    std::_Exit(code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace meshflow::runtime::mpi
