// Megatron-LM's Table 1 (Narayanan et al. 2021; shared/reference/) as the
// benchmark and the tests plan it: each row's model, its hand plan with the
// run settings of Megatron-LM's examples/sc21/run_table_1.sh, and the DGX
// A100 cluster the table was measured on. Header-only: bench_planner and
// tests/unit/models/MegatronMemoryTest.cpp include it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "ir/Cluster.h"
#include "passes/Planner.h"

namespace meshflow::bench {

// A row of Table 1: the model (heads, hidden, layers), Megatron's (tp, pp) on
// `gpus`, the global batch, the measured TFLOP/s per GPU, and the run
// script's microbatch size and, where the run used the interleaved schedule,
// layers per virtual stage (0: plain 1F1B).
struct MegatronRow {
  const char* billions;
  int heads, hidden, layers, tp, pp, gpus, globalBatch;
  double tflops;
  int microbatchSize, layersPerVirtualStage;
};

inline constexpr MegatronRow kMegatronTable1[] = {
    {"1.7", 24, 2304, 24, 1, 1, 32, 512, 137, 16, 0},
    {"3.6", 32, 3072, 30, 2, 1, 64, 512, 138, 16, 0},
    {"7.5", 32, 4096, 36, 4, 1, 128, 512, 142, 16, 0},
    {"18.4", 48, 6144, 40, 8, 1, 256, 1024, 135, 8, 0},
    {"39.1", 64, 8192, 48, 8, 2, 512, 1536, 138, 4, 0},
    {"76.1", 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, 5},
    {"145.6", 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, 5},
    {"310.1", 128, 16384, 96, 8, 16, 1920, 2160, 155, 1, 3},
    {"529.6", 128, 20480, 105, 8, 35, 2520, 2520, 163, 1, 1},
    {"1008.0", 160, 25600, 128, 8, 64, 3072, 3072, 163, 1, 0}};

/// The row of `billions` ("39.1"); std::invalid_argument for another.
inline const MegatronRow& megatronRow(const std::string& billions) {
  for (const MegatronRow& row : kMegatronTable1)
    if (billions == row.billions) return row;
  throw std::invalid_argument("Megatron-LM's Table 1 has no " + billions + "B row");
}

// DGX A100 (reference/hardware.md): 8 x A100-SXM4-80GB, NVLink3 300 GB/s per
// GPU, 8 x 200 Gb/s HDR InfiniBand per node (25 GB/s per GPU, 200 GB/s per node).
inline ir::Cluster dgxA100(std::int64_t nodes) {
  ir::Cluster c;
  c.nodes = nodes;
  c.devicesPerNode = 8;
  c.device = {"A100-SXM4-80GB", 80e9, 312e12, 2039e9};
  c.intraNode = {300e9, 2e-6};
  c.interNode = {25e9 * 8, 10e-6};
  return c;
}

/// Megatron's hand plan as the run script set it: its (tp, pp, dp), its
/// microbatch size, its schedule, `recompute` ("full": "--recompute-method
/// uniform") and an optimizer state replicated over data parallelism.
inline passes::PlanRequest megatronHandPlan(const MegatronRow& row, const char* recompute = "full") {
  passes::PlanRequest hand;
  hand.globalBatch = row.globalBatch;
  hand.stages = row.pp;
  hand.maxTensorParallel = row.tp;
  hand.dataParallel = row.gpus / (row.tp * row.pp);
  hand.microbatches = row.globalBatch / (*hand.dataParallel * row.microbatchSize);
  hand.schedule = ir::ScheduleKind::kOneFOneB;
  if (row.layersPerVirtualStage > 0) {
    hand.schedule = ir::ScheduleKind::kInterleaved;
    hand.virtualStages = row.layers / row.pp / row.layersPerVirtualStage;
  }
  hand.recompute = recompute;
  hand.shardOptimizerState = false;
  return hand;
}

}  // namespace meshflow::bench
