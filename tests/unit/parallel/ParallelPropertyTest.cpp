// The project's central property (DESIGN.md, "The runtime contract"): for random
// small models × random valid plans, training steps on the cpu backend give the
// serial reference's losses, weights and optimizer state within fp32 tolerance.
#include "ParallelModels.h"

#include "passes/schedules/Schedules.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

const char* kModels = R"(
model deep_mlp(depth = 3, width = 8, classes = 5) {
  let x = input("x", f32[batch, 6])
  let labels = input("labels", i32[batch])
  var h = gelu(linear(x, width, name = "in"))
  for i in 0..depth { h = h + relu(linear(h, width, name = "fc" + str(i))) }
  return cross_entropy(linear(h, classes, name = "out"), labels)
}
model dropout_mlp(depth = 2, width = 8, p = 0.25) {
  let x = input("x", f32[batch, 6])
  let labels = input("labels", i32[batch])
  var h = dropout(gelu(linear(x, width, name = "in")), p)
  for i in 0..depth { h = h + dropout(relu(linear(h, width, name = "fc" + str(i))), p) }
  return cross_entropy(linear(h, 3, name = "out"), labels)
}
)";

struct ModelCase {
  const char* name;
  std::string expression;
};

// Small members of each family; sizes vary so stage cuts land in different places.
std::vector<ModelCase> models() {
  return {
      {"mlp", "deep_mlp(depth = 2, width = 8)"},
      {"mlp", "deep_mlp(depth = 4, width = 6, classes = 3)"},
      {"dropout", "dropout_mlp(depth = 2, width = 8)"},
      {"gpt", "gpt(layers = 2, hidden = 16, heads = 2, seq = 4, vocab = 24)"},
      {"gpt", "gpt(layers = 3, hidden = 8, heads = 2, seq = 3, vocab = 16)"},
      // Four experts, so tensor-parallel groups of 2 and 4 may draw expert
      // parallelism; capacity factor 1 gives each expert 2 slots per sequence
      // for 8 choices, so choices drop and the drops must match the serial run.
      {"moe",
       "moe_gpt(layers = 2, hidden = 8, heads = 2, experts = 4, k = 2, seq = 4, vocab = 16, "
       "capacity_factor = 1)"},
  };
}

struct RandomPlan {
  runtime::ParallelPlan plan;
  std::int64_t batch = 1;
  std::string text;
};

// A valid random plan: schedule, ranks, chunks, replicas, microbatches, stage cuts
// (anywhere between compute ops), device numbering.
// `replicas` 0 draws 1 or 2.
RandomPlan randomPlan(const ir::Graph& forward, std::mt19937& rng, int tensorParallel = 1, int replicaCount = 0) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  static const char* kSchedules[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "zbv"};
  RandomPlan r;
  std::string schedule = kSchedules[pick(0, 4)];
  int ranks = pick(1, 3);
  int chunks = schedule == "interleaved" || schedule == "zbv" ? 2 : 1;
  if (schedule == "interleaved" && ranks == 1) ranks = 2;
  int replicas = replicaCount > 0 ? replicaCount : pick(1, 2);
  int microbatches = pick(1, 4);
  if (schedule == "interleaved") microbatches = ranks * pick(1, 2);
  std::int64_t perShare = pick(1, 2);
  r.batch = perShare * microbatches * replicas;

  int stages = ranks * chunks;
  std::size_t ops = computeOps(forward).size();
  std::vector<std::size_t> cuts;
  while (static_cast<int>(cuts.size()) < stages - 1) {
    std::size_t cut = std::uniform_int_distribution<std::size_t>(1, ops - 1)(rng);
    if (std::find(cuts.begin(), cuts.end(), cut) == cuts.end()) cuts.push_back(cut);
  }
  std::sort(cuts.begin(), cuts.end());
  const int t = tensorParallel;
  std::vector<int> devices(static_cast<std::size_t>(ranks * replicas * t));
  for (std::size_t i = 0; i < devices.size(); ++i) devices[i] = static_cast<int>(i);
  std::shuffle(devices.begin(), devices.end(), rng);

  r.plan.virtualStages = stages;
  r.plan.stageOfForwardOp = stagesAt(forward, cuts);
  r.plan.schedule = schedule;
  r.plan.microbatches = microbatches;
  r.plan.rankDevices.assign(static_cast<std::size_t>(ranks), {});
  for (int rank = 0; rank < ranks; ++rank)
    for (int k = 0; k < replicas * t; ++k)
      r.plan.rankDevices[static_cast<std::size_t>(rank)].push_back(devices[static_cast<std::size_t>(k * ranks + rank)]);
  r.plan.rankMeshes.assign(static_cast<std::size_t>(ranks), {1, t});
  if (t > 1) r.plan.strategies = randomStrategies(forward, perShare, {1, t}, rng);
  r.text = fmt::format("{} ranks={} chunks={} replicas={} tp={} microbatches={} batch={} cuts=[{}]", schedule,
                       ranks, chunks, replicas, t, microbatches, r.batch, fmt::join(cuts, ","));
  return r;
}

