// 1F1B and interleaved 1F1B run in exactly Megatron-LM's order. The expected
// orders are written down here independently of the generators: hand-written small
// cases, and a transcription of Megatron's loops in a different formulation
// (per-chunk counters instead of the generator's group arithmetic).
#include <algorithm>
#include <catch2/catch.hpp>

#include "ir/PipelineSchedule.h"
#include "passes/schedules/Interleaved.h"
#include "passes/schedules/OneFOneB.h"

using meshflow::ir::Action;
using meshflow::ir::ActionKind;
using meshflow::ir::parseAction;
using meshflow::passes::buildInterleaved;
using meshflow::passes::buildOneFOneB;

// Failures print actions as text rather than "{?}".
namespace Catch {
template <>
struct StringMaker<Action> {
  static std::string convert(const Action& action) { return meshflow::ir::actionText(action, 2); }
};
}  // namespace Catch

namespace {

std::vector<Action> actions(std::initializer_list<const char*> texts) {
  std::vector<Action> result;
  for (const char* text : texts) result.push_back(parseAction(text));
  return result;
}

// Megatron's forward_backward_pipelining_without_interleaving: warm-up forwards,
// then "forward, backward" pairs, then cool-down backwards; microbatches leave in
// the order they entered.
std::vector<Action> megatronOneFOneB(int p, int m, int r) {
  const int warmup = std::min(p - r - 1, m);
  std::vector<Action> order;
  int forwards = 0;
  int backwards = 0;
  for (int i = 0; i < warmup; ++i) order.push_back({ActionKind::kForward, forwards++, 0});
  for (int i = 0; i < m - warmup; ++i) {
    order.push_back({ActionKind::kForward, forwards++, 0});
    order.push_back({ActionKind::kBackward, backwards++, 0});
  }
  while (backwards < m) order.push_back({ActionKind::kBackward, backwards++, 0});
  return order;
}

// Megatron's forward_backward_pipelining_with_interleaving with its default group
// size p: virtual microbatch k runs on chunk (k mod pv) / p (reversed for
// backward); each chunk takes its microbatches in arrival order, so a per-chunk
// counter gives the microbatch. Warm-up is 2(p−r−1) + (v−1)p, all of v·m when
// that reaches it.
std::vector<Action> megatronInterleaved(int p, int m, int v, int r) {
  const int total = m * v;
  const int warmup = std::min(2 * (p - r - 1) + (v - 1) * p, total);
  std::vector<int> forwardCount(v, 0);
  std::vector<int> backwardCount(v, 0);
  auto forward = [&](int k) {
    const int chunk = (k % (p * v)) / p;
    return Action{ActionKind::kForward, forwardCount[chunk]++, chunk};
  };
  auto backward = [&](int k) {
    const int chunk = v - 1 - (k % (p * v)) / p;
    return Action{ActionKind::kBackward, backwardCount[chunk]++, chunk};
  };
  std::vector<Action> order;
  for (int k = 0; k < warmup; ++k) order.push_back(forward(k));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(forward(k + warmup));
    order.push_back(backward(k));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(backward(k));
  return order;
}

}  // namespace

TEST_CASE("1F1B order, hand-written: p=4, m=8", "[schedules][megatron]") {
  auto schedule = buildOneFOneB(4, 8);
  CHECK(schedule.ranks[0] == actions({"F0", "F1", "F2", "F3", "B0", "F4", "B1", "F5", "B2", "F6",
                                      "B3", "F7", "B4", "B5", "B6", "B7"}));
  CHECK(schedule.ranks[1] == actions({"F0", "F1", "F2", "B0", "F3", "B1", "F4", "B2", "F5", "B3",
                                      "F6", "B4", "F7", "B5", "B6", "B7"}));
  CHECK(schedule.ranks[3] == actions({"F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3", "F4", "B4",
                                      "F5", "B5", "F6", "B6", "F7", "B7"}));
}

TEST_CASE("1F1B order, fewer microbatches than stages: p=4, m=2", "[schedules][megatron]") {
  auto schedule = buildOneFOneB(4, 2);
  CHECK(schedule.ranks[0] == actions({"F0", "F1", "B0", "B1"}));
  CHECK(schedule.ranks[2] == actions({"F0", "F1", "B0", "B1"}));
  CHECK(schedule.ranks[3] == actions({"F0", "B0", "F1", "B1"}));
}

TEST_CASE("1F1B order equals Megatron's over a grid", "[schedules][megatron]") {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      auto schedule = buildOneFOneB(p, m);
      for (int r = 0; r < p; ++r) {
        INFO("p=" << p << " m=" << m << " r=" << r);
        CHECK(schedule.ranks[r] == megatronOneFOneB(p, m, r));
      }
    }
  }
}

TEST_CASE("interleaved order, hand-written: p=2, m=4, v=2", "[schedules][megatron]") {
  // Forward order of virtual microbatches: (0,c0) (1,c0) (0,c1) (1,c1) (2,c0) (3,c0)
  // (2,c1) (3,c1); backward visits the same microbatches with chunks reversed.
  auto schedule = buildInterleaved(2, 4, 2);
  CHECK(schedule.ranks[0] == actions({"F0.0", "F1.0", "F0.1", "F1.1",  // warm-up 2·1 + 1·2 = 4
                                      "F2.0", "B0.1", "F3.0", "B1.1", "F2.1", "B0.0",  // steady
                                      "F3.1", "B1.0", "B2.1", "B3.1", "B2.0", "B3.0"}));
  CHECK(schedule.ranks[1] == actions({"F0.0", "F1.0",  // warm-up 0 + 1·2 = 2
                                      "F0.1", "B0.1", "F1.1", "B1.1", "F2.0", "B0.0", "F3.0",
                                      "B1.0", "F2.1", "B2.1", "F3.1", "B3.1", "B2.0", "B3.0"}));
}

TEST_CASE("interleaved order equals Megatron's over a grid of (p, m, v)", "[schedules][megatron]") {
  for (int p = 1; p <= 6; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = p; m <= 4 * p; m += p) {
        auto schedule = buildInterleaved(p, m, v);
        for (int r = 0; r < p; ++r) {
          INFO("p=" << p << " m=" << m << " v=" << v << " r=" << r);
          CHECK(schedule.ranks[r] == megatronInterleaved(p, m, v, r));
        }
      }
    }
  }
}

TEST_CASE("interleaved with a larger group keeps each group's chunks together",
          "[schedules][megatron]") {
  // Group size 4 on p=2: chunk 0 for microbatches 0-3, then chunk 1 for 0-3.
  auto schedule = buildInterleaved(2, 4, 2, 4);
  CHECK(std::vector<Action>(schedule.ranks[1].begin(), schedule.ranks[1].begin() + 5) ==
        actions({"F0.0", "F1.0", "F2.0", "F3.0", "F0.1"}));
}
