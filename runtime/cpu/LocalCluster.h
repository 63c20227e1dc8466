// cpu::LocalCluster — the in-process world of the cpu backend: one Communicator
// per virtual device, all in one process, and run(), which runs a body on one
// thread per device and turns the first failure into one DeviceFailure.
//
// Messages wait in mailboxes keyed by (sender, receiver, tag). A collective is a
// rendezvous: each member deposits a copy of its operands and waits until every
// member has, then computes its own result from the copies in group order, which
// is what makes reductions bit-identical on every member and in every run.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/Communicator.h"
#include "runtime/cpu/CoreGate.h"
#include "runtime/cpu/DeviceThreads.h"
#include "runtime/parallel/DeviceHost.h"

namespace meshflow::runtime::cpu {

/// The state the devices of one LocalCluster share (defined in LocalCluster.cpp).
struct LocalWorld;

struct LocalClusterOptions {
  int devices = 1;
  /// How long a recv or a collective waits before it throws CommError (Timeout).
  std::chrono::milliseconds timeout{60000};
  /// Host cores the devices share (CoreGate.h); 0: a core per device. A
  /// device's body runs holding a core, and gives it up while it waits in recv
  /// or a collective.
  int cores = 0;
};

/// A device's body failed in LocalCluster::run. what() is "device D failed: DETAIL".
class DeviceFailure : public std::runtime_error {
 public:
  DeviceFailure(int device, std::string detail, std::exception_ptr cause);

  int device() const { return device_; }
  /// The original message (for a CommError, its detail: what() without "device D: ").
  const std::string& detail() const { return detail_; }
  /// The exception the body threw.
  std::exception_ptr cause() const { return cause_; }

 private:
  int device_;
  std::string detail_;
  std::exception_ptr cause_;
};

/// Each device's communicator may be used by one thread at a time (its device's
/// thread); different devices' communicators may be used concurrently. The cluster
/// must outlive every use of its communicators.
class LocalCluster final : public DeviceHost {
 public:
  /// Throws std::invalid_argument for fewer than one device or a timeout <= 0.
  explicit LocalCluster(LocalClusterOptions options);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  int deviceCount() const;
  /// Throws std::out_of_range for a device outside [0, deviceCount()).
  Communicator& communicator(int device) override;
  /// Every device runs here.
  bool runsHere(int device) const override { return device >= 0 && device < deviceCount(); }
  /// The cores the devices share: a body holds one while it runs (not while
  /// it waits for a message or a collective).
  CoreGate* cores() override;

  /// Wakes every blocked communication, and fails every later one, with
  /// CommError (Aborted) "... aborted: <reason>". The first reason is kept; an
  /// aborted cluster stays aborted.
  void abort(const std::string& reason);
  bool aborted() const;

  /// Runs body(device) on every device's thread (DeviceThreads: started by the
  /// first run, kept for the cluster's life) and returns when all have. If a body
  /// throws, the cluster is aborted at once (so the others fail fast instead of
  /// waiting for their timeout), every body returns, and the first failure is
  /// rethrown as DeviceFailure. The first failure is the first one recorded that
  /// is not a CommError (Aborted) — those are consequences of the abort — or, when
  /// every failure is one (abort was called from outside), the first recorded.
  /// If a device thread cannot be started, the cluster is aborted, the started
  /// threads are stopped and the std::system_error is rethrown. One run at a time.
  void run(const std::function<void(int device)>& body) override;

 private:
  std::unique_ptr<LocalWorld> world_;
  std::vector<std::unique_ptr<Communicator>> endpoints_;  // one per device
  // Declared last, destroyed first: the threads stop before what they use goes.
  std::unique_ptr<DeviceThreads> threads_;
};

}  // namespace meshflow::runtime::cpu