// Recomputation drawn per virtual stage: none, selective or full, with layers
// (where a recomputing stage checkpoints) at 0-4 random cuts of their own,
// which need not follow the stages'.
void drawRecompute(RandomPlan& r, const ir::Graph& forward, std::mt19937& rng) {
  const std::size_t ops = computeOps(forward).size();
  std::vector<std::size_t> cuts;
  for (int i = static_cast<int>(rng() % 5); i > 0; --i) cuts.push_back(1 + rng() % (ops - 1));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  r.plan.layerOfForwardOp = stagesAt(forward, cuts);
  r.text += fmt::format(" layers=[{}]", fmt::join(cuts, ","));
  r.plan.recompute.clear();
  std::string modes;
  for (int vs = 0; vs < r.plan.virtualStages; ++vs) {
    auto mode = static_cast<passes::Recompute>(rng() % 3);
    r.plan.recompute.push_back(mode);
    modes += fmt::format("{}{}", vs ? "," : "", passes::recomputeName(mode));
  }
  r.text += " recompute=[" + modes + "]";
}

// The strategies of a plan whose rank r runs SPMD on meshes[r]: each forward
// op's drawn on its rank's mesh (a leaf's on its first reader's).
std::map<ir::OpId, runtime::PlannedSpecs> strategiesPerRank(const ir::Graph& forward, const runtime::ParallelPlan& plan,
                                                             std::int64_t microbatch, std::mt19937& rng) {
  const int ranks = static_cast<int>(plan.rankDevices.size());
  const int chunks = plan.virtualStages / ranks;
  ir::PipelineSchedule layout =
      passes::buildSchedule({plan.schedule, ranks, plan.microbatches, chunks, plan.groupSize});
  std::vector<int> rankOfStage(static_cast<std::size_t>(plan.virtualStages));
  for (int r = 0; r < ranks; ++r)
    for (int c = 0; c < chunks; ++c) rankOfStage[static_cast<std::size_t>(layout.virtualStage(r, c))] = r;
  auto consumers = forward.consumers();
  auto stageOf = [&](ir::OpId id) {
    ir::OpKind kind = forward.op(id).kind;
    if (kind == ir::OpKind::Input || kind == ir::OpKind::Parameter) {
      const auto& readers = consumers.at(forward.op(id).outputs.at(0));
      if (!readers.empty()) id = *std::min_element(readers.begin(), readers.end());
    }
    return plan.stageOfForwardOp.at(id);
  };
  std::map<ir::OpId, runtime::PlannedSpecs> planned;
  for (int r = 0; r < ranks; ++r) {
    auto all = randomStrategies(forward, microbatch, plan.meshOf(r), rng);
    for (auto& [id, specs] : all)
      if (rankOfStage[static_cast<std::size_t>(stageOf(id))] == r) planned[id] = std::move(specs);
  }
  return planned;
}

// A random plan whose ranks run SPMD on meshes of their own shape, each rank
// one replica: values crossing between meshes of different sizes travel in
// tiles, and dimension-0 strategies other than the batch split are honoured.
RandomPlan unequalMeshPlan(const ir::Graph& forward, std::mt19937& rng) {
  static const std::array<std::int64_t, 2> kMeshes[] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {1, 3}, {3, 1}};
  RandomPlan r = randomPlan(forward, rng);
  const int ranks = static_cast<int>(r.plan.rankDevices.size());
  r.plan.rankMeshes.clear();
  r.plan.rankDevices.assign(static_cast<std::size_t>(ranks), {});
  int next = 0;
  std::string meshes;
  for (int rank = 0; rank < ranks; ++rank) {
    auto mesh = kMeshes[rng() % std::size(kMeshes)];
    r.plan.rankMeshes.push_back(mesh);
    for (std::int64_t k = 0; k < mesh[0] * mesh[1]; ++k) r.plan.rankDevices[static_cast<std::size_t>(rank)].push_back(next++);
    meshes += fmt::format(" ({}, {})", mesh[0], mesh[1]);
  }
  std::int64_t microbatch = r.batch / r.plan.replicas() / r.plan.microbatches;
  r.batch = microbatch * r.plan.microbatches;  // one replica per rank
  r.plan.strategies = strategiesPerRank(forward, r.plan, microbatch, rng);
  r.text += " meshes" + meshes + fmt::format(" batch={}", r.batch);
  return r;
}

}  // namespace

