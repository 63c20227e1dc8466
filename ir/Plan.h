// ir::Plan — the planner's decisions and their explanations: what `print(p)`
// shows, what `p.save(path)` writes, and what the exports translate into the
// notations users know (Megatron-LM flags, JAX PartitionSpecs, Alpa specs).
//
// A plan is plain data. It holds the pipeline stages in layer order (with an
// interleaved schedule, the virtual stages: stage k runs on pipeline rank
// k mod p, p = stages.size() / chunks), the schedule, the per-op sharding
// strategies as canonical ShardingSpec strings, the cost model's estimates and
// the alternatives the planner weighed. The JSON form (planToJson) parses back
// to an equal plan (planFromJson); docs/planning.md lists its keys.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Bytes.h"
#include "ir/Graph.h"
#include "ir/PipelineSchedule.h"
#include "ir/Sharding.h"

namespace meshflow::ir {

/// One alternative strategy of an op with its cost (seconds), for `explain`.
struct OpAlternative {
  std::string strategy;  ///< e.g. "RS1 = RR x RS1"
  double cost = 0;
  bool operator==(const OpAlternative&) const = default;
};

/// The strategy chosen for one op: the sharding of each input and output on the
/// stage's logical mesh, as canonical ShardingSpec strings.
struct OpStrategy {
  OpId op = 0;
  std::string kind;   ///< opName of the op, e.g. "matmul"
  std::string scope;  ///< e.g. "block3.mlp.fc1"
  std::string name;   ///< the chosen strategy, e.g. "RS1 = RR x RS1"; may be empty
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  double cost = 0;  ///< Communication seconds of the chosen strategy.
  std::vector<OpAlternative> alternatives;
  bool operator==(const OpStrategy&) const = default;
};

/// What the simulator and the runtime need to know about one stage, per
/// microbatch and per device (see passes/PipelineDescription.h, which is built
/// from it).
struct StageCosts {
  double forwardSeconds = 0;     ///< One microbatch's forward, whole stage.
  double backwardSeconds = 0;    ///< Its whole backward (input + weight gradients).
  double weightGradSeconds = 0;  ///< The weight-gradient part of backwardSeconds.
  double updateSeconds = 0;      ///< The optimizer step, once per step.
  double gradientSyncSeconds = 0;  ///< Gradient synchronisation, once per step.
  double activationBytes = 0;      ///< Sent to the next stage per microbatch.
  double heldActivationBytes = 0;  ///< Kept from forward to backward per microbatch.
  double parameterBytes = 0;       ///< Weights and optimizer state.
  /// The optimizer state's part of parameterBytes (sharded when
  /// shardedOptimizerState); the rest is the weights.
  double optimizerStateBytes = 0;
  double gradientBytes = 0;
  std::string recompute = "none";  ///< "none", "selective" or "full".
  /// With recomputation: the forward work RUN R reruns before each backward —
  /// the stage's last layer that rebuilds anything, as the runtime reruns it;
  /// the other layers' reruns happen inside the backward, and all of it is part
  /// of backwardSeconds — and the activations one layer rebuilds, held while
  /// the backward runs.
  double recomputeSeconds = 0;
  double recomputeBytes = 0;
  bool shardedOptimizerState = false;  ///< ZeRO-like reduce-scatter + all-gather.
  /// Bytes of gradients the stage's strategies leave as partial sums, summed
  /// over mesh dimension 0 only, dimension 1 only, and both: what its gradient
  /// synchronisation all-reduces once per step, whatever the mesh's shape.
  /// Absent in plans that do not say (hand-built, or saved before it existed):
  /// the simulator then all-reduces every gradient over the replicas.
  std::optional<std::array<double, 3>> gradientSyncBytes;
  bool operator==(const StageCosts&) const = default;
};

struct PlanStage {
  int firstLayer = 0;  ///< Layers [firstLayer, endLayer).
  int endLayer = 0;
  std::array<std::int64_t, 2> submesh{1, 1};      ///< (n nodes, m devices per node)
  std::array<std::int64_t, 2> logicalMesh{1, 1};  ///< (a, b), a·b = n·m
  std::vector<int> devices;                       ///< Physical device ids, in logical-mesh order.
  std::vector<OpStrategy> strategies;
  double latency = 0;          ///< Seconds of one microbatch's forward + backward.
  double peakMemoryBytes = 0;  ///< On each of the stage's devices.
  StageCosts costs;
  bool operator==(const PlanStage&) const = default;
};

struct Plan;

/// A whole plan the planner weighed, and its estimated step time (seconds).
struct PlanAlternative {
  std::string description;
  double stepTime = 0;
  /// The plan itself, placed and priced as the chosen one (absent in plans
  /// built by hand); its own alternatives are empty.
  std::shared_ptr<const Plan> plan;
  bool operator==(const PlanAlternative& other) const;
};

/// What the exports need to know about the model the plan trains, read from
/// its forward graph (passes/PlanFacts.h); 0 where the graph does not say.
struct ModelFacts {
  std::int64_t blocks = 0;      ///< Attention layers (transformer blocks).
  std::int64_t hidden = 0;      ///< Model dimension entering attention.
  std::int64_t heads = 0;       ///< Attention heads.
  std::int64_t sequence = 0;    ///< Tokens per sample (sequence length).
  std::string precision = "fp32";  ///< "fp32", "fp16" or "bf16": the parameters' dtype.
  bool operator==(const ModelFacts&) const = default;
};

struct Plan {
  std::vector<PlanStage> stages;
  int microbatches = 1;
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int chunks = 1;                ///< Virtual stages (model chunks) per pipeline rank.
  std::int64_t globalBatch = 1;  ///< Samples per step.
  double stepTime = 0;           ///< Seconds per step, estimated.
  /// Seconds per step as the planner simulated it when it chose by
  /// simulation; 0 when it did not simulate this plan.
  double simulatedStepTime = 0;
  double samplesPerSecond = 0;
  double tflopsPerDevice = 0;
  double mfu = 0;  ///< Model FLOP utilisation, 0..1.
  /// The same with the recomputed forward work counted (hardware FLOP utilisation).
  double mfuWithRecompute = 0;
  /// How the planner names it, e.g. "1f1b, 8 microbatches of 8, 2 stages: 2x (1, 4) as (1, 4)".
  std::string description;
  ModelFacts model;
  std::vector<PlanAlternative> alternatives;
  /// Caveats, e.g. "intra-op sharding of stage 2 not proven optimal".
  std::vector<std::string> notes;

