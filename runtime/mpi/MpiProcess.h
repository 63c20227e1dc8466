// mpi::MpiProcess — this process's place in an MPI job: MPI started once,
// the Communicator of the one device this process runs (device id = world
// rank), and a control channel between the controller (rank 0) and the
// workers, apart from the Program's traffic (docs/distributed.md).
//
// Every wait (a recv, a collective, a control message) polls rather than
// blocks, so it ends with CommError(Timeout) after the timeout, or with
// CommError(Aborted) as soon as any rank calls abort(), naming that rank and
// its reason: a failed rank never leaves the others hanging.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "runtime/Communicator.h"
#include "runtime/cpu/CoreGate.h"

namespace meshflow::runtime::mpi {

struct MpiOptions {
  /// Longest wait for a message or collective of the Program.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  /// Reductions sum in group order, ((x_g0 + x_g1) + x_g2) + ..., as the cpu
  /// backend does, so results are bit-identical to it; false: MPI_Allreduce's
  /// own order (faster on many ranks; results within fp32 rounding).
  bool deterministic = true;
};

class MpiProcess {
 public:
  /// Starts MPI (MPI_Init_thread asking for MPI_THREAD_SERIALIZED, needing
  /// at least MPI_THREAD_FUNNELED: one thread at a time calls MPI, the one
  /// that made the MpiProcess if MPI gives only FUNNELED). One per process;
  /// MPI already started is used as it is (and not finalized here).
  MpiProcess(int* argc, char*** argv, MpiOptions options = {});
  /// Waits (up to the timeout) for this rank's sends to complete, then
  /// finalizes MPI. After a failure — an abort sent or seen, a timeout — it
  /// does not finalize (MPI_Finalize waits for every rank, and one may be gone
  /// or stopped): the process ends without it and mpirun ends the others.
  ~MpiProcess();
  MpiProcess(const MpiProcess&) = delete;
  MpiProcess& operator=(const MpiProcess&) = delete;

  int rank() const;
  int size() const;
  const MpiOptions& options() const;
  void setOptions(const MpiOptions& options);

  /// This process's device's endpoint: device() == rank(), deviceCount() ==
  /// size(); groups are lists of world ranks. Implements every operation of
  /// runtime/Communicator.h with its semantics (deterministic reductions in
  /// group order unless options().deterministic is false), and startAllReduce
  /// without blocking (finish() waits).
  Communicator& communicator();

  /// The host cores this node's ranks take turns on (runtime/mpi/
  /// MpiNodeCores.h): this rank's device computes only while it holds one
  /// and gives it up in every wait. Null when the node has a core per rank.
  cpu::CoreGate* hostCores();
  /// Whether collectives whose members all run on this node post small
  /// messages in the node's shared memory (runtime/mpi/NodeSlots.h):
  /// on unless MESHFLOW_NODE_SLOTS=0 on any rank, or the node's ranks could
  /// not share memory.
  bool postsOnNode() const;

  /// Control messages: bytes from the controller to a worker and back, in
  /// order per (sender, receiver), never mixed with the communicator's.
  /// sendControl does not block, and sends even after an abort (a worker
  /// still answers the command that failed). recvControl returns a message
  /// that has arrived, abort or not; when none has, it waits without a
  /// timeout when none is given (the controller may run a script for long
  /// between commands), else at most `timeout` (CommError Timeout), and ends
  /// with CommError(Aborted) once any rank has aborted.
  void sendControl(int peer, std::string bytes);
  /// With `evenAfterAbort`, an abort does not end the wait: the controller
  /// still gathers the answers to a failed command, a worker its last word.
  std::string recvControl(int peer, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                          bool evenAfterAbort = false);

  /// Tells every other rank that this one failed: their waits end with
  /// CommError(Aborted) "rank R failed: REASON". Never blocks.
  void abort(const std::string& reason);
  /// Whether any rank has aborted, looking for an abort notice without
  /// waiting (an MPI poll): for waits outside MPI (NCCL's) that must end
  /// when the job stops. On the thread that makes this process's MPI calls.
  bool stopSeen();
  /// Ends the job now with exit code `code` on every rank: MPI_Abort, or
  /// under Open MPI's mpirun (non-zero code) exiting with it, upon which
  /// mpirun ends the others (its MPI_Abort could crash mpirun; see
  /// docs/distributed.md).
  [[noreturn]] void terminate(int code);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace meshflow::runtime::mpi