TEST_CASE("random models x random plans equal the serial reference", "[parallel][property]") {
  std::mt19937 rng(20261122);
  int cases = 0;
  for (const ModelCase& model : models()) {
    ir::Graph forward = traceModel(kModels, model.expression);
    for (bool adam : {true, false}) {
      passes::OptimizerConfig optimizer = adam ? passes::OptimizerConfig::adam() : passes::OptimizerConfig::sgd();
      if (!adam) optimizer.momentum = 0.9;
      passes::OptimizerConfig clipped = optimizer;
      clipped.clipNorm = 0.05;  // small enough that it always clips
      auto training = passes::buildTrainingGraph(forward, optimizer);
      auto trainingClipped = passes::buildTrainingGraph(forward, clipped);
      for (int trial = 0; trial < 24; ++trial) {
        bool clip = trial % 3 == 2;
        RandomPlan r = randomPlan(forward, rng);
        auto seed = static_cast<std::uint64_t>(trial);
        INFO(model.expression << (adam ? " adam " : " sgd ") << (clip ? "clip_norm 0.05 " : "") << r.text
                              << " seed " << seed);
        runtime::ParallelOptions options = optionsFor(r.batch);
        options.bucketBytes = std::int64_t{1} << std::uniform_int_distribution<int>(6, 20)(rng);
        const auto& graph = clip ? trainingClipped : training;
        auto serial = runSerial(graph, r.batch, 2, seed);
        auto parallel = runParallel(graph, r.plan, options, 2, seed);
        requireSameRun(parallel, serial);
        ++cases;
      }
    }
  }
  CHECK(cases == 288);
}

namespace {

// `trials` plans per model from `draw(forward, trial)`, trained with Adam (every
// fourth with clipping) and compared with the serial reference; `inspect` sees
// each plan and training graph first. Returns the number of cases.
template <class Draw, class Inspect>
int compareAdamPlans(Draw draw, Inspect inspect, int trials = 12) {
  int cases = 0;
  for (const ModelCase& model : models()) {
    ir::Graph forward = traceModel(kModels, model.expression);
    passes::OptimizerConfig optimizer = passes::OptimizerConfig::adam();
    passes::OptimizerConfig clipped = optimizer;
    clipped.clipNorm = 0.05;
    auto training = passes::buildTrainingGraph(forward, optimizer);
    auto trainingClipped = passes::buildTrainingGraph(forward, clipped);
    for (int trial = 0; trial < trials; ++trial) {
      bool clip = trial % 4 == 3;
      RandomPlan r = draw(forward, trial);
      auto seed = static_cast<std::uint64_t>(trial);
      INFO(model.expression << (clip ? " clip_norm 0.05 " : " ") << r.text << " seed " << seed);
      const auto& graph = clip ? trainingClipped : training;
      inspect(graph, r);
      requireSameRun(runParallel(graph, r.plan, optionsFor(r.batch), 2, seed), runSerial(graph, r.batch, 2, seed));
      ++cases;
    }
  }
  return cases;
}

}  // namespace

TEST_CASE("random plans with tensor parallelism equal the serial reference", "[parallel][property][spmd]") {
  // Each stage's ops run SPMD on (1, t) tensor-parallel groups with random
  // strategies, inside pipelines and data-parallel replicas.
  std::mt19937 rng(4242);
  int expertParallel = 0;  // moe ops drawn with tokens split over the batch, slots over the experts
  int cases = compareAdamPlans(
      [&](const ir::Graph& forward, int trial) {
        return randomPlan(forward, rng, trial % 3 == 2 ? 4 : 2);
      },
      [&](const passes::TrainingGraph& graph, const RandomPlan& r) {
        for (const auto& [id, specs] : r.plan.strategies) {
          ir::OpKind kind = graph.graph.op(id).kind;
          bool moe = kind == ir::OpKind::MoeDispatch || kind == ir::OpKind::MoeCombine;
          if (moe && specs.inputs.at(1).dim(0) != ir::MeshAxes::kNone &&
              (kind == ir::OpKind::MoeDispatch ? specs.outputs : specs.inputs).at(0).dim(0) !=
                  ir::MeshAxes::kNone)
            ++expertParallel;
        }
      });
  CHECK(cases == 72);
  CHECK(expertParallel > 0);
}

