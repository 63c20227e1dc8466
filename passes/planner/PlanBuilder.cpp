#include "passes/planner/PlanBuilder.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/OpCost.h"
#include "passes/PlanFacts.h"
#include "passes/planner/RankMemory.h"
#include "passes/planner/StepTime.h"

namespace meshflow::passes {

std::string Candidate::describe(const std::vector<MeshConfig>& configs) const {
  std::string meshes;
  for (std::size_t k = 0; k < stages.size();) {
    std::size_t run = k;
    while (run < stages.size() && stages[run].config == stages[k].config &&
           stages[run].variant.recompute == stages[k].variant.recompute &&
           stages[run].variant.zero == stages[k].variant.zero &&
           stages[run].variant.lean == stages[k].variant.lean)
      ++run;
    if (!meshes.empty()) meshes += ", ";
    meshes += fmt::format("{}x {}", run - k, configs[stages[k].config].text());
    if (stages[k].variant.recompute != Recompute::kNone)
      meshes += fmt::format(" recompute {}", recomputeName(stages[k].variant.recompute));
    if (stages[k].variant.zero) meshes += " zero";
    if (stages[k].variant.lean) meshes += " lean";
    k = run;
  }
  std::string kind(ir::scheduleKindName(schedule));
  if (chunks > 1) kind += fmt::format(" v={}", chunks);
  return fmt::format("{}, {} microbatch{} of {}, {} stage{}: {}", kind, microbatches,
                     microbatches == 1 ? "" : "es", microbatch, ranks.size(),
                     ranks.size() == 1 ? "" : "s", meshes);
}

int Candidate::rankOf(std::size_t k) const {
  ir::PipelineSchedule layout;
  layout.kind = schedule;
  layout.stages = static_cast<int>(ranks.size());
  layout.chunks = chunks;
  return layout.locate(static_cast<int>(k)).rank;
}

namespace {

std::vector<ir::OpStrategy> strategiesOf(const PlanInputs& in, const Candidate& c,
                                         const StageChoice& stage, int layer) {
  const auto& cost = in.table->cost(layer, stage.config, (*in.configs)[stage.config],
                                    c.microbatch, 1.0 / c.microbatches, stage.variant.lean);
  LayerSubgraph sub = layerSubgraph(*in.forward, in.layers->layerOfOp, layer, layer + 1);
  std::vector<ir::OpStrategy> out;
  for (const OpSharding& o : cost->sharding->ops) {
    ir::OpId source = sub.sourceOp[o.op];
    if (in.layers->layerOfOp[source] != layer) continue;  // a boundary input
    ir::OpStrategy s;
    s.op = source;
    s.kind = ir::opName(in.forward->op(source).kind);
    s.scope = in.forward->op(source).scope;
    s.name = o.strategy;
    for (const auto& spec : o.inputs) s.inputs.push_back(spec.toString());
    for (const auto& spec : o.outputs) s.outputs.push_back(spec.toString());
    s.cost = o.communication;
    for (const StrategyAlternative& a : o.alternatives) s.alternatives.push_back({a.name, a.nodeCost});
    out.push_back(std::move(s));
  }
  return out;
}

// The weights' bytes per device of a stage's layers (the rest of its
// parameter bytes is optimizer state).
double stageWeights(const PlanInputs& in, const Candidate& c, const StageChoice& stage) {
  double weights = 0;
  for (int l = stage.firstLayer; l < stage.endLayer; ++l)
    weights += in.table->cost(l, stage.config, (*in.configs)[stage.config], c.microbatch,
                              1.0 / c.microbatches, stage.variant.lean)
                   ->weights;
  return weights;
}

ir::StageCosts costsOf(const StageEstimate& e, const StageEstimate* next, const MeshConfig& config,
                       const StageChoice& stage) {
  ir::StageCosts c;
  // Lowering emits the transfers as SEND/RECV of their own.
  c.forwardSeconds = e.forward - e.transferSeconds;
  c.backwardSeconds = e.backward - e.transferSeconds;
  c.weightGradSeconds = e.weightGrad;
  c.updateSeconds = e.update;
  c.gradientSyncSeconds = e.parameterSync;
  // Each data-parallel row of the mesh sends its share of the microbatch.
  c.activationBytes = next ? next->transferIn / double(config.view[0]) : 0;
  c.heldActivationBytes = e.heldPerMicrobatch;
  c.parameterBytes = e.resident - e.gradients;
  c.gradientBytes = e.gradients;
  c.recompute = recomputeName(stage.variant.recompute);
  c.recomputeSeconds = e.rerunAhead;  // what RUN R reruns; the rest is in backwardSeconds
  c.recomputeBytes = e.workspace;
  c.shardedOptimizerState = stage.variant.zero;
  c.gradientSyncBytes = std::array<double, 3>{e.syncBytes[1], e.syncBytes[2], e.syncBytes[3]};
  return c;
}

void addThroughput(const PlanInputs& in, const Candidate& best, ir::Plan& plan) {
  ir::OpCost model = ir::graphCost(*in.forward, in.globalBatch);
  double modelFlops = model.flops + model.backwardFlops;
  std::vector<double> layerForward(in.layers->layers.size(), 0);
  for (ir::OpId id = 0; id < in.forward->ops().size(); ++id)
    layerForward[in.layers->layerOfOp[id]] += ir::opCost(*in.forward, id, in.globalBatch).flops;
  double recomputed = 0;
  for (const StageChoice& s : best.stages)
    for (int l = s.firstLayer; l < s.endLayer; ++l)
      recomputed += s.estimate.recomputeShare() * layerForward[l];
  double devices = double(in.cluster->deviceCount());
  plan.samplesPerSecond = double(in.globalBatch) / best.stepTime;
  plan.tflopsPerDevice = (modelFlops + recomputed) / best.stepTime / devices / 1e12;
  plan.mfu = modelFlops / best.stepTime / devices / in.cluster->device.peakFlops;
  plan.mfuWithRecompute = (modelFlops + recomputed) / best.stepTime / devices / in.cluster->device.peakFlops;
}

void addNotes(const PlanInputs& in, const Candidate& best, ir::Plan& plan) {
  plan.notes.push_back(best.search == "alpa"
                           ? "stages from Alpa's DP over layer ranges x submeshes x meshes"
                           : "stages from the uniform search (every stage alike, Megatron's grid)");
  for (std::size_t k = 0; k < best.stages.size(); ++k) {
    const StageChoice& s = best.stages[k];
    for (int l = s.firstLayer; l < s.endLayer; ++l) {
      const auto& cost = in.table->cost(l, s.config, (*in.configs)[s.config], best.microbatch,
                                        1.0 / best.microbatches, s.variant.lean);
      const IntraOpResult& r = *cost->sharding;
      if (!r.optimal) {
        plan.notes.push_back(fmt::format(
            "intra-op sharding of stage {} (layer {}) is the best found in the time budget, not "
            "proven optimal: objective {:.6g} s, bound {:.6g} s, gap {:.2f}%",
            k, l, r.objective, r.lowerBound,
            r.objective > 0 ? 100 * (r.objective - r.lowerBound) / r.objective : 0.0));
        break;
      }
    }
  }
}

}  // namespace

ir::Plan buildPlan(const PlanInputs& in, const Candidate& best,
                   const std::vector<std::vector<int>>& devices) {
  ir::Plan plan;
  plan.microbatches = best.microbatches;
  plan.schedule = best.schedule;
  plan.chunks = best.chunks;
  plan.globalBatch = in.globalBatch;
  plan.stepTime = best.stepTime;
  plan.description = best.describe(*in.configs);
  plan.model = modelFacts(*in.forward);
  const std::vector<double> peaks = candidatePeaks(best, *in.table, *in.configs, *in.cluster);
  for (std::size_t k = 0; k < best.stages.size(); ++k) {
    const StageChoice& s = best.stages[k];
    const MeshConfig& config = (*in.configs)[s.config];
    int rank = best.rankOf(k);
    ir::PlanStage ps;
    ps.firstLayer = s.firstLayer;
    ps.endLayer = s.endLayer;
    ps.submesh = {config.shape.nodes, config.shape.devicesPerNode};
    ps.logicalMesh = config.view;
    ps.devices = devices[rank];
    for (int l = s.firstLayer; l < s.endLayer; ++l) {
      auto strategies = strategiesOf(in, best, s, l);
      ps.strategies.insert(ps.strategies.end(), strategies.begin(), strategies.end());
    }
    ps.latency = s.estimate.latency();
    ps.peakMemoryBytes = peaks[static_cast<std::size_t>(rank)];
    const StageEstimate* next = k + 1 < best.stages.size() ? &best.stages[k + 1].estimate : nullptr;
    ps.costs = costsOf(s.estimate, next, config, s);
    ps.costs.optimizerStateBytes = std::max(0.0, ps.costs.parameterBytes - stageWeights(in, best, s));
    plan.stages.push_back(std::move(ps));
  }
  addThroughput(in, best, plan);
  addNotes(in, best, plan);
  return plan;
}

}  // namespace meshflow::passes
