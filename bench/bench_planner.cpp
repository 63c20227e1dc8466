// The planner on the published GPT configurations: every row of Megatron-LM's
// Table 1 (Narayanan et al., SC'21) on its GPU count of DGX A100 nodes, and
// Alpa's GPT suite on p3.16xlarge clusters. Per row it prints the planning
// time, the plan found, the published hand plan (tp, pp, dp) evaluated under
// the same cost model, the ratio of their estimated step times (≥ 1 means ours
// is no slower), and the predicted TFLOP/s per GPU beside Megatron's measured
// figure. Not a timed test: run it by hand (bench/README.md).
//
//   bench_planner [--megatron] [--alpa] [--rows N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "interp/Tracing.h"
#include "ir/Cluster.h"
#include "meshflow/meshflow.h"
#include "passes/Planner.h"

using namespace meshflow;

namespace {

ir::Graph trace(const std::string& model) {
  Interpreter interpreter;
  auto status = interpreter.eval("import std.models\ntrace(" + model + ")", "bench.mesh");
  if (!status.ok) {
    std::fprintf(stderr, "cannot trace %s: %s\n", model.c_str(), renderAll(status.diagnostics).c_str());
    std::exit(1);
  }
  return dynamic_cast<interp::GraphObject*>(status.value->object().get())->graph();
}

// DGX A100 (reference/hardware.md): 8 x A100-SXM4-80GB, NVLink3 300 GB/s per GPU,
// 8 x 200 Gb/s HDR InfiniBand per node (25 GB/s per GPU, 200 GB/s per node).
ir::Cluster dgxA100(std::int64_t nodes) {
  ir::Cluster c;
  c.nodes = nodes;
  c.devicesPerNode = 8;
  c.device = {"A100-SXM4-80GB", 80e9, 312e12, 2039e9};
  c.intraNode = {300e9, 2e-6};
  c.interNode = {25e9 * 8, 10e-6};
  return c;
}

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

struct Outcome {
  std::optional<ir::Plan> plan;
  std::string error;
  double seconds = 0;
};

Outcome plan(const ir::Graph& g, const ir::Cluster& cluster, const passes::PlanRequest& request) {
  Outcome o;
  auto start = std::chrono::steady_clock::now();
  try {
    o.plan = passes::planTraining(g, cluster, request);
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  o.seconds = seconds(start);
  return o;
}

std::string shape(const ir::Plan& p) {
  const ir::PlanStage& s = p.stages.front();
  return std::to_string(p.pipelineRanks()) + " stages x (" + std::to_string(s.logicalMesh[0]) +
         "x" + std::to_string(s.logicalMesh[1]) + ") " + std::string(ir::scheduleKindName(p.schedule)) +
         " m=" + std::to_string(p.microbatches) +
         (p.stages.front().costs.recompute != "none" ? " rc=" + p.stages.front().costs.recompute : "");
}

struct MegatronRow {
  const char* billions;
  int tp, pp, gpus, globalBatch;
  double tflops;
};

void megatron(int rows) {
  const MegatronRow table[] = {
      {"1.7", 1, 1, 32, 512, 137},      {"3.6", 2, 1, 64, 512, 138},
      {"7.5", 4, 1, 128, 512, 142},     {"18.4", 8, 1, 256, 1024, 135},
      {"39.1", 8, 2, 512, 1536, 138},   {"76.1", 8, 4, 1024, 1792, 140},
      {"145.6", 8, 8, 1536, 2304, 148}, {"310.1", 8, 16, 1920, 2160, 155},
      {"529.6", 8, 35, 2520, 2520, 163}, {"1008.0", 8, 64, 3072, 3072, 163}};
  std::printf("Megatron-LM Table 1 on DGX A100 (sequence 2048)\n");
  std::printf("%-7s %5s %8s  %-44s %-44s %9s %9s %6s %8s %8s %8s\n", "params", "gpus", "plan_s",
              "ours", "megatron (tp,pp,dp) under our model", "ours_s", "meg_s", "ratio",
              "ours_TF", "meg_TF", "meas_TF");
  int n = 0;
  for (const MegatronRow& row : table) {
    if (n++ >= rows) break;
    ir::Graph g = trace(std::string("megatron_gpt(\"") + row.billions + "\")");
    ir::Cluster cluster = dgxA100(row.gpus / 8);
    passes::PlanRequest ours;
    ours.globalBatch = row.globalBatch;
    Outcome a = plan(g, cluster, ours);
    passes::PlanRequest hand = ours;
    hand.stages = row.pp;
    hand.maxTensorParallel = row.tp;
    hand.dataParallel = row.gpus / (row.tp * row.pp);
    hand.schedule = ir::ScheduleKind::kOneFOneB;
    hand.recompute = "full";  // Megatron's Table 1 runs recompute activations
    hand.shardOptimizerState = false;  // and keep optimizer state unsharded
    Outcome b = plan(g, cluster, hand);
    auto text = [](const Outcome& o) { return o.plan ? shape(*o.plan) : "error: " + o.error.substr(0, 60); };
    double ratio = a.plan && b.plan ? b.plan->stepTime / a.plan->stepTime : 0;
    std::printf("%-7s %5d %8.2f  %-44s %-44s %9.3f %9.3f %6.3f %8.1f %8.1f %8.1f\n", row.billions,
                row.gpus, a.seconds, text(a).c_str(), text(b).c_str(),
                a.plan ? a.plan->stepTime : 0.0, b.plan ? b.plan->stepTime : 0.0, ratio,
                a.plan ? a.plan->tflopsPerDevice : 0.0, b.plan ? b.plan->tflopsPerDevice : 0.0,
                row.tflops);
    std::fflush(stdout);
  }
}

struct AlpaRow {
  const char* model;
  int gpus;
};

void alpa() {
  const AlpaRow table[] = {{"gpt_350m()", 1}, {"gpt_1_3b()", 4},  {"gpt_2_6b()", 8},
                           {"gpt_6_7b()", 16}, {"gpt_15b()", 32}, {"gpt_39b()", 64}};
  std::printf("\nAlpa's GPT suite on p3.16xlarge (global batch 1024, sequence 1024)\n");
  std::printf("%-12s %5s %8s  %-60s %9s %8s %10s\n", "model", "gpus", "plan_s", "ours", "step_s",
              "TF/gpu", "peak_GB");
  for (const AlpaRow& row : table) {
    ir::Graph g = trace(row.model);
    int nodes = row.gpus < 8 ? 1 : row.gpus / 8;
    ir::Cluster cluster = ir::p3_16xlarge(nodes);
    if (row.gpus < 8) cluster.devicesPerNode = row.gpus;
    passes::PlanRequest request;
    request.globalBatch = 1024;
    Outcome a = plan(g, cluster, request);
    std::printf("%-12s %5d %8.2f  %-60s %9.3f %8.1f %10.2f\n", row.model, row.gpus, a.seconds,
                a.plan ? shape(*a.plan).c_str() : ("error: " + a.error.substr(0, 50)).c_str(),
                a.plan ? a.plan->stepTime : 0.0, a.plan ? a.plan->tflopsPerDevice : 0.0,
                a.plan ? a.plan->peakMemoryBytes() / 1e9 : 0.0);
    if (a.plan) std::printf("             %s\n", a.plan->notes.back().c_str());
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool runMegatron = true, runAlpa = true;
  int rows = 10;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--megatron")) runAlpa = false;
    else if (!std::strcmp(argv[i], "--alpa")) runMegatron = false;
    else if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) rows = std::atoi(argv[++i]);
  }
  if (runMegatron) megatron(rows);
  if (runAlpa) alpa();
}
