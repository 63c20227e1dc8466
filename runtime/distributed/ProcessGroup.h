// runtime::ProcessGroup — the processes of a launched job (the mpi backend),
// as the controller (rank 0) and its workers see them: a control channel
// between the controller and each worker, and a DeviceHost that runs this
// process's one device (device id = rank). Only the controller runs the
// script; the workers wait for its commands (runtime/distributed/Worker.h).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "runtime/parallel/DeviceHost.h"

namespace meshflow::runtime {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  /// "mpi": the backend's name for messages.
  virtual std::string backend() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// This process's rank among the job's processes on its machine (the
  /// launcher's local rank): which GPU a GPU job's process takes.
  virtual int localRank() const { return 0; }
  /// How long a device waits for a message or collective before it fails
  /// (`meshflow run --timeout`).
  virtual std::chrono::milliseconds timeout() const { return std::chrono::minutes(5); }

  /// Control messages, in order per (sender, receiver). send never blocks,
  /// and sends after an abort too. recv returns a message that has arrived;
  /// else it waits for the next one from `peer`: without a timeout as long as
  /// it takes, else at most that long (CommError Timeout), and once a process
  /// has called abort() it ends with CommError(Aborted) — unless
  /// `evenAfterAbort`: the answers to a failed command, and a worker's last
  /// word from the controller, are still awaited (until the timeout).
  virtual void send(int peer, std::string bytes) = 0;
  virtual std::string recv(int peer, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                           bool evenAfterAbort = false) = 0;
  /// Tells every other process this one failed. Never blocks.
  virtual void abort(const std::string& reason) = 0;
  /// Whether any process has aborted, without waiting: for waits outside
  /// this transport (a GPU process's NCCL calls) that must end when the job
  /// stops. On the thread that runs this process's device. Default: never.
  virtual bool stopSeen() { return false; }

  /// Runs this process's device, its collectives and messages timing out
  /// after `timeout`.
  virtual std::unique_ptr<DeviceHost> deviceHost(std::chrono::milliseconds timeout) = 0;
};

struct TrainingJob;

/// The host a job's device runs on in this process: `group`'s, on a GPU of
/// this machine when the job is on GPUs (runtime::makeGpuHost; its
/// GpuUnavailable when this process has none).
std::unique_ptr<DeviceHost> jobHost(ProcessGroup& group, const TrainingJob& job);

}  // namespace meshflow::runtime
