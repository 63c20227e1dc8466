// SPMD execution of whole training steps on one logical mesh: for random
// strategies of every forward op (drawn from the planner's strategy families,
// so Megatron's column/row splits, data parallelism and the mixed 2-D ones all
// occur), every device running every op on its boxes gives the serial
// reference's losses, weights and optimizer state.
#include <numeric>

#include "CountingCommunicator.h"
#include "ParallelModels.h"
#include "runtime/cpu/LocalCluster.h"
#include "runtime/parallel/SpmdRunner.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

const char* kMlp = R"(
model wide_mlp(width = 8, classes = 4) {
  let x = input("x", f32[batch, 8])
  let labels = input("labels", i32[batch])
  var h = gelu(linear(x, width, name = "fc1"))
  h = h + relu(linear(h, width, name = "fc2"))
  return cross_entropy(linear(h, classes, name = "out"), labels)
}
)";

// Each parameter and optimizer state tensor of `whole` as `place` holds it.
runtime::TensorMap boxesOf(const ir::Graph& graph, const runtime::SpmdRunner& runner, const runtime::TensorMap& whole,
                           const runtime::MeshPlace& place) {
  runtime::TensorMap boxes;
  for (ir::ValueId v = 0; v < graph.valueCount(); ++v)
    if (graph.op(graph.value(v).producer).kind == ir::OpKind::Parameter) {
      std::string name = runtime::bindingName(graph, v);
      boxes[name] = runtime::takeShard(whole.at(name), runner.heldSpec(v), place);
    }
  return boxes;
}

// `steps` training steps with every device of an a × b mesh running the whole
// training graph SPMD; the state is kept whole between steps and handed to
// each device as its boxes.
RunResult runSpmd(const passes::TrainingGraph& training, std::array<std::int64_t, 2> meshShape,
                  const std::map<ir::OpId, runtime::PlannedSpecs>& planned, std::int64_t batch,
                  int steps, std::uint64_t seed, CollectiveCounts* counts = nullptr,
                  runtime::ShardedValues* lastValues = nullptr) {
  const int n = int(meshShape[0] * meshShape[1]);
  RunResult r;
  runtime::initializeParameters(training.graph, seed, r.state);
  runtime::SpmdRunner runner(training.graph, batch, meshShape, planned);
  std::vector<ir::OpId> ops(training.graph.ops().size());
  std::iota(ops.begin(), ops.end(), ir::OpId{0});
  auto data = runtime::syntheticData(seed);
  std::vector<int> devices(static_cast<std::size_t>(n));
  std::iota(devices.rbegin(), devices.rend(), 0);  // mesh order is not id order
  runtime::cpu::LocalCluster cluster({n});
  for (int step = 1; step <= steps; ++step) {
    runtime::TensorMap inputs = data->batch(training.graph, batch, step - 1);
    std::vector<runtime::TensorMap> next(static_cast<std::size_t>(n));
    std::vector<double> losses(static_cast<std::size_t>(n)), dropped(static_cast<std::size_t>(n));
    cluster.run([&](int device) {
      runtime::MeshPlace place;
      place.shape = meshShape;
      place.devices = devices;
      place.index = int(std::find(devices.begin(), devices.end(), device) - devices.begin());
      runtime::ShardedValues values;
      CollectiveCounts ignored;
      CountingCommunicator comm(cluster.communicator(device), counts ? *counts : ignored);
      runner.run(ops, values, boxesOf(training.graph, runner, r.state, place), inputs, step, place, comm,
                 nullptr, 0, &dropped[std::size_t(device)]);
      losses[std::size_t(device)] = runner.whole(training.graph.outputs[0], values, place, comm).item();
      if (lastValues && place.index == 0) *lastValues = values;
      for (const passes::WriteBack& w : training.writeBacks)
        next[std::size_t(device)][runtime::bindingName(training.graph, w.target)] =
            runner.whole(w.updated, values, place, comm);
    });
    for (int d = 1; d < n; ++d) {
      REQUIRE(losses[std::size_t(d)] == losses[0]);  // every device holds the same loss
      for (const auto& [name, t] : next[0]) REQUIRE(next[std::size_t(d)].at(name).bitEqual(t));
    }
    r.losses.push_back(losses[0]);
    r.moeDropped.push_back(std::accumulate(dropped.begin(), dropped.end(), 0.0));  // counted once per mesh
    for (auto& [name, t] : next[0]) r.state[name] = t;
  }
  return r;
}

}  // namespace