TEST_CASE("random plans on unequal meshes equal the serial reference", "[parallel][property][spmd]") {
  // Every rank one replica on its own (a, b) mesh, strategies along both mesh
  // dimensions; carries and gradients cross between meshes of other sizes in
  // tiles that the receivers all-gather.
  std::mt19937 rng(20261123);
  int tiled = 0;
  int cases = compareAdamPlans([&](const ir::Graph& forward, int) { return unequalMeshPlan(forward, rng); },
                               [&](const passes::TrainingGraph& graph, const RandomPlan& r) {
                                 runtime::ParallelTrainer probe(graph, r.plan, optionsFor(r.batch));
                                 for (const ir::DeviceCode& code : probe.program().devices)
                                   for (const ir::Instruction& in : code.code)
                                     tiled += in.op == ir::Opcode::kAllGather ? 1 : 0;
                               });
  CHECK(cases == 72);
  CHECK(tiled > 0);
}


TEST_CASE("random plans with recomputation equal the serial reference", "[parallel][property][recompute]") {
  // Each virtual stage recomputes none, selective or full, on every schedule,
  // with replicas, tensor parallelism and unequal meshes. Recomputation reruns
  // the same kernels on the same operands, so the run is also bit-identical to
  // the same plan without it.
  std::mt19937 rng(20261126);
  int rebuilt = 0;
  int cases = compareAdamPlans(
      [&](const ir::Graph& forward, int trial) {
        RandomPlan r = trial % 5 == 4 ? unequalMeshPlan(forward, rng) : randomPlan(forward, rng, 1 + trial % 3 / 2);
        drawRecompute(r, forward, rng);
        return r;
      },
      [&](const passes::TrainingGraph& graph, const RandomPlan& r) {
        runtime::ParallelTrainer probe(graph, r.plan, optionsFor(r.batch));
        for (const ir::DeviceCode& code : probe.program().devices)
          for (const ir::Instruction& in : code.code)
            rebuilt += in.op == ir::Opcode::kRun && in.action == ir::ActionKind::kRecompute ? 1 : 0;
        runtime::ParallelPlan plain = r.plan;
        plain.recompute.clear();
        auto with = runParallel(graph, r.plan, optionsFor(r.batch), 2, 7);
        auto without = runParallel(graph, plain, optionsFor(r.batch), 2, 7);
        for (std::size_t i = 0; i < with.losses.size(); ++i) REQUIRE(with.losses[i] == without.losses[i]);
        for (const auto& [name, tensor] : without.state) {
          INFO(name);
          REQUIRE(with.state.at(name).bitEqual(tensor));
        }
      },
      30);
  CHECK(cases == 180);
  CHECK(rebuilt > 0);
}

namespace {

const char* kHalfModels = R"(
model half_mlp(depth = 2, width = 8, classes = 5, dtype = bf16) {
  let x = input("x", dtype[batch, 6])
  let labels = input("labels", i32[batch])
  var h = gelu(linear(x, width, name = "in"))
  for i in 0..depth { h = h + tanh(linear(h, width, name = "fc" + str(i))) }
  return cross_entropy(linear(layer_norm(h), classes, name = "out"), labels)
}
)";

// Half-precision runs agree with the serial reference within the half type's
// rounding: a plan rounds partial results to it where the serial reference
// rounds once (a tensor-parallel matmul's partial sums, the all-reduce adding
// them, microbatch slices of a reduction), a few units in the last place —
// in smooth models: where a ReLU's input lies within that rounding of 0, the
// two runs take different branches and the next step's gradients differ by
// the whole branch, so these models use tanh and GeLU, not ReLU —
// 2^-8 relative for bf16, 2^-11 for f16 — compounded over a few layers and two
// steps. The backward's cancellations (layer norm subtracts means, residual
// branches add) turn that rounding into errors relative to a tensor's largest
// elements, not to each element, so state is compared at rtol of its largest
// magnitude. The fp32 master weights move by up to 2·lr a step more where a
// near-zero gradient's rounding flips Adam's step.
double largestMagnitude(const runtime::Tensor& t) {
  runtime::Tensor wide = t.toF32();
  double largest = 0;
  for (float v : wide.f32()) largest = std::max(largest, double(std::abs(v)));
  return largest;
}

