// compare(p, q) and the REPL's :compare and :alts: plans side by side
// (docs/planning.md, "Comparing plans").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "interp/PlanObject.h"
#include "ir/Bytes.h"
#include "ir/PlanAxes.h"
#include "ir/PlanMemory.h"

namespace meshflow::interp {
namespace {

// Runs of equal texts: "2x (1, 4), (1, 8)".
std::string runs(const std::vector<std::string>& texts) {
  std::string out;
  for (std::size_t i = 0; i < texts.size();) {
    std::size_t j = i;
    while (j < texts.size() && texts[j] == texts[i]) ++j;
    out += (out.empty() ? "" : ", ") + (j - i > 1 ? fmt::format("{}x {}", j - i, texts[i]) : texts[i]);
    i = j;
  }
  return out;
}

template <typename Text>
std::string perStage(const ir::Plan& plan, Text text) {
  std::vector<std::string> texts;
  for (const ir::PlanStage& s : plan.stages) texts.push_back(text(s));
  return runs(texts);
}

// One plan's column, row by row.
struct Column {
  std::vector<std::string> cells;
  double simulated = 0;  // 0 when it cannot be simulated
};

const ir::RankMemory& busiest(const std::vector<ir::RankMemory>& ranks) {
  return *std::max_element(ranks.begin(), ranks.end(),
                           [](const auto& x, const auto& y) { return x.peak < y.peak; });
}

const std::vector<std::string> kRows = {
    "stages",          "schedule",        "meshes",          "axes",
    "recompute",       "optimizer state", "step, estimated", "step, simulated",
    "throughput",      "MFU",             "peak memory",     "  weights",
    "  gradients",     "  optimizer",     "  activations",   "intra-node bytes",
    "inter-node bytes"};

Column columnOf(const PlanObject& object) {
  const ir::Plan& p = object.plan();
  Column c;
  auto add = [&](std::string text) { c.cells.push_back(std::move(text)); };
  add(fmt::format("{} on {} rank{}", p.stages.size(), p.pipelineRanks(),
                  p.pipelineRanks() == 1 ? "" : "s"));
  add(fmt::format("{}, {} microbatches{}", ir::scheduleKindName(p.schedule), p.microbatches,
                  p.chunks > 1 ? fmt::format(", {} chunks", p.chunks) : ""));
  add(perStage(p, [](const ir::PlanStage& s) {
    return fmt::format("({}, {})", s.logicalMesh[0], s.logicalMesh[1]);
  }));
  add(perStage(p, [](const ir::PlanStage& s) { return ir::axesText(s); }));
  add(perStage(p, [](const ir::PlanStage& s) { return s.costs.recompute; }));
  add(perStage(p, [](const ir::PlanStage& s) {
    return std::string(s.costs.shardedOptimizerState && s.logicalMesh[0] > 1 ? "sharded" : "whole");
  }));
  add(ir::formatSeconds(p.stepTime));
  auto simulated = object.trySimulatedStep();
  const bool ran = std::holds_alternative<double>(simulated);
  if (ran) c.simulated = std::get<double>(simulated);
  add(ran ? ir::formatSeconds(c.simulated) : "cannot simulate");
  add(p.model.sequence > 0 ? ir::rateText(p.tokensPerSecond()) + " tokens/s"
                           : fmt::format("{:.4g} samples/s", p.samplesPerSecond));
  add(fmt::format("{:.1f}%", p.mfu * 100));
  std::vector<ir::RankMemory> ranks = ir::planMemory(p);
  const ir::RankMemory& top = busiest(ranks);
  add(fmt::format("{} (rank {})", ir::formatBytes(top.peak), top.rank));
  add(ir::formatBytes(top.weights));
  add(ir::formatBytes(top.gradients));
  add(ir::formatBytes(top.optimizerState));
  add(ir::formatBytes(top.activations));
  add(ran ? ir::formatBytes(object.simulation().result.intraNodeBytes) : "-");
  add(ran ? ir::formatBytes(object.simulation().result.interNodeBytes) : "-");
  return c;
}

std::string verdict(const Column& a, const Column& b, const ir::Plan& pa, const ir::Plan& pb,
                    const std::string& nameA, const std::string& nameB) {
  auto faster = [&](double x, double y, const char* how) {
    if (x <= 0 || y <= 0) return std::string();
    if (x == y) return fmt::format("the same {} step time", how);
    bool first = x < y;
    double ratio = first ? y / x : x / y;
    std::string by = ratio >= 1.1 ? fmt::format("{:.2f}x", ratio)
                                  : fmt::format("{:.2g}%", (ratio - 1) * 100);
    return fmt::format("{} is {} faster {}", first ? nameA : nameB, by, how);
  };
  std::string out = faster(pa.stepTime, pb.stepTime, "estimated");
  std::string simulated = faster(a.simulated, b.simulated, "simulated");
  if (!simulated.empty()) out += "; " + simulated;
  return out + "\n";
}

}  // namespace

std::string comparePlans(const PlanObject& a, const PlanObject& b, const std::string& nameA,
                         const std::string& nameB) {
  Column ca = columnOf(a), cb = columnOf(b);
  std::size_t width = nameA.size();
  for (const std::string& cell : ca.cells) width = std::max(width, cell.size());
  std::string out = fmt::format("  {:<18}{:<{}}  {}\n", "", nameA, width, nameB);
  std::vector<std::string> differ;
  for (std::size_t r = 0; r < kRows.size(); ++r) {
    bool same = ca.cells[r] == cb.cells[r];
    if (!same && kRows[r].front() != ' ') differ.push_back(kRows[r]);
    out += fmt::format("{} {:<18}{:<{}}  {}\n", same ? ' ' : '*', kRows[r], ca.cells[r], width,
                       cb.cells[r]);
  }
  out += differ.empty() ? std::string("they differ in nothing above\n")
                        : fmt::format("they differ in: {}\n", fmt::join(differ, ", "));
  out += verdict(ca, cb, a.plan(), b.plan(), nameA, nameB);
  return out;
}

std::string alternativesText(const ir::Plan& plan) {
  std::string out;
  for (std::size_t i = 0; i < plan.alternatives.size(); ++i) {
    const ir::PlanAlternative& a = plan.alternatives[i];
    std::string simulated = a.plan && a.plan->simulatedStepTime > 0
                                ? fmt::format(" (simulated {})", ir::formatSeconds(a.plan->simulatedStepTime))
                                : "";
    out += fmt::format("  [{}] {:>9}{}  {}\n", i, ir::formatSeconds(a.stepTime), simulated, a.description);
  }
  return out;
}

}  // namespace meshflow::interp