TEST_CASE("SPMD steps on a logical mesh equal the serial reference", "[parallel][spmd]") {
  const std::vector<std::string> models = {"wide_mlp(width = 8)", "wide_mlp(width = 12, classes = 6)",
                                           "gpt(layers = 1, hidden = 8, heads = 2, seq = 4, vocab = 12)"};
  const std::array<std::int64_t, 2> meshes[] = {{1, 2}, {2, 1}, {2, 2}, {1, 4}};
  std::mt19937 rng(11);
  int cases = 0, sharded = 0;
  for (const std::string& model : models) {
    ir::Graph forward = traceModel(kMlp, model);
    for (bool adam : {true, false}) {
      auto training = passes::buildTrainingGraph(
          forward, adam ? passes::OptimizerConfig::adam(1e-2) : passes::OptimizerConfig::sgd(0.1, 0.9));
      for (auto mesh : meshes)
        for (int draw = 0; draw < 3; ++draw) {
          const std::int64_t batch = 4;
          auto planned = randomStrategies(forward, batch, mesh, rng, &sharded);
          std::uint64_t seed = rng();
          INFO(model << (adam ? " adam" : " sgd") << " on (" << mesh[0] << ", " << mesh[1] << "), draw " << draw);
          requireSameRun(runSpmd(training, mesh, planned, batch, 2, seed), runSerial(training, batch, 2, seed));
          ++cases;
        }
    }
  }
  CHECK(cases == 72);
  CHECK(sharded > 200);  // the draws shard most ops, not only the replicated fallback
}

namespace {

// Random strategies, but every moe dispatch and combine takes an
// expert-parallel one (tokens split over the batch, slots over the experts).
std::map<ir::OpId, runtime::PlannedSpecs> expertParallelStrategies(
    const ir::Graph& forward, std::int64_t batch, std::array<std::int64_t, 2> meshShape,
    std::mt19937& rng) {
  auto planned = randomStrategies(forward, batch, meshShape, rng);
  ir::LogicalMesh mesh;
  mesh.shape = meshShape;
  for (ir::OpId id = 0; id < forward.ops().size(); ++id) {
    ir::OpKind kind = forward.op(id).kind;
    if (kind != ir::OpKind::MoeDispatch && kind != ir::OpKind::MoeCombine) continue;
    passes::OpContext ctx{
        forward, id, batch, mesh, std::vector<bool>(forward.op(id).inputs.size(), true), {}};
    std::vector<passes::Strategy> expert;
    for (passes::Strategy& s : passes::strategiesFor(ctx))
      if (s.name.find("all-to-all") != std::string::npos) expert.push_back(std::move(s));
    REQUIRE(!expert.empty());
    const passes::Strategy& s = expert[rng() % expert.size()];
    planned[id] = {s.inputs, s.outputs};
  }
  return planned;
}

}  // namespace

TEST_CASE("expert-parallel MoE steps exchange slots by all-to-all and equal the serial reference",
          "[parallel][spmd][moe]") {
  // Capacity factor 1 on 4 experts drops choices, so routing and drops must
  // agree between the batch-split groups and the serial run.
  const std::array<std::int64_t, 2> meshes[] = {{1, 2}, {2, 1}, {2, 2}, {1, 4}};
  std::mt19937 rng(15);
  ir::Graph forward = traceModel(kMlp,
                                 "moe_gpt(layers = 2, hidden = 8, heads = 2, experts = 4, k = 2, "
                                 "seq = 4, vocab = 16, capacity_factor = 1)");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam(1e-2));
  int cases = 0;
  for (auto mesh : meshes)
    for (int draw = 0; draw < 3; ++draw) {
      const std::int64_t batch = 4;
      auto planned = expertParallelStrategies(forward, batch, mesh, rng);
      std::uint64_t seed = rng();
      CollectiveCounts counts;
      INFO("(" << mesh[0] << ", " << mesh[1] << "), draw " << draw);
      requireSameRun(runSpmd(training, mesh, planned, batch, 2, seed, &counts),
                     runSerial(training, batch, 2, seed));
      CHECK(counts.allToAll > 0);
      ++cases;
    }
  CHECK(cases == 12);
}

