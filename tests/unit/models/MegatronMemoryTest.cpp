// The planner's memory terms on Megatron-LM's Table 1 plans against Megatron's
// own formulas (issue 18, "Memory the way Megatron counts it"; docs/planning.md,
// "Memory, the way Megatron counts it"): weights, gradients and optimizer state
// as megatron/training/theoretical_memory_usage.py counts them (18 bytes per
// parameter in mixed precision), and activations as Korthikanti et al. 2022
// (Table 2) count them, for the layout each plan really uses.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <iterator>
#include <string>

#include "bench/MegatronTable.h"
#include "interp/Tracing.h"
#include "tests/unit/TracedModel.h"
#include "ir/Cluster.h"
#include "meshflow/meshflow.h"
#include "passes/Planner.h"

using namespace meshflow;
using bench::dgxA100;
using bench::kMegatronTable1;
using bench::MegatronRow;

namespace {

ir::Graph traced(const std::string& model) { return test::tracedModel(model); }

double gb(double bytes) { return bytes / 1e9; }

// The plan of `row` with Megatron's run settings, traced in fp16 as the runs were.
ir::Plan megatronPlan(const MegatronRow& row, const char* recompute) {
  ir::Graph g = traced(fmt::format("megatron_gpt(\"{}\", dtype = f16)", row.billions));
  return passes::planTraining(g, dgxA100(row.gpus / 8), bench::megatronHandPlan(row, recompute));
}

// Megatron's weights, gradients and optimizer state of a stage of `blocks`
// transformer layers (12h² + 13h parameters each) and, on the last stage, the
// final norm and the untied head, split over the tensor-parallel group: 18
// bytes per parameter (theoretical_memory_usage.py, no distributed optimizer).
double megatronStatic(const MegatronRow& row, int blocks, bool last) {
  double h = row.hidden, vocab = 51200;
  double params = blocks * (12 * h * h + 13 * h) + (last ? vocab * h + 2 * h : 0);
  return 18 * params / row.tp;
}

// Korthikanti et al. 2022, Table 2, without the dropout terms (the stdlib GPT
// has no dropout: neither its masks, sbh per layer, nor its 3as²b): per layer
// and microbatch, what selective recomputation keeps — 8sbh + 24sbh/t with the
// layer's input and norms replicated over the tensor-parallel group, 32sbh/t
// with them split (sequence parallelism) — and the 2as²b/t of attention scores
// it rebuilds.
struct Korthikanti {
  double sbh, heads, s, b, t;
  double selectiveKept(bool sequenceParallel) const {
    return sequenceParallel ? 32 * sbh / t : 8 * sbh + 24 * sbh / t;
  }
  double scores() const { return 2 * heads * s * s * b / t; }
  double checkpoint(bool sequenceParallel) const { return sequenceParallel ? 2 * sbh / t : 2 * sbh; }
};

Korthikanti formulas(const MegatronRow& row) {
  double s = 2048, b = row.microbatchSize;
  return {s * b * row.hidden, double(row.heads), s, b, double(row.tp)};
}

}  // namespace

TEST_CASE("weights, gradients and optimizer state are Megatron's 18 bytes per parameter",
          "[models][megatron][memory]") {
  // The rows whose plans keep Megatron's layout (weights split over the
  // tensor-parallel group only); docs/planning.md names the others.
  for (const char* billions : {"39.1", "1008.0"}) {
    const MegatronRow& row = bench::megatronRow(billions);
    ir::Plan plan = megatronPlan(row, "full");
    const ir::PlanStage& second = plan.stages.at(1);  // blocks only (the first adds the embedding)
    bool last = plan.stages.size() == 2;
    int blocks = second.endLayer - second.firstLayer - (last ? 1 : 0);
    double ours = second.costs.parameterBytes + second.costs.gradientBytes;
    double megatron = megatronStatic(row, blocks, last);
    INFO(billions << "B, stage 1: ours " << gb(ours) << " GB, Megatron's " << gb(megatron) << " GB");
    CHECK(std::abs(ours / megatron - 1) < 0.10);
  }
}

TEST_CASE("activations are Korthikanti's per layer for the layout the plan uses",
          "[models][megatron][memory]") {
  for (const MegatronRow& row : kMegatronTable1) {
    if (row.pp < 2) continue;  // a second stage starts at a transformer layer
    const Korthikanti k = formulas(row);
    // Full recomputation keeps each layer's input, its checkpoint, as
    // Megatron does (and the runtime: passes/Recomputation.h).
    ir::Plan full = megatronPlan(row, "full");
    const ir::PlanStage& stage = full.stages.at(1);
    const double perLayer = stage.costs.heldActivationBytes / (stage.endLayer - stage.firstLayer);
    bool split = perLayer < 0.5 * k.checkpoint(false);
    INFO(row.billions << "B full, per layer: kept " << gb(perLayer) << " GB, checkpoint "
                      << gb(k.checkpoint(split)) << " GB");
    CHECK(std::abs(perLayer / k.checkpoint(split) - 1) < 0.10);
  }
  // Selective recomputation where Megatron's plans fit (docs/planning.md):
  // what a layer keeps, and the scores it rebuilds (one layer's at a time).
  for (const char* billions : {"310.1", "529.6", "1008.0"}) {
    const MegatronRow& row = bench::megatronRow(billions);
    const Korthikanti k = formulas(row);
    ir::Plan plan = megatronPlan(row, "selective");
    const ir::PlanStage& stage = plan.stages.at(1);
    double layers = stage.endLayer - stage.firstLayer;
    double kept = stage.costs.heldActivationBytes / layers;
    double rebuilt = stage.costs.recomputeBytes;
    INFO(billions << "B selective, per layer: kept " << gb(kept) << " GB against "
                  << gb(k.selectiveKept(true)) << ", rebuilt " << gb(rebuilt) << " GB against "
                  << gb(k.scores()));
    CHECK(std::abs(kept / k.selectiveKept(true) - 1) < 0.10);
    CHECK(std::abs(rebuilt / k.scores() - 1) < 0.10);
  }
}
