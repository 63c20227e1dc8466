#include "passes/schedules/ZeroBubbleV.h"

#include <algorithm>
#include <array>

#include "passes/schedules/ScheduleError.h"

namespace meshflow::passes {
namespace {

using ir::ActionKind;

// Appends actions to one rank's order, numbering each (kind, chunk) stream's
// microbatches 0, 1, 2 … in the order they are appended.
class RankOrder {
 public:
  void add(ActionKind kind, int chunk) {
    int& next = next_[static_cast<size_t>(kind)][static_cast<size_t>(chunk)];
    order_.push_back({kind, next++, chunk});
  }
  int count(ActionKind kind, int chunk) const {
    return next_[static_cast<size_t>(kind)][static_cast<size_t>(chunk)];
  }
  // W(j) of chunk c may only be appended once I(j) of chunk c is.
  void addPendingWeight(int chunk) {
    if (count(ActionKind::kWeightGrad, chunk) < count(ActionKind::kInputGrad, chunk)) {
      add(ActionKind::kWeightGrad, chunk);
    }
  }
  std::vector<ir::Action> take() && { return std::move(order_); }

 private:
  std::array<std::array<int, 2>, 4> next_{};
  std::vector<ir::Action> order_;
};

// The paper's pattern needs 2p−1 microbatches to reach its steady phase. With
// fewer, we build the pattern for 2p−1 and drop the microbatches that do not exist;
// what remains still respects every dependency (the tests check it).
std::vector<ir::Action> rankOrder(int stages, int microbatches, int rank) {
  const int padded = std::max(2 * stages - 1, microbatches);
  RankOrder order;
  for (int k = 0; k < 2 * (stages - rank) - 1; ++k) order.add(ActionKind::kForward, 0);
  for (int k = 0; k < rank; ++k) {
    order.add(ActionKind::kForward, 1);
    order.add(ActionKind::kForward, 0);
  }
  for (int k = 0; k < stages - rank; ++k) {
    order.add(ActionKind::kForward, 1);
    order.add(ActionKind::kInputGrad, 1);
    order.add(ActionKind::kWeightGrad, 1);
  }
  while (order.count(ActionKind::kForward, 1) < order.count(ActionKind::kForward, 0) ||
         order.count(ActionKind::kForward, 0) < padded) {
    if (order.count(ActionKind::kForward, 0) < padded) order.add(ActionKind::kForward, 0);
    order.add(ActionKind::kInputGrad, 0);
    order.add(ActionKind::kWeightGrad, 0);
    order.add(ActionKind::kForward, 1);
    order.add(ActionKind::kInputGrad, 1);
    order.add(ActionKind::kWeightGrad, 1);
  }
  for (int k = 0; k < rank; ++k) {
    order.add(ActionKind::kInputGrad, 0);
    order.add(ActionKind::kInputGrad, 1);
  }
  for (int k = 0; k < stages - rank; ++k) {
    order.add(ActionKind::kInputGrad, 0);
    order.addPendingWeight(0);
  }
  while (order.count(ActionKind::kWeightGrad, 1) < order.count(ActionKind::kInputGrad, 1)) {
    order.addPendingWeight(1);
  }
  while (order.count(ActionKind::kWeightGrad, 0) < order.count(ActionKind::kInputGrad, 0)) {
    order.addPendingWeight(0);
  }

  std::vector<ir::Action> actions = std::move(order).take();
  std::erase_if(actions, [&](const ir::Action& a) { return a.microbatch >= microbatches; });
  return actions;
}

}  // namespace

ir::PipelineSchedule buildZeroBubbleV(int stages, int microbatches) {
  requirePipelineShape("zbv", stages, microbatches);
  ir::PipelineSchedule schedule{ir::ScheduleKind::kZeroBubbleV, stages, microbatches, 2, {}};
  for (int r = 0; r < stages; ++r) schedule.ranks.push_back(rankOrder(stages, microbatches, r));
  return schedule;
}

}  // namespace meshflow::passes
