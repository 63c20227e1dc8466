#include "passes/planner/RankMemory.h"

#include <algorithm>

#include "passes/planner/StepTime.h"
#include "passes/schedules/ScheduleError.h"
#include "passes/schedules/Schedules.h"

namespace meshflow::passes {
namespace {

// One rank's replay: what its virtual stages hold as the actions go by.
class RankReplay {
 public:
  RankReplay(const ir::PipelineSchedule& schedule, int rank,
             const std::vector<StageEstimate>& stages, const std::vector<double>& backwardPeaks,
             double base)
      : schedule_(schedule),
        rank_(rank),
        stages_(stages),
        backwardPeaks_(backwardPeaks),
        peak_(base),
        base_(base) {
    inFlight_.assign(stages.size(), 0);
    deferred_.assign(stages.size(), 0);
    started_.assign(stages.size(), false);
    for (int c = 0; c < schedule.chunks; ++c)
      own_.push_back(static_cast<std::size_t>(schedule.virtualStage(rank, c)));
  }

  double run() {
    for (const ir::Action& a : schedule_.ranks.at(static_cast<std::size_t>(rank_))) step(a);
    return peak_;
  }

 private:
  void step(const ir::Action& a) {
    const auto vs = static_cast<std::size_t>(schedule_.virtualStage(rank_, a.chunk));
    const StageEstimate& e = stages_.at(vs);
    switch (a.kind) {
      case ir::ActionKind::kForward:
        ++inFlight_[vs];
        note(0);
        return;
      case ir::ActionKind::kBackward:
      case ir::ActionKind::kInputGrad:
        note(e.workspace);  // its start: a layer rebuilt, none of the stash freed yet
        --inFlight_[vs];
        if (a.kind == ir::ActionKind::kBackward && vs < backwardPeaks_.size())
          note(backwardPeaks_[vs]);  // its own microbatch at its most
        if (a.kind == ir::ActionKind::kInputGrad) {
          ++deferred_[vs];  // the weight gradients are W's to make
          note(0);
          return;
        }
        finish(vs, e);
        return;
      case ir::ActionKind::kWeightGrad:
        --deferred_[vs];
        // W makes the weight gradients as a B does (the first stage's W is
        // its whole backward); its stash held since I is freed as it goes.
        if (vs < backwardPeaks_.size()) note(backwardPeaks_[vs]);
        finish(vs, e);
        return;
      case ir::ActionKind::kRecompute:
        return;
    }
  }

  void start(std::size_t vs) { started_[vs] = true; }

  // The end of a RUN that makes weight gradients, its stash gone: a later
  // microbatch's fresh gradients live beside the step's sums until the RUN
  // adds them in.
  void finish(std::size_t vs, const StageEstimate& e) {
    const bool accumulates = started_[vs];
    start(vs);
    note(accumulates ? e.accumulatedGradients : 0);
  }

  void note(double extra) {
    double held = base_ + extra;
    for (std::size_t vs : own_) {
      const StageEstimate& e = stages_[vs];
      // The first stage sends no gradient back: its I is empty, W does it all.
      const double fromI = vs == 0 ? 0 : e.deferredPerMicrobatch;
      held += inFlight_[vs] * e.heldPerMicrobatch +
              deferred_[vs] * (e.stash + fromI);
      if (started_[vs]) held += e.accumulatedGradients;
    }
    peak_ = std::max(peak_, held);
  }

  const ir::PipelineSchedule& schedule_;
  const int rank_;
  const std::vector<StageEstimate>& stages_;
  const std::vector<double>& backwardPeaks_;
  double peak_;
  const double base_;
  std::vector<std::size_t> own_;  // this rank's virtual stages
  std::vector<int> inFlight_, deferred_;
  std::vector<bool> started_;
};

}  // namespace

double backwardPeak(const std::vector<double>& kept, const std::vector<double>& rebuilt,
                    const std::vector<double>& gradients) {
  double remaining = 0, made = 0;
  for (double k : kept) remaining += k;
  double peak = remaining;
  for (std::size_t l = kept.size(); l-- > 0;) {
    // Within a layer the first ops back make weight gradients (the last
    // matmul's) while most of the layer's stash is still to be read: take
    // them all made before any of it is freed.
    made += gradients.at(l);
    peak = std::max(peak, remaining + rebuilt.at(l) + made);
    remaining -= kept[l];
  }
  return peak;
}

std::optional<std::vector<double>> replayedPeaks(ir::ScheduleKind kind, int chunks,
                                                 int microbatches,
                                                 const std::vector<StageEstimate>& stages,
                                                 const std::vector<StageEstimate>& ranks,
                                                 const std::vector<double>& backwardPeaks) {
  ScheduleRequest request;
  request.kind = std::string(ir::scheduleKindName(kind));
  request.stages = static_cast<int>(ranks.size());
  request.microbatches = microbatches;
  request.chunks = chunks;
  ir::PipelineSchedule schedule;
  try {
    schedule = buildSchedule(request);
  } catch (const ScheduleError&) {
    return std::nullopt;
  }
  if (static_cast<std::size_t>(schedule.virtualStages()) != stages.size()) return std::nullopt;
  std::vector<double> peaks;
  for (int r = 0; r < schedule.stages; ++r) {
    const StageEstimate& sum = ranks.at(static_cast<std::size_t>(r));
    peaks.push_back(
        RankReplay(schedule, r, stages, backwardPeaks, sum.resident - sum.gradients).run());
  }
  return peaks;
}

namespace {

// What one backward of stage `s` holds of its own microbatch at its most
// (backwardPeak), from its layers' figures.
double ownBackwardPeak(const Candidate& c, const StageChoice& s, LayerCostTable& table,
                       const std::vector<MeshConfig>& configs, const ir::Cluster& cluster) {
  RangePricer pricer(table, s.config, configs[static_cast<std::size_t>(s.config)], c.microbatch,
                     1.0 / c.microbatches, s.variant, cluster);
  std::vector<double> kept, rebuilt, gradients;
  for (int l = s.firstLayer; l < s.endLayer; ++l) {
    StageEstimate e = pricer.estimate(l, l + 1);
    kept.push_back(e.heldPerMicrobatch);
    rebuilt.push_back(e.workspace);
    gradients.push_back(e.accumulatedGradients);
  }
  return backwardPeak(kept, rebuilt, gradients);
}

}  // namespace

std::vector<double> candidatePeaks(const Candidate& c, LayerCostTable& table,
                                   const std::vector<MeshConfig>& configs,
                                   const ir::Cluster& cluster) {
  std::vector<StageEstimate> virtualStages;
  std::vector<double> backwardPeaks;
  for (const StageChoice& s : c.stages) {
    virtualStages.push_back(s.estimate);
    backwardPeaks.push_back(ownBackwardPeak(c, s, table, configs, cluster));
  }
  if (auto replayed = replayedPeaks(c.schedule, c.chunks, c.microbatches, virtualStages, c.ranks,
                                    backwardPeaks))
    return *replayed;
  std::vector<double> peaks;
  const int ranks = static_cast<int>(c.ranks.size());
  for (int r = 0; r < ranks; ++r)
    peaks.push_back(c.ranks[static_cast<std::size_t>(r)].memory(
        holdingOf(c.schedule, c.chunks, ranks, r, c.microbatches)));
  return peaks;
}

}  // namespace meshflow::passes
