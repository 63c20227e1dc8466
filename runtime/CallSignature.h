// runtime::CallSignature — what one member of a collective called: the
// operation, the group in member order, the root, and its operands' types.
// Every backend compares its members' signatures before it exchanges data,
// and words a disagreement (a CommError Mismatch) the same way, naming two
// devices that disagree: `allGather #3 over group [0, 1]: the input is f32[2]
// on device 0 but f32[3] on device 1`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/Tensor.h"

namespace meshflow::runtime {

/// An operand's dtype and shape, or an unallocated tensor.
struct OperandType {
  bool allocated = false;
  ir::DType dtype = ir::DType::F32;
  Shape shape;

  static OperandType of(const Tensor& t) { return {t.allocated(), t.dtype(), t.shape()}; }
  /// "f32[2, 3]", or "unallocated" (as Tensor::typeText()).
  std::string text() const;
  std::size_t bytes() const;
  bool operator==(const OperandType&) const = default;
};

struct CallSignature {
  std::string op;  ///< "allReduce", "allGather", "reduceScatter", "allToAll", "broadcast", "barrier"
  std::vector<int> group;
  int root = -1;  ///< broadcast's root device, else -1
  std::vector<OperandType> operands;
  /// Whether every member brings operands of the same count, dtypes and
  /// shapes (all but broadcast, where only the root brings one).
  bool operandsAgree = true;

  /// "allReduce #3 over group [2, 0, 1]" (and " (root device R)").
  std::string describe(std::uint64_t number) const;
  /// "allReduce over group [0, 1]": a call before it has a number.
  std::string plain() const;
};

/// `op` on `group` as device `device` of `devices` calls it, once the group
/// is valid — real devices, each once, `device` among them; else a
/// CommError (Usage) naming the call.
CallSignature checkedCall(std::string op, const std::vector<int>& group, int device, int devices);
/// The same with the one operand `input`, whose axis 0 must split into
/// `parts` equal slices (allGather: 1; reduceScatter, allToAll: the members).
CallSignature slicedInputCall(std::string op, const std::vector<int>& group, int device, int devices,
                              const Tensor& input, std::size_t parts);

/// How the calls of devices a and b (a first in group order) differ, if they do.
std::optional<std::string> callDifference(int a, const CallSignature& x, int b, const CallSignature& y);

}  // namespace meshflow::runtime