namespace {

// Every forward op data-parallel over mesh dimension 1 where a strategy does
// that (its outputs split along dimension 0 only, parameters replicated),
// replicated otherwise.
std::map<ir::OpId, runtime::PlannedSpecs> batchSplitStrategies(const ir::Graph& forward, std::int64_t batch,
                                                               std::array<std::int64_t, 2> meshShape) {
  ir::LogicalMesh mesh;
  mesh.shape = meshShape;
  auto batchSplit = [](const ir::ShardingSpec& s) {
    for (std::size_t d = 1; d < s.rank(); ++d)
      if (s.dim(d) != ir::MeshAxes::kNone) return false;
    return s.rank() == 0 || s.dim(0) == ir::MeshAxes::k1;
  };
  std::map<ir::OpId, runtime::PlannedSpecs> planned;
  for (ir::OpId id = 0; id < forward.ops().size(); ++id) {
    const ir::Op& op = forward.op(id);
    if (op.kind == ir::OpKind::Constant) continue;
    passes::OpContext ctx{forward, id, batch, mesh, std::vector<bool>(op.inputs.size(), true), {}};
    std::optional<passes::Strategy> chosen;
    for (passes::Strategy& s : passes::strategiesFor(ctx)) {
      const bool parameter = op.kind == ir::OpKind::Parameter;
      bool fits = !s.outputs.empty();
      for (const ir::ShardingSpec& o : s.outputs)
        fits = fits && (parameter ? o.isReplicated() : batchSplit(o) && o.rank() > 0);
      if (fits || (!chosen && std::all_of(s.outputs.begin(), s.outputs.end(),
                                          [](const ir::ShardingSpec& o) { return o.isReplicated(); })))
        chosen = s;
      if (fits) break;
    }
    if (chosen) planned[id] = {chosen->inputs, chosen->outputs};
  }
  return planned;
}

}  // namespace

TEST_CASE("a data-parallel mesh runs its backward on split rows and equals the serial reference",
          "[parallel][spmd]") {
  // Layer norm, softmax, the heads' layout, reshapes and the bias, layer-norm
  // and embedding gradients keep the batch split (SpmdRules.h); cross
  // entropy's gradient runs whole and is cut back to it. Before, each of
  // them gathered its operands and every later backward op ran on the whole
  // batch, holding whole gradients on every device.
  ir::Graph forward = traceModel(kMlp, "gpt(layers = 1, hidden = 8, heads = 2, seq = 4, vocab = 12)");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam(1e-2));
  const std::int64_t batch = 6, rows = batch * 4;  // batch × seq positions (no parameter is as long)
  auto planned = batchSplitStrategies(forward, batch, {1, 2});
  runtime::ShardedValues values;
  requireSameRun(runSpmd(training, {1, 2}, planned, batch, 2, 7, nullptr, &values),
                 runSerial(training, batch, 2, 7));
  int split = 0;
  const ir::Graph& g = training.graph;
  for (const auto& [v, sv] : values) {
    const ir::Op& producer = g.op(g.value(v).producer);
    const runtime::Shape shape = runtime::boundShape(g.value(v).type, batch);
    if (producer.phase != ir::Phase::Backward || shape.size() < 2 || (shape[0] != batch && shape[0] != rows))
      continue;
    INFO("value " << v << " of " << ir::opName(producer.kind) << " held " << sv.spec.toString());
    CHECK(sv.spec.dim(0) == ir::MeshAxes::k1);
    ++split;
  }
  CHECK(split > 20);
}
