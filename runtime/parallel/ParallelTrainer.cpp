#include "runtime/parallel/ParallelTrainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "passes/Lowering.h"
#include "passes/schedules/Schedules.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/LocalCluster.h"
#include "runtime/parallel/FlatShards.h"

namespace meshflow::runtime {
namespace {

std::int64_t valueBytes(const OpRunner& runner, const std::vector<ir::ValueId>& values) {
  std::int64_t bytes = 0;
  for (ir::ValueId v : values) {
    const auto size = static_cast<std::int64_t>(ir::dtypeBytes(runner.graph().value(v).type.dtype));
    bytes += shapeElements(runner.shape(v)) * size;
  }
  return bytes;
}

/// The optimizer-state leaves of `graph`: inputs 3 and 4 of its optimizer
/// ops (an update's m and v), sorted.
std::vector<ir::ValueId> optimizerStateOf(const ir::Graph& graph) {
  std::vector<ir::ValueId> state;
  for (const ir::Op& op : graph.ops())
    if (op.kind == ir::OpKind::SgdUpdate || op.kind == ir::OpKind::AdamUpdate)
      for (std::size_t i = 3; i < op.inputs.size(); ++i) state.push_back(op.inputs[i]);
  std::sort(state.begin(), state.end());
  return state;
}

/// Turns `piece`, whose tensor is replica `replica`'s flat shard (padded) of
/// the block of shape `block`, into a flat checkpoint piece without the
/// padding; false when the shard holds none of the block's elements.
bool flatPiece(ShardPiece& piece, const Shape& block, int replica, int replicas) {
  const std::int64_t n = shapeElements(block);
  const std::int64_t c = flatShardSize(n, replicas);
  const std::int64_t count = std::clamp<std::int64_t>(n - replica * c, 0, c);
  if (count == 0) return false;
  if (count < c) {
    const Tensor& shard = piece.tensor;  // read only: the device's tensor stays shared, uncopied
    Tensor whole = Tensor::uninitialized(shard.dtype(), {count});
    std::copy_n(shard.f32().begin(), count, whole.f32().begin());
    piece.tensor = std::move(whole);
  }
  piece.flat = FlatRange{block, replica * c};
  return true;
}

/// Rows [first, first + count) of `t` along dimension 0.
Tensor rows(const Tensor& t, std::int64_t first, std::int64_t count) {
  Shape shape = t.shape();
  std::int64_t row = t.elements() / shape.at(0);
  shape[0] = count;
  Tensor out(t.dtype(), shape);
  const std::size_t size = ir::dtypeBytes(t.dtype());
  std::size_t bytes = static_cast<std::size_t>(row * count) * size;
  const std::int64_t offset = first * row * static_cast<std::int64_t>(size);
  if (bytes) std::memcpy(out.raw().data(), t.raw().data() + offset, bytes);
  return out;
}

}  // namespace

std::array<std::int64_t, 2> ParallelPlan::meshOf(int rank) const {
  return rankMeshes.empty() ? std::array<std::int64_t, 2>{1, 1} : rankMeshes.at(static_cast<std::size_t>(rank));
}

int ParallelPlan::meshSize(int rank) const {
  auto [a, b] = meshOf(rank);
  return static_cast<int>(a * b);
}

int ParallelPlan::replicas() const { return static_cast<int>(rankDevices.at(0).size()) / meshSize(0); }

bool ParallelPlan::sameMeshes() const {
  for (int r = 1; r < static_cast<int>(rankDevices.size()); ++r)
    if (meshOf(r) != meshOf(0)) return false;
  return true;
}

bool ParallelPlan::shardsOptimizer(int rank) const {
  return rank >= 0 && static_cast<std::size_t>(rank) < shardOptimizer.size() &&
         shardOptimizer[static_cast<std::size_t>(rank)];
}

passes::Recompute ParallelPlan::recomputeOf(int vs) const {
  return vs >= 0 && static_cast<std::size_t>(vs) < recompute.size() ? recompute[static_cast<std::size_t>(vs)]
                                                                     : passes::Recompute::kNone;
}

ParallelTrainer::ParallelTrainer(const passes::TrainingGraph& training, ParallelPlan plan,
                                 ParallelOptions options, std::unique_ptr<DeviceHost> host)
    : training_(training), plan_(std::move(plan)), options_(options), host_(std::move(host)) {
  const int ranks = static_cast<int>(plan_.rankDevices.size());
  if (ranks < 1 || plan_.virtualStages % ranks != 0)
    throw ParallelRunError(fmt::format("{} virtual stages cannot be spread over {} pipeline ranks",
                                       plan_.virtualStages, ranks));
  if (!plan_.rankMeshes.empty() && static_cast<int>(plan_.rankMeshes.size()) != ranks)
    throw ParallelRunError(fmt::format("{} meshes for {} pipeline ranks", plan_.rankMeshes.size(), ranks));
  for (int r = 0; r < ranks; ++r) {
    const auto& devices = plan_.rankDevices[static_cast<std::size_t>(r)];
    auto [a, b] = plan_.meshOf(r);
    const int n = a < 1 || b < 1 ? 0 : plan_.meshSize(r);
    if (n == 0 || devices.empty() || devices.size() % static_cast<std::size_t>(n) != 0)
      throw ParallelRunError(fmt::format("rank {}'s {} devices do not form meshes of ({}, {})", r,
                                         devices.size(), a, b));
    if (devices.size() / static_cast<std::size_t>(n) != static_cast<std::size_t>(plan_.replicas()))
      throw ParallelRunError("every pipeline rank needs the same number of data-parallel replicas");
  }
  const int replicas = plan_.replicas();
  const std::int64_t shares = std::int64_t{plan_.microbatches} * replicas;
  if (plan_.microbatches < 1 || options_.batch % shares != 0)
    throw ParallelRunError(fmt::format("batch {} does not split into {} microbatches × {} replicas",
                                       options_.batch, plan_.microbatches, replicas));
  microbatchSize_ = options_.batch / shares;
  for (ir::ValueId input : training_.graph.inputs()) {
    const auto& shape = training_.graph.value(input).type.shape;
    for (std::size_t d = 1; d < shape.size(); ++d)
      if (shape[d].perBatch)
        throw ParallelRunError(fmt::format("input `{}` has its batch in dimension {}; the runtime "
                                           "splits batches along dimension 0",
                                           training_.graph.value(input).name, d));
  }

  partition_ = passes::partitionStages(training_, plan_.stageOfForwardOp, plan_.virtualStages);
  for (int vs = 0; vs < plan_.virtualStages; ++vs)
    recomputation_.push_back(passes::planRecomputation(training_.graph, partition_.stages[static_cast<std::size_t>(vs)],
                                                       plan_.recomputeOf(vs), plan_.layerOfForwardOp));
  releases_ = planStageReleases(training_.graph, partition_, recomputation_);
  runner_ = std::make_unique<OpRunner>(training_.graph, microbatchSize_);
  for (int r = 0; r < ranks; ++r)
    spmd_.push_back(plan_.meshSize(r) == 1 ? nullptr
                                           : std::make_unique<SpmdRunner>(training_.graph, microbatchSize_,
                                                                          plan_.meshOf(r), plan_.strategies));
  // Where the schedule puts each virtual stage (chunk c of rank r: c·p + r, or ZB-V's V).
  const int chunks = plan_.virtualStages / ranks;
  const ir::PipelineSchedule layout =
      passes::buildSchedule({plan_.schedule, ranks, plan_.microbatches, chunks, plan_.groupSize});
  stagesOfRank_.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    for (int c = 0; c < chunks; ++c) stagesOfRank_[static_cast<std::size_t>(r)].push_back(layout.virtualStage(r, c));
  program_ = passes::lowerPipeline(describe());
  ir::checkProgram(program_);

  int devices = std::max(options_.devices, program_.deviceCount());
  rankOf_.assign(static_cast<std::size_t>(devices), -1);
  slotOf_.assign(static_cast<std::size_t>(devices), -1);
  members_.assign(static_cast<std::size_t>(devices), {});
  replicaDevices_.assign(static_cast<std::size_t>(replicas), {});
  for (int r = 0; r < ranks; ++r) {
    const auto& rank = plan_.rankDevices[static_cast<std::size_t>(r)];
    const int n = plan_.meshSize(r);
    for (std::size_t k = 0; k < rank.size(); ++k) {
      auto d = static_cast<std::size_t>(rank[k]);
      rankOf_.at(d) = r;
      slotOf_.at(d) = static_cast<int>(k);
      members_.at(d) = {static_cast<int>(k) % n, n};
      replicaDevices_[k / static_cast<std::size_t>(n)].push_back(rank[k]);
    }
  }
  for (const auto& replica : replicaDevices_) allDevices_.insert(allDevices_.end(), replica.begin(), replica.end());
  for (int r = 0; r < ranks; ++r) anySharded_ = anySharded_ || (plan_.shardsOptimizer(r) && replicas > 1);
  optimizerState_ = optimizerStateOf(training_.graph);
  deviceState_.resize(static_cast<std::size_t>(devices));
  if (!host_)
    host_ = std::make_unique<cpu::LocalCluster>(cpu::LocalClusterOptions{devices, options_.timeout, options_.hostCores});
  for (int d = 0; d < devices; ++d) memory_.push_back(host_->makeMemory(d, options_.deviceMemory));
  if (plan_.fusedAttention && host_->fusesAttention()) {
    const std::vector<AttentionGroup> fused = attentionToFuse();
    runner_->fuseAttention(fused);
    for (auto& spmd : spmd_)
      if (spmd) spmd->fuseAttention(fused);
  }
}

ParallelTrainer::~ParallelTrainer() = default;

int ParallelTrainer::replicas() const { return plan_.replicas(); }

// Each attention whole in one virtual stage and one layer (so that a run
// holds its forward, and its backward, entire), in a stage that does not
// rerun the softmax alone (selective recomputation).
std::vector<AttentionGroup> ParallelTrainer::attentionToFuse() const {
  auto at = [](const std::vector<int>& of, ir::OpId id) { return id < of.size() ? of[id] : 0; };
  auto stage = [&](ir::OpId id) { return at(plan_.stageOfForwardOp, id); };
  auto layer = [&](ir::OpId id) { return at(plan_.layerOfForwardOp, id); };
  std::vector<AttentionGroup> fused;
  for (AttentionGroup& g : findAttentionGroups(training_.graph, runner_->readers())) {
    const ir::OpId first = g.forward.front();
    const bool whole = std::all_of(g.forward.begin(), g.forward.end(),
                                   [&](ir::OpId id) { return stage(id) == stage(first) && layer(id) == layer(first); });
    if (whole && plan_.recomputeOf(stage(first)) != passes::Recompute::kSelective) fused.push_back(std::move(g));
  }
  return fused;
}

passes::PipelineDescription ParallelTrainer::describe() const {
  const int ranks = static_cast<int>(plan_.rankDevices.size());
  passes::PipelineDescription d;
  d.schedule = plan_.schedule;
  d.microbatches = plan_.microbatches;
  d.chunks = plan_.virtualStages / ranks;
  d.groupSize = plan_.groupSize;
  d.bucketBytes = options_.bucketBytes;
  d.deviceCount = options_.devices;
  for (int r = 0; r < ranks; ++r) {
    passes::StageDescription stage;
    if (static_cast<std::size_t>(r) < plan_.costs.size()) stage = plan_.costs[static_cast<std::size_t>(r)];
    // The update sums a mesh's partial gradients itself (DeviceExecutor), so
    // the simulator's stand-in all-reduce for that stays out of the program.
    stage.meshSyncs.clear();
    stage.meshes.clear();
    const auto& devices = plan_.rankDevices[static_cast<std::size_t>(r)];
    const auto n = static_cast<std::size_t>(plan_.meshSize(r));
    for (std::size_t k = 0; k < devices.size(); k += n)
      stage.meshes.emplace_back(devices.begin() + std::ptrdiff_t(k), devices.begin() + std::ptrdiff_t(k + n));
    // Real sizes where the program's buffers mirror them; the gradient bytes also
    // decide the buckets, and every chunk with gradients needs one.
    std::int64_t activation = 0, gradients = 0;
    for (int vs : stagesOfRank_[static_cast<std::size_t>(r)]) {
      const auto& piece = partition_.stages[static_cast<std::size_t>(vs)];
      activation = std::max(activation, valueBytes(*runner_, piece.forwardCarry));
      gradients += valueBytes(*runner_, piece.gradients);
    }
    stage.activationBytes = activation;
    stage.gradientBytes = std::max<std::int64_t>(gradients, 1024);
    for (int vs : stagesOfRank_[static_cast<std::size_t>(r)])
      stage.recompute = stage.recompute || plan_.recomputeOf(vs) != passes::Recompute::kNone;
    stage.shardOptimizer = plan_.shardsOptimizer(r) && replicas() > 1;
    d.stages.push_back(stage);
  }
  return d;
}

bool ParallelTrainer::flatState(int rank, ir::ValueId v) const {
  return plan_.shardsOptimizer(rank) && replicas() > 1 &&
         std::binary_search(optimizerState_.begin(), optimizerState_.end(), v);
}

int ParallelTrainer::replicaOf(int device) const {
  const auto d = static_cast<std::size_t>(device);
  return slotOf_.at(d) / plan_.meshSize(rankOf_.at(d));
}

MeshPlace ParallelTrainer::placeOf(int device) const {
  const auto d = static_cast<std::size_t>(device);
  const int rank = rankOf_.at(d), slot = slotOf_.at(d), n = plan_.meshSize(rank);
  const auto& devices = plan_.rankDevices[static_cast<std::size_t>(rank)];
  MeshPlace place;
  place.shape = plan_.meshOf(rank);
  place.devices.assign(devices.begin() + (slot - slot % n), devices.begin() + (slot - slot % n + n));
  place.index = slot % n;
  return place;
}

// Every device holds its own copy of its state, counted in its memory as
// parameters or optimizer state (the leaves that are no model parameter).
void ParallelTrainer::setState(const TensorMap& state) {
  setState([&](const std::string& name) {
    auto it = state.find(name);
    if (it == state.end()) throw ParallelRunError(fmt::format("the state has no `{}`", name));
    return it->second;
  });
}

void ParallelTrainer::setState(const StateSource& whole) {
  const ir::Graph& graph = training_.graph;
  for (std::size_t d = 0; d < deviceState_.size(); ++d) {
    TensorMap& mine = deviceState_[d];
    mine.clear();
    if (rankOf_[d] < 0 || !host_->runsHere(static_cast<int>(d))) continue;
    const SpmdRunner* spmd = spmd_[static_cast<std::size_t>(rankOf_[d])].get();
    for (int vs : stagesOfRank_[static_cast<std::size_t>(rankOf_[d])]) {
      const passes::StagePiece& piece = partition_.stages[static_cast<std::size_t>(vs)];
      for (ir::ValueId v : piece.state) {
        std::string name = bindingName(graph, v);
        const Tensor value = whole(name);
        const bool parameter = std::find(piece.gradientParameters.begin(), piece.gradientParameters.end(), v) !=
                               piece.gradientParameters.end();
        MemoryScope scope(memory_[d], parameter ? MemoryCategory::kParameters : MemoryCategory::kOptimizerState);
        Tensor box = spmd ? takeShard(value, spmd->heldSpec(v), placeOf(static_cast<int>(d))) : value;
        // A sharded optimizer keeps only this replica's flat shard of the box.
        mine[name] = flatState(rankOf_[d], v) ? flatShardOf(box, replicaOf(static_cast<int>(d)), replicas())
                     : spmd                   ? std::move(box)
                                              : box.clone();
      }
    }
  }
}

std::vector<ParallelTrainer::HeldState> ParallelTrainer::heldState(int device) const {
  std::vector<HeldState> held;
  const int rank = rankOf_.at(static_cast<std::size_t>(device));
  const SpmdRunner* spmd = spmd_[static_cast<std::size_t>(rank)].get();
  for (int vs : stagesOfRank_[static_cast<std::size_t>(rank)])
    for (ir::ValueId v : partition_.stages[static_cast<std::size_t>(vs)].state)
      held.push_back({bindingName(training_.graph, v), runner_->shape(v),
                      spmd ? spmd->heldSpec(v) : ir::ShardingSpec::replicated(runner_->shape(v).size()),
                      flatState(rank, v)});
  return held;
}

TensorMap ParallelTrainer::state() const {
  TensorMap all;
  for (int r = 0; r < static_cast<int>(plan_.rankDevices.size()); ++r) {
    // Replica 0's mesh: its members' boxes make every tensor.
    const auto& rank = plan_.rankDevices[static_cast<std::size_t>(r)];
    const int n = plan_.meshSize(r);
    for (const HeldState& s : heldState(rank[0])) {
      const Tensor& first = deviceState_.at(static_cast<std::size_t>(rank[0])).at(s.name);
      Tensor whole(first.dtype(), s.shape);
      for (int k = 0; k < n; ++k)
        putShard(whole, wholeBox(s, r, k), s.spec, placeOf(rank[static_cast<std::size_t>(k)]));
      all.insert_or_assign(s.name, std::move(whole));
    }
  }
  return all;
}

std::optional<Tensor> ParallelTrainer::replicatedState(const std::string& name) const {
  for (const TensorMap& held : deviceState_)
    if (auto it = held.find(name); it != held.end()) return it->second;
  return std::nullopt;
}

// Member `member`'s box of `s` on rank r: as replica 0's member holds it, or
// for a flat-sharded tensor joined from every replica's shard.
Tensor ParallelTrainer::wholeBox(const HeldState& s, int rank, int member) const {
  const auto& devices = plan_.rankDevices[static_cast<std::size_t>(rank)];
  const int n = plan_.meshSize(rank);
  auto held = [&](int replica) -> const Tensor& {
    return deviceState_.at(static_cast<std::size_t>(devices.at(static_cast<std::size_t>(replica * n + member))))
        .at(s.name);
  };
  if (!s.flat) return held(0);
  Tensor box(held(0).dtype(), localShape(s.spec, s.shape, placeOf(devices[static_cast<std::size_t>(member)])));
  for (int i = 0; i < replicas(); ++i) putFlatShard(box, held(i), i, replicas());
  return box;
}

const TensorMap& ParallelTrainer::deviceState(int device) const {
  return deviceState_.at(static_cast<std::size_t>(device));
}

void ParallelTrainer::setDeviceState(int device, TensorMap held) {
  deviceState_.at(static_cast<std::size_t>(device)) = std::move(held);
}

std::vector<int> ParallelTrainer::planDevices() const {
  std::vector<int> devices;
  for (const auto& rank : plan_.rankDevices) devices.insert(devices.end(), rank.begin(), rank.end());
  std::sort(devices.begin(), devices.end());
  return devices;
}

std::optional<ParallelTrainer::PieceKey> ParallelTrainer::pieceKey(int device, const HeldState& s) const {
  const MeshPlace place = placeOf(device);
  const Shape block = localShape(s.spec, s.shape, place);
  PieceKey key{s.name, shardOffset(s.spec, s.shape, place), block, -1};
  if (!s.flat) return key;
  const std::int64_t n = shapeElements(block), c = flatShardSize(n, replicas());
  key.flatBegin = std::int64_t{replicaOf(device)} * c;
  if (key.flatBegin >= n) return std::nullopt;  // this replica's shard holds none of it
  return key;
}

std::vector<DeviceShard> ParallelTrainer::shards(bool storedOnce) const {
  std::vector<DeviceShard> shards;
  for (std::size_t d = 0; d < deviceState_.size(); ++d) {
    if (deviceState_[d].empty()) continue;
    // The pieces the plan's lower-numbered devices hold too (replicas).
    std::set<PieceKey> lower;
    if (storedOnce)
      for (int other : planDevices())
        if (other < static_cast<int>(d))
          for (const HeldState& s : heldState(other))
            if (auto key = pieceKey(other, s)) lower.insert(*key);
    DeviceShard shard{static_cast<int>(d), {}};
    MeshPlace place = placeOf(static_cast<int>(d));
    for (const HeldState& s : heldState(static_cast<int>(d))) {
      std::optional<PieceKey> key = pieceKey(static_cast<int>(d), s);
      if (!key || lower.count(*key)) continue;
      ShardPiece piece{s.name, s.shape, key->offset, deviceState_[d].at(s.name), {}};
      if (s.flat && !flatPiece(piece, key->block, replicaOf(static_cast<int>(d)), replicas())) continue;
      shard.pieces.push_back(std::move(piece));
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

std::vector<TensorMap> ParallelTrainer::microbatchesOf(const TensorMap& batch, int replica) const {
  std::vector<TensorMap> result(static_cast<std::size_t>(plan_.microbatches));
  const ir::Graph& graph = training_.graph;
  for (ir::ValueId input : graph.inputs()) {
    std::string name = bindingName(graph, input);
    auto it = batch.find(name);
    if (it == batch.end()) throw ParallelRunError(fmt::format("no tensor was given for input `{}`", name));
    const auto& type = graph.value(input).type;
    bool split = !type.shape.empty() && type.shape[0].perBatch;
    for (int k = 0; k < plan_.microbatches; ++k) {
      std::int64_t share = std::int64_t{replica} * plan_.microbatches + k;
      std::int64_t perSample = split ? type.shape[0].value : 0;
      result[static_cast<std::size_t>(k)][name] =
          split ? rows(it->second, share * microbatchSize_ * perSample, microbatchSize_ * perSample)
                : it->second;
    }
  }
  return result;
}

// Each microbatch's backward differentiates its own mean loss: M = microbatches
// × replicas times the serial reference's share of the batch. Seeding it with
// loss_scale / M gives its half-precision gradients the serial reference's
// magnitudes, so f16 overflows where the reference does (the update unscales
// by the same loss_scale / M, the sum over microbatches then being the
// reference's scaled gradient over M). The scale is restored after the step.
// Multiplying the divided scale back by M would not give the scale's bits
// for every M (65536 / 41 * 41 is not 65536 in f32), and the scale would
// drift from step to step; the scaler only halves or doubles it, so the ratio
// of the divided scale after and before the step is exact.
std::vector<float> ParallelTrainer::shareLossScale() {
  const auto shares = static_cast<float>(std::int64_t{plan_.microbatches} * replicas());
  std::vector<float> before(deviceState_.size(), 0.0f);
  for (std::size_t d = 0; d < deviceState_.size(); ++d)
    if (auto it = deviceState_[d].find("loss_scale"); it != deviceState_[d].end()) {
      float& value = it->second.f32()[0];
      before[d] = value;
      value /= shares;
    }
  return before;
}

void ParallelTrainer::restoreLossScale(const std::vector<float>& before) {
  const auto shares = static_cast<float>(std::int64_t{plan_.microbatches} * replicas());
  for (std::size_t d = 0; d < deviceState_.size(); ++d)
    if (auto it = deviceState_[d].find("loss_scale"); it != deviceState_[d].end()) {
      float& value = it->second.f32()[0];
      value = before[d] * (value / (before[d] / shares));
    }
}

ParallelStepResult ParallelTrainer::step(const TensorMap& batch, std::int64_t step) {
  const std::size_t devices = deviceState_.size();
  std::vector<std::vector<TensorMap>> inputs;
  for (int i = 0; i < replicas(); ++i) inputs.push_back(microbatchesOf(batch, i));
  std::vector<DeviceResult> results(devices);
  const float scale = 1.0f / static_cast<float>(std::int64_t{plan_.microbatches} * replicas());
  for (const auto& memory : memory_) memory->resetPeak();
  const std::vector<float> lossScales = shareLossScale();
  auto start = std::chrono::steady_clock::now();
  try {
    host_->run([&](int device) {
      auto d = static_cast<std::size_t>(device);
      if (slotOf_[d] < 0) return;
      const int slot = slotOf_[d], rank = rankOf_[d];
      const int n = plan_.meshSize(rank);
      DeviceStep s;
      s.device = device;
      s.step = step;
      s.optimizerStep = cpu::optimizerStep(deviceState_[d], step);
      s.origin = start;
      s.program = &program_;
      s.partition = &partition_;
      s.recomputation = &recomputation_;
      s.releases = &releases_;
      s.runner = runner_.get();
      s.spmd = spmd_[static_cast<std::size_t>(rank)].get();
      s.mesh = placeOf(device);
      s.shardedCarries = plan_.sameMeshes();
      s.members = &members_;
      s.comm = &host_->communicator(device);
      s.cores = host_->cores();
      s.state = &deviceState_[d];
      s.memory = memory_[d];
      s.microbatches = &inputs[static_cast<std::size_t>(slot / n)];
      s.microbatchSize = microbatchSize_;
      s.firstSample = std::int64_t{slot / n} * plan_.microbatches * microbatchSize_;
      s.gradientScale = scale;
      s.replicaGroup = anySharded_ ? &allDevices_ : &replicaDevices_[static_cast<std::size_t>(slot / n)];
      s.clipOverReplicas = anySharded_;
      s.shardOptimizer = plan_.shardsOptimizer(rank) && replicas() > 1;
      s.replica = slot / n;
      s.replicas = replicas();
      s.fault = options_.fault;
      results[d] = executeDevice(s);
    });
  } catch (const cpu::DeviceFailure& failure) {
    restoreLossScale(lossScales);
    // The executor's messages already name the device, step and instruction.
    const std::string& detail = failure.detail();
    bool aborted = false;
    try {
      std::rethrow_exception(failure.cause());
    } catch (const CommError& e) {
      aborted = e.kind() == CommError::Kind::Aborted;
    } catch (...) {
    }
    throw ParallelRunError(detail.rfind("device ", 0) == 0 ? detail : failure.what(), aborted);
  }
  restoreLossScale(lossScales);
  ParallelStepResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double sum = 0;
  int count = 0;
  for (const DeviceResult& r : results) {
    sum += r.lossSum;
    count += r.losses;
    result.moeDropped += r.moeDropped;
    result.devices.push_back(r.times);
  }
  for (const auto& memory : memory_) result.memory.push_back(memory->stats());
  result.lossSum = sum;
  result.losses = count;
  result.loss = count ? sum / count : 0;
  return result;
}

}  // namespace meshflow::runtime
