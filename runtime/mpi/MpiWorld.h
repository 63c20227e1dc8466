// The state behind an MpiProcess (internal to meshflow_mpi): the MPI
// communicators of each kind of traffic, the sends still in flight, the
// abort notices, and the one wait loop every operation waits in.
//
// Traffic never shares a tag space across kinds: each Channel is its own
// duplicate of MPI_COMM_WORLD. Nothing here blocks in MPI: sends are
// MPI_Isend kept with what they read until MPI completes them, and waits poll
// (MPI_Iprobe, MPI_Test) so that a timeout or an abort notice ends them.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/Communicator.h"
#include "runtime/mpi/MpiNodeCores.h"
#include "runtime/mpi/MpiProcess.h"

namespace meshflow::runtime::mpi {

using Clock = std::chrono::steady_clock;

/// What an operation is, for its error messages: made only when one is
/// thrown (formatting it for every call cost a small all-reduce ~10% of its
/// time).
using Text = std::function<std::string()>;

enum Channel : int {
  kAbortChannel,     // abort notices: the reason, from any rank
  kControlChannel,   // sendControl / recvControl
  kMessageHeaders,   // point to point: what a message holds
  kMessagePayloads,  // point to point: the tensors' bytes
  kCallHeaders,      // collectives: what each member called
  kCallData,         // collectives: operands (reduce-scatter, gather, broadcast)
  kCallGather,       // all-reduce: the summed chunks going back out
  kChannelCount,
};

/// Throws std::runtime_error naming the MPI call when `code` is an error.
void checkMpi(int code, const char* call);

/// "60 s" for whole seconds, else "100 ms" (as the cpu backend prints it).
std::string durationText(std::chrono::milliseconds duration);

/// An operation that advances on its own while this process waits for
/// something else (an all-reduce's second half). advance() never blocks.
class BackgroundOp {
 public:
  virtual ~BackgroundOp() = default;
  virtual void advance() = 0;
  virtual bool done() const = 0;
};

/// Bytes for receiving into: uninitialised, and reused from call to call
/// (MpiWorld::takeScratch), since fresh pages for every reduction cost as
/// much as the copies.
struct Scratch {
  std::unique_ptr<std::byte[]> bytes;
  std::size_t capacity = 0;
  std::byte* data() const { return bytes.get(); }
};

/// Messages bigger than this go as several MPI messages (MPI counts are int).
constexpr std::size_t kPieceBytes = std::size_t(1) << 30;

struct MpiWorld {
  MpiWorld(int* argc, char*** argv, MpiOptions options);
  ~MpiWorld();

  int rank = 0;
  int size = 1;
  MpiOptions options;
  bool initializedHere = false;
  MPI_Comm comms[kChannelCount] = {};
  /// Largest tag: MPI_TAG_UB of this MPI (at least 2^15 - 1).
  int tagLimit = 32767;
  /// How long a wait polls before it yields the core: none when this node
  /// runs more ranks than it has cores (a spinning rank would keep the one
  /// it waits for from running).
  std::chrono::microseconds spinBeforeYield{50};
  /// Whether MPI yields the core in a poll that finds nothing (Open MPI's
  /// mpi_yield_when_idle, on when ranks outnumber a node's slots): a wait
  /// then yields through its polls and needs no sched_yield of its own.
  bool mpiYieldsWhenIdle = false;
  /// The longest message MPI sends eagerly (without waiting for the
  /// receiver) between ranks of a node, when it says (Open MPI's
  /// btl_vader_eager_limit, 4 KiB by default); unlimited when it does not.
  std::size_t eagerBytes = SIZE_MAX;
  /// How often a wait looks for abort notices.
  static constexpr std::chrono::microseconds kAbortLook{20};
  /// What this node's ranks share (cores, doorbells); null when alone.
  std::unique_ptr<NodeCores> nodeCores;

  /// The first abort seen: "rank R failed: REASON" (this rank's or another's).
  std::optional<std::string> abortReason;
  bool sentAbort = false;
  /// A failure was seen (abort, timeout): the others may be gone, so the
  /// destructor does not finalize (MPI_Finalize waits for every rank).
  bool failed = false;

  /// Sends in flight and what they read; requests MPI has completed are dropped.
  std::vector<MPI_Request> sendRequests;
  std::vector<std::shared_ptr<const void>> sendHolders;
  /// MPI_Testsome's indices, kept from call to call.
  std::vector<int> completedIndices;
  /// Receives whose operation ended (an error) before they did: kept with
  /// their buffers until MPI is done with them.
  std::vector<MPI_Request> strayRequests;
  std::vector<std::shared_ptr<const void>> strayHolders;

  /// Scratch buffers for reuse, at most kScratchKept of them.
  std::vector<Scratch> scratch;
  static constexpr std::size_t kScratchKept = 16;
  /// A buffer of at least `bytes`, uninitialised.
  Scratch takeScratch(std::size_t bytes);
  /// Gives a buffer back for reuse (once no request uses it).
  void giveScratch(Scratch buffer);

  /// Operations advanced in every wait (shared with their handles).
  std::vector<std::shared_ptr<BackgroundOp>> background;

  /// Posts `bytes` from `data` to `peer` without waiting; `holder` keeps the
  /// bytes alive until MPI has sent them.
  void postSend(Channel channel, int peer, int tag, const void* data, std::size_t bytes,
                std::shared_ptr<const void> holder);
  /// Posts receives of `bytes` into `data`, appending their requests.
  void postRecv(Channel channel, int peer, int tag, void* data, std::size_t bytes,
                std::vector<MPI_Request>& requests);
  /// Hands unfinished receives over to be completed later, cancelling them
  /// first when `cancel` (point-to-point ones; a collective's cannot be).
  void abandon(std::vector<MPI_Request>& requests, std::shared_ptr<const void> holder,
               bool cancel = true);

  /// Polls until ready() returns true. Throws CommError(Aborted) as soon as an
  /// abort notice is seen, CommError(Timeout) "WHAT timed out after T" +
  /// missing() after `timeout` (none: no timeout). Every round also completes
  /// sends and advances the background operations.
  /// With `abortEnds` false an abort does not end the wait (only the
  /// timeout does): a control message still expected after a failure.
  void await(const Text& what, std::optional<std::chrono::milliseconds> timeout,
             const std::function<bool()>& ready, const std::function<std::string()>& missing,
             bool abortEnds = true);
  /// Throws CommError(Aborted) when an abort was seen. It does not look for
  /// a notice not yet seen (an MPI poll, which may yield the core): waits do.
  void throwIfAborted(const Text& what);
  /// Receives a pending abort notice, if any.
  void lookForAbort();
  /// Sends the abort notice (once) and records this rank's failure.
  void abort(const std::string& reason);
  /// Completes what it can of the sends and background operations; returns
  /// whether anything completed.
  bool progress();
  /// Progresses until every send is done or `limit` passes; whether all are.
  bool drainSends(std::chrono::milliseconds limit);

  CommError error(CommError::Kind kind, std::string detail) const {
    return CommError(kind, rank, std::move(detail));
  }
};

/// Makes the Communicator of `world`'s rank (MpiCommunicator.cpp).
std::unique_ptr<Communicator> makeMpiCommunicator(MpiWorld& world);

}  // namespace meshflow::runtime::mpi