  /// The largest peak memory of any device.
  double peakMemoryBytes() const;
  /// Pipeline ranks: stages.size() / chunks.
  int pipelineRanks() const;
  /// Tokens per second (samples/s × model.sequence); samples/s when the
  /// sequence length is not known.
  double tokensPerSecond() const;
  bool operator==(const Plan&) const = default;
};

/// A malformed plan JSON; the message names the path (`stages[1].submesh: ...`).
class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

nlohmann::json planToJson(const Plan& plan);
/// Parses planToJson's form back; throws PlanError naming the offending path.
Plan planFromJson(const nlohmann::json& json);

/// The text `print(p)` shows: a summary line, one row per stage, the alternatives.
std::string planTable(const Plan& plan);


/// A duration for people: "138 ms", "45 min", "3.2 h", "12.4 days".
std::string durationText(double seconds);

/// A rate for people, four significant digits: "812", "47.66k", "1.25M".
std::string rateText(double perSecond);

/// Ascending device ids as runs of consecutive ids joined by `separator`:
/// "0-7", "0-3,8-11" (separator ","), "" for none.
std::string idRanges(const std::vector<int>& ids, std::string_view separator);

/// The result of an export: the text, or why the plan cannot be expressed and
/// the nearest plan that can be.
struct PlanExport {
  std::string text;
  std::string whyNot;  ///< Empty when `text` is the export.
  /// When whyNot is set: what the nearest expressible plan changes and its
  /// export ("the same stages under 1f1b: --tensor-model-parallel-size ..."),
  /// or empty when there is none.
  std::string nearest;
  bool ok() const { return whyNot.empty(); }
};

/// For the nearest plans of the exports: every stage takes as many layers as
/// stage 0 from its own first layer. False (stages unchanged) where a stage
/// would end past the layers a plan can number (a hand-edited file's).
bool spanLayersLikeFirstStage(std::vector<PlanStage>& stages);

/// Megatron-LM flags, for a uniform plan only: every stage with the same logical
/// mesh, the same number of layers and the same parallelism, on a 1f1b or
/// interleaved schedule. The tensor- and data-parallel sizes come from what the
/// strategies do on each mesh axis (ir/PlanAxes.h); Megatron's tensor group is
/// consecutive devices, mesh dimension 1. With the model's facts known:
/// --num-layers, --hidden-size, --num-attention-heads, --seq-length; and
/// --sequence-parallel, --recompute-*, --use-distributed-optimizer, --fp16 or
/// --bf16 where they apply.
PlanExport megatronFlags(const Plan& plan);

/// A DeepSpeed config (JSON text): train_batch_size, micro batch per GPU,
/// gradient accumulation, zero_optimization's stage, fp16/bf16, and the
/// pipeline's stages and partition. DeepSpeed's config has no tensor
/// parallelism, selective recomputation or unequal layer split.
PlanExport deepspeedConfig(const Plan& plan);

/// PyTorch's pipelining (torch.distributed.pipelining): the split points by
/// layer scope, the microbatches and the schedule class, as Python.
PlanExport pytorchPipeline(const Plan& plan);

/// One spec of one op's tensor, in some notation.
struct SpecRow {
  int stage = 0;
  OpId op = 0;
  std::string kind;
  std::string scope;
  int output = 0;
  std::string spec;
  std::string note;  ///< e.g. a partial sum JAX cannot express
  bool operator==(const SpecRow&) const = default;
};

/// A spec as a JAX PartitionSpec: mesh dimension 0 is the axis 'data', dimension
/// 1 the axis 'model'; `S0R` → "PartitionSpec('data', None)", `S01R` →
/// "PartitionSpec(('data', 'model'), None)". The partial-sum state is dropped.
std::string jaxPartitionSpec(const ShardingSpec& spec);
/// jaxPartitionSpec of every op output of the plan, stage by stage.
std::vector<SpecRow> jaxPartitionSpecs(const Plan& plan);
/// Alpa's S0/S1/R notation of every op output (ShardingSpec's canonical string).
std::vector<SpecRow> alpaSpecs(const Plan& plan);

}  // namespace meshflow::ir