void requireCloseHalfRun(const RunResult& parallel, const RunResult& serial, ir::DType dtype) {
  const double rtol = dtype == ir::DType::BF16 ? 3e-2 : 5e-3;
  const double adamStep = 2e-3 * static_cast<double>(serial.losses.size());
  REQUIRE(parallel.losses.size() == serial.losses.size());
  for (std::size_t i = 0; i < serial.losses.size(); ++i) {
    INFO("step " << i + 1);
    REQUIRE(parallel.losses[i] == Approx(serial.losses[i]).epsilon(rtol));
  }
  REQUIRE(parallel.state.size() == serial.state.size());
  for (const auto& [name, tensor] : serial.state) {
    const runtime::Tensor& mine = parallel.state.at(name);
    const double scale = largestMagnitude(tensor);
    INFO(name << ": max |diff| " << runtime::maxAbsDiff(mine, tensor) << " of values up to " << scale);
    REQUIRE(mine.dtype() == tensor.dtype());
    REQUIRE(runtime::maxAbsDiff(mine, tensor) <= adamStep + rtol * scale);
  }
}

}  // namespace

TEST_CASE("random half-precision models x random plans equal the serial reference",
          "[parallel][property][half]") {
  // bf16 and f16 models (an MLP and a GPT) on random schedules, stage cuts,
  // replicas, tensor-parallel groups and unequal meshes; f16 with dynamic loss
  // scaling, whose norm and loss scale travel in the clip's all-reduce.
  std::mt19937 rng(20261127);
  int cases = 0, halfParameters = 0;
  const std::vector<std::string> shapes = {"half_mlp(depth = 2, width = 8, dtype = ",
                                           "gpt(layers = 2, hidden = 16, heads = 2, seq = 4, vocab = 24, dtype = "};
  for (ir::DType dtype : {ir::DType::BF16, ir::DType::F16}) {
    for (const std::string& shape : shapes) {
      std::string expression = shape + ir::dtypeName(dtype) + ")";
      ir::Graph forward = traceModel(kHalfModels, expression);
      for (ir::ValueId p : forward.parameters()) halfParameters += forward.value(p).type.dtype == dtype ? 1 : 0;
      passes::OptimizerConfig optimizer = passes::OptimizerConfig::adam();
      if (dtype == ir::DType::F16) optimizer.lossScale = 1024;
      auto training = passes::buildTrainingGraph(forward, optimizer);
      for (int trial = 0; trial < 16; ++trial) {
        RandomPlan r = trial % 8 == 5 ? unequalMeshPlan(forward, rng) : randomPlan(forward, rng, trial % 4 == 3 ? 2 : 1);
        auto seed = static_cast<std::uint64_t>(trial);
        INFO(expression << " " << r.text << " seed " << seed);
        auto serial = runSerial(training, r.batch, 2, seed);
        auto parallel = runParallel(training, r.plan, optionsFor(r.batch), 2, seed);
        requireCloseHalfRun(parallel, serial, dtype);
        ++cases;
      }
    }
  }
  CHECK(cases == 64);
  CHECK(halfParameters > 0);
}

