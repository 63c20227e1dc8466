#include "ir/PlanMemory.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/PipelineSchedule.h"

namespace meshflow::ir {
namespace {

constexpr double kBucketBytes = double(std::int64_t{25} << 20);  // PipelineDescription::bucketBytes

int rankOf(const Plan& plan, int stage) {
  PipelineSchedule layout;
  layout.kind = plan.schedule;
  layout.stages = plan.pipelineRanks();
  layout.chunks = plan.chunks;
  return layout.locate(stage).rank;
}

bool syncsGradients(const PlanStage& s) {
  if (s.logicalMesh[0] > 1) return true;
  if (!s.costs.gradientSyncBytes) return false;
  const auto& bytes = *s.costs.gradientSyncBytes;
  return bytes[0] + bytes[1] + bytes[2] > 0;
}

void addStage(const Plan& plan, int k, RankMemory& m) {
  const PlanStage& s = plan.stages[static_cast<std::size_t>(k)];
  m.stages.push_back(k);
  m.optimizerState += s.costs.optimizerStateBytes;
  m.weights += s.costs.parameterBytes - s.costs.optimizerStateBytes;
  m.gradients += s.costs.gradientBytes;
  m.peak = std::max(m.peak, s.peakMemoryBytes);
  double received = k > 0 ? plan.stages[static_cast<std::size_t>(k) - 1].costs.activationBytes : 0;
  double buffers = received + s.costs.activationBytes +
                   (syncsGradients(s) ? std::min(kBucketBytes, s.costs.gradientBytes) : 0);
  m.communicationBuffers = std::max(m.communicationBuffers, buffers);
}

// "stage 3", "stages 1-6", "rank 0 (stages 0, 7)".
std::string rowLabel(const Plan& plan, const std::vector<RankMemory>& ranks, std::size_t first,
                     std::size_t last) {
  if (plan.chunks == 1)
    return first == last ? fmt::format("stage {}", first) : fmt::format("stages {}-{}", first, last);
  if (first != last) return fmt::format("ranks {}-{}", first, last);
  std::string stages;
  for (int k : ranks[first].stages) stages += (stages.empty() ? "" : ", ") + std::to_string(k);
  return fmt::format("rank {} (stages {})", first, stages);
}

std::vector<std::string> cells(const RankMemory& m) {
  return {formatBytes(m.weights),     formatBytes(m.gradients), formatBytes(m.optimizerState),
          formatBytes(m.activations), formatBytes(m.peak),      formatBytes(m.communicationBuffers)};
}

}  // namespace

std::vector<RankMemory> planMemory(const Plan& plan) {
  std::vector<RankMemory> ranks(static_cast<std::size_t>(std::max(plan.pipelineRanks(), 0)));
  for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r].rank = static_cast<int>(r);
  for (int k = 0; k < static_cast<int>(plan.stages.size()); ++k) {
    int rank = plan.chunks == 1 ? k : rankOf(plan, k);
    addStage(plan, k, ranks.at(static_cast<std::size_t>(rank)));
  }
  for (RankMemory& m : ranks)
    m.activations = std::max(0.0, m.peak - m.weights - m.gradients - m.optimizerState);
  return ranks;
}

std::string memoryTable(const Plan& plan) {
  std::vector<RankMemory> ranks = planMemory(plan);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> labels;
  for (std::size_t r = 0; r < ranks.size();) {
    std::size_t last = r;
    while (last + 1 < ranks.size() && cells(ranks[last + 1]) == cells(ranks[r]) && plan.chunks == 1)
      ++last;
    labels.push_back(rowLabel(plan, ranks, r, last));
    rows.push_back(cells(ranks[r]));
    r = last + 1;
  }
  std::size_t width = std::string("memory per device").size();
  for (const std::string& label : labels) width = std::max(width, label.size());
  std::string out = fmt::format("{:<{}}  {:>10} {:>10} {:>10} {:>11} {:>10}  {}\n",
                                "memory per device", width, "weights", "gradients", "optimizer",
                                "activations", "peak", "comm buffers, outside the peak");
  for (std::size_t i = 0; i < rows.size(); ++i)
    out += fmt::format("{:<{}}  {:>10} {:>10} {:>10} {:>11} {:>10}  {}\n", labels[i], width,
                       rows[i][0], rows[i][1], rows[i][2], rows[i][3], rows[i][4], rows[i][5]);
  return out;
}

}  // namespace meshflow::ir
