// The messages the executor sends between pipeline ranks: a bundle of values
// (an activation, an input gradient, a tile of them), each a tensor and the
// layout it is held in on the sender's mesh — whole, or a member's box when
// sender and receiver run on meshes of one shape (member j to member j).
#pragma once

#include <map>
#include <vector>

#include "ir/Sharding.h"
#include "runtime/parallel/OpRunner.h"

namespace meshflow::runtime {

/// How the values of a device's bundles are held: a spec per value id (the same
/// for every microbatch); a value without one is whole.
using HeldSpecs = std::map<ir::ValueId, ir::ShardingSpec>;

/// The message of `bundle`: an i32 tensor of the value ids, an i32 tensor of
/// their specs (per value: its rank, each dimension's mesh axes, the partial
/// axes), then the tensors in id order.
std::vector<Tensor> encodeMessage(ValueTable&& bundle, const HeldSpecs& held);

/// The bundle of `message`; records each value's spec in `held` (erases it for
/// a whole value). Throws std::runtime_error for a malformed message.
ValueTable decodeMessage(std::vector<Tensor>&& message, HeldSpecs& held);

}  // namespace meshflow::runtime
