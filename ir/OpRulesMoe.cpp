// Type rules of the mixture-of-experts ops: dispatch of tokens into per-expert
// slots, combine back, the dropped count, and the gradients of dispatch and
// combine (docs/graph-ir.md, "Mixture of experts").
#include <fmt/format.h>

#include <limits>

#include "ir/OpRulesImpl.h"

namespace meshflow::ir::rules {
namespace {

/// The tokens x[B, S, h] (input `xi`) and gates[B, S, E] (input `gi`) agree.
void expectTokensAndGates(const Rule& r, std::size_t xi, std::size_t gi) {
  const TensorType& x = r.in(xi);
  const TensorType& g = r.in(gi);
  if (x.rank() != 3 || g.rank() != 3 || x.shape[0] != g.shape[0] || x.shape[1] != g.shape[1])
    r.fail(
        fmt::format("needs tokens [B, S, h] and gates [B, S, E] of the same B and S, got {} and {}",
                    x.text(), g.text()));
}

/// The gates are [B, S, E] with a constant E and S; returns the capacity.
std::int64_t checkGates(const Rule& r, std::size_t gi) {
  const TensorType& g = r.in(gi);
  r.expectFloat(gi);
  if (g.rank() != 3) r.fail("needs gates [B, S, E], got " + g.text());
  if (g.shape[1].perBatch || g.shape[2].perBatch)
    r.fail("the sequence and expert dimensions cannot depend on the batch: " + g.text());
  return r.intAttrIn("capacity", 1, std::numeric_limits<std::int32_t>::max());
}

/// B*capacity: the slots of every group, as one dimension (still per batch
/// when B is).
Dim slotsDim(const Dim& groups, std::int64_t capacity) {
  return {groups.value * capacity, groups.perBatch};
}

/// The dispatched type [E, B*capacity, h] of tokens x and gates g.
TensorType dispatchedType(const TensorType& x, const TensorType& g, std::int64_t capacity) {
  return {x.dtype, {g.shape[2], slotsDim(g.shape[0], capacity), x.shape[2]}};
}

/// Input `di` is a dispatched tensor of the gates (input `gi`) and capacity.
void expectDispatched(const Rule& r, std::size_t di, std::size_t gi, std::int64_t capacity) {
  const TensorType& d = r.in(di);
  const TensorType& g = r.in(gi);
  r.expectFloat(di);
  if (d.rank() != 3 || d.shape[0] != g.shape[2] || d.shape[1] != slotsDim(g.shape[0], capacity))
    r.fail(fmt::format(
        "expert tensor {} does not match gates {} with capacity {} (want [{}, {}, h])", d.text(),
        g.text(), capacity, dimText(g.shape[2]), dimText(slotsDim(g.shape[0], capacity))));
}

}  // namespace

Types moeDispatchRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({"capacity"});
  r.expectFloat(0);
  std::int64_t capacity = checkGates(r, 1);
  expectTokensAndGates(r, 0, 1);
  return {dispatchedType(r.in(0), r.in(1), capacity)};
}

Types moeCombineRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({"capacity"});
  std::int64_t capacity = checkGates(r, 1);
  expectDispatched(r, 0, 1, capacity);
  const TensorType& g = r.in(1);
  return {TensorType{r.in(0).dtype, {g.shape[0], g.shape[1], r.in(0).shape[2]}}};
}

Types moeDroppedRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"capacity"});
  checkGates(r, 0);
  return {TensorType{DType::F32, {}}};
}

Types moeDispatchGradRule(const Rule& r) {
  return moeCombineRule(r);  // the same shapes: slots in, tokens out
}

Types moeCombineGradRule(const Rule& r) {
  r.expectInputs(3);
  r.allowAttrs({"capacity"});
  std::int64_t capacity = checkGates(r, 1);
  expectDispatched(r, 0, 1, capacity);
  r.expectFloat(2);
  const TensorType& g = r.in(1);
  const TensorType& dout = r.in(2);
  TensorType want{r.in(0).dtype, {g.shape[0], g.shape[1], r.in(0).shape[2]}};
  if (dout != want) r.fail(fmt::format("dout {} must be {}", dout.text(), want.text()));
  return {r.in(0), g};
}

}  // namespace meshflow::ir::rules
