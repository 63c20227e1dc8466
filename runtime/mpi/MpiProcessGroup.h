// The mpi backend as the trainer sees it: a ProcessGroup over this process's
// MpiProcess (one device per process, device id = world rank).
#pragma once

#include "runtime/distributed/ProcessGroup.h"
#include "runtime/mpi/MpiProcess.h"

namespace meshflow::runtime::mpi {

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(MpiProcess& process, std::chrono::milliseconds timeout, int localRank = 0)
      : process_(process), timeout_(timeout), localRank_(localRank) {}

  std::string backend() const override { return "mpi"; }
  int rank() const override { return process_.rank(); }
  int size() const override { return process_.size(); }
  int localRank() const override { return localRank_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  void send(int peer, std::string bytes) override { process_.sendControl(peer, std::move(bytes)); }
  std::string recv(int peer, std::optional<std::chrono::milliseconds> timeout, bool evenAfterAbort) override {
    return process_.recvControl(peer, timeout, evenAfterAbort);
  }
  void abort(const std::string& reason) override { process_.abort(reason); }
  bool stopSeen() override { return process_.stopSeen(); }
  std::unique_ptr<DeviceHost> deviceHost(std::chrono::milliseconds timeout) override;

 private:
  MpiProcess& process_;
  std::chrono::milliseconds timeout_;
  int localRank_;
};

}  // namespace meshflow::runtime::mpi
