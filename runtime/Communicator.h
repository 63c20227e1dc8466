// runtime::Communicator — one device's endpoint for point-to-point messages and
// collectives. Every backend implements it (the cpu backend's threads in
// runtime/cpu/LocalCluster.h; MPI; NCCL), so an executor that runs a
// Program talks to its peers the same way on each of them.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/Tensor.h"

namespace meshflow::runtime {

/// A communication failed. what() is "device D: DETAIL", where the detail names
/// the operation, the peer or group and the tag (for a collective, its call number
/// on the group), then what went wrong.
class CommError : public std::runtime_error {
 public:
  enum class Kind {
    Timeout,   // waited longer than the backend's timeout
    Aborted,   // the run was stopped (a peer failed, or abort was called)
    Mismatch,  // the members of a collective disagree: operation, group order, root, shapes
    Usage,     // this call alone is wrong: an unknown peer, a device not in its group
  };

  CommError(Kind kind, int device, std::string detail);

  Kind kind() const { return kind_; }
  /// The device whose call failed.
  int device() const { return device_; }
  /// what() without the "device D: " prefix.
  const std::string& detail() const { return detail_; }

 private:
  Kind kind_;
  int device_;
  std::string detail_;
};

/// "[2, 0, 1]": a group as its members, in member order.
std::string groupText(const std::vector<int>& group);

/// One device's endpoint. A group is a list of device ids; its order is the
/// member order (ascending is not required). Every member of a group must call
/// the same collectives on it in the same order, with the same group order, and
/// operands of the same dtype and shape; a disagreement is a CommError (Mismatch)
/// on every member, naming two devices that disagree.
///
/// Reductions (allReduce, reduceScatter) on the cpu and mpi backends are
/// deterministic: every member ends with bit-identical results computed as
/// ((x_g0 + x_g1) + x_g2) + ... in group-list order, whatever the timing. The
/// NCCL communicator (runtime/cuda/NcclCommunicator.h) sums in NCCL's order
/// (ring or tree, chosen by NCCL for the size and topology): its float sums
/// agree with the others within the precision's tolerance, not bit for bit,
/// and NCCL does not promise the same bits on every member or run. f32
/// tensors sum as floats; i32 tensors sum as integers, wrapping modulo 2^32.
///
/// Tensors are exchanged by value: an operation never keeps a reference to a
/// caller's tensor after it returns.
class PendingAllReduce;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int device() const = 0;
  virtual int deviceCount() const = 0;

  /// Point to point: a message is a list of tensors; (sender, receiver, tag)
  /// identifies it, and messages with one identity arrive in the order sent. send
  /// never blocks (the message is buffered); recv blocks until the matching message
  /// arrives. A device may send to itself.
  virtual void send(int peer, std::uint64_t tag, std::vector<Tensor> message) = 0;
  virtual std::vector<Tensor> recv(int peer, std::uint64_t tag) = 0;

  /// In-place sum of each tensor over the group.
  virtual void allReduce(const std::vector<int>& group, std::vector<Tensor*> tensors) = 0;
  /// allReduce without waiting: this member's contribution is taken now, and
  /// the returned handle's finish() waits for the others and writes the sums
  /// into `tensors`, which must stay where they are and unwritten until then.
  /// Every member starts its all-reduces on a group in the same order as it
  /// calls its other collectives there. By default the reduction runs here
  /// and finish() does nothing (a backend without asynchronous collectives).
  virtual std::unique_ptr<PendingAllReduce> startAllReduce(const std::vector<int>& group,
                                                           std::vector<Tensor*> tensors);
  /// Each member's `input` (rank >= 1) concatenated along axis 0 in group order,
  /// into `output` (allocated by the call).
  virtual void allGather(const std::vector<int>& group, const Tensor& input, Tensor& output) = 0;
  /// The sum over the group (as allReduce), of which member i keeps the i-th of
  /// group.size() equal slices along axis 0 in `output` (allocated by the call).
  /// Dim 0 must divide by the group size.
  virtual void reduceScatter(const std::vector<int>& group, const Tensor& input,
                             Tensor& output) = 0;
  /// `input` split in group.size() equal slices along axis 0; slice j goes to member
  /// j; `output` (allocated by the call) is the received slices concatenated in
  /// group order. Dim 0 must divide by the group size.
  virtual void allToAll(const std::vector<int>& group, const Tensor& input, Tensor& output) = 0;
  /// The root's tensor copied to every member; root is a device id in the group.
  /// A member's tensor is allocated by the call, or if already allocated must have
  /// the root's dtype and shape (else that member throws CommError, Mismatch).
  virtual void broadcast(const std::vector<int>& group, int root, Tensor& tensor) = 0;
  /// Returns once every member has called it.
  virtual void barrier(const std::vector<int>& group) = 0;
};

/// An all-reduce under way (Communicator::startAllReduce). Destroying one that
/// was not finished leaves its collective without this member's result; the
/// other members still complete it.
class PendingAllReduce {
 public:
  virtual ~PendingAllReduce() = default;
  /// Waits for every member and writes the sums; throws CommError as allReduce.
  virtual void finish() = 0;
};

}  // namespace meshflow::runtime