TEST_CASE("f16 plans skip the overflowed steps the serial reference skips", "[parallel][property][half]") {
  // A loss scale far past f16's range: the first steps overflow and are
  // skipped, halving the scale until the gradients fit. A pipeline with one
  // microbatch and one replica computes the reference's half-precision
  // gradients over the same samples, so it overflows on the same steps and
  // ends with the same scale and skip count. (With several microbatches or
  // replicas a weight gradient is summed in f16 over fewer samples, which may
  // overflow where the whole batch's sum cancels, or not where it does.)
  std::mt19937 rng(20261128);
  ir::Graph forward = traceModel(kHalfModels, "half_mlp(depth = 2, width = 8, dtype = f16)");
  passes::OptimizerConfig optimizer = passes::OptimizerConfig::adam();
  optimizer.lossScale = 1 << 22;
  optimizer.lossScaleWindow = 2;
  auto training = passes::buildTrainingGraph(forward, optimizer);
  int cases = 0;
  double skipped = 0;
  while (cases < 12) {
    RandomPlan r = randomPlan(forward, rng);
    if (r.plan.microbatches != 1 || r.plan.replicas() != 1) continue;
    INFO(r.text);
    auto serial = runSerial(training, r.batch, 6, 1);
    auto parallel = runParallel(training, r.plan, optionsFor(r.batch), 6, 1);
    const auto& counts = serial.state.at("loss_scale.counts");
    REQUIRE(parallel.state.at("loss_scale.counts").bitEqual(counts));
    REQUIRE(parallel.state.at("loss_scale").bitEqual(serial.state.at("loss_scale")));
    requireCloseHalfRun(parallel, serial, ir::DType::F16);
    skipped += counts.f32()[1];
    ++cases;
  }
  CHECK(skipped >= cases);  // every case skipped at least one step
}

TEST_CASE("random plans with a sharded optimizer equal the serial reference", "[parallel][property][zero]") {
  // Ranks shard their optimizer state over 2 or 3 replicas (ZeRO-like: each
  // gradient bucket reduce-scattered, each replica updating its flat shard, the
  // parameters all-gathered), on every schedule, with Adam and SGD with
  // momentum, with clipping, with tensor-parallel groups, and now and then
  // with one rank unsharded. The communicator sums in group order either way,
  // so without clipping (whose norm adds the shards' squares in another
  // order) and tensor parallelism (which reduces partial sums earlier) the run
  // is also bit-identical to the same plan unsharded.
  std::mt19937 rng(20261127);
  int cases = 0, scattered = 0, identical = 0;
  for (const ModelCase& model : models()) {
    ir::Graph forward = traceModel(kModels, model.expression);
    for (int trial = 0; trial < 12; ++trial) {
      passes::OptimizerConfig optimizer = trial % 2 ? passes::OptimizerConfig::adam() : passes::OptimizerConfig::sgd();
      if (trial % 2 == 0) optimizer.momentum = 0.9;
      const bool clip = trial % 4 == 3;
      if (clip) optimizer.clipNorm = 0.05;
      const int tensorParallel = trial % 3 == 2 ? 2 : 1;
      auto training = passes::buildTrainingGraph(forward, optimizer);
      RandomPlan r = randomPlan(forward, rng, tensorParallel, 2 + static_cast<int>(rng() % 2));
      r.plan.shardOptimizer.assign(r.plan.rankDevices.size(), true);
      // Rank 0 unsharded now and then, once with clipping: the norm then adds
      // whole gradients (counted by replica 0 alone) and shards together.
      if (trial % 5 == 4 || trial == 7) r.plan.shardOptimizer[0] = false;
      auto seed = static_cast<std::uint64_t>(trial);
      INFO(model.expression << (clip ? " clip_norm 0.05 " : " ") << (trial % 2 ? "adam " : "sgd ") << r.text
                            << " shard_optimizer rank 0 " << r.plan.shardOptimizer[0] << " seed " << seed);
      runtime::ParallelOptions options = optionsFor(r.batch);
      options.bucketBytes = std::int64_t{1} << std::uniform_int_distribution<int>(6, 20)(rng);
      runtime::ParallelTrainer probe(training, r.plan, options);
      for (const ir::DeviceCode& code : probe.program().devices)
        for (const ir::Instruction& in : code.code) scattered += in.op == ir::Opcode::kReduceScatter ? 1 : 0;
      auto sharded = runParallel(training, r.plan, options, 2, seed);
      requireSameRun(sharded, runSerial(training, r.batch, 2, seed));
      if (!clip && tensorParallel == 1) {
        runtime::ParallelPlan plain = r.plan;
        plain.shardOptimizer.clear();
        auto unsharded = runParallel(training, plain, options, 2, seed);
        for (std::size_t i = 0; i < unsharded.losses.size(); ++i) REQUIRE(sharded.losses[i] == unsharded.losses[i]);
        for (const auto& [name, tensor] : unsharded.state) {
          INFO(name);
          REQUIRE(sharded.state.at(name).bitEqual(tensor));
        }
        ++identical;
      }
      ++cases;
    }
  }
  CHECK(cases == 72);
  CHECK(scattered > 0);
  CHECK(identical > 20);
}
