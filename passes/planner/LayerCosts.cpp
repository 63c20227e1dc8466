#include "passes/planner/LayerCosts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <iterator>
#include <mutex>
#include <thread>

#include "ir/OpCost.h"
#include "passes/Autodiff.h"
#include "passes/FusedKernels.h"
#include "passes/Recomputation.h"

namespace meshflow::passes {
namespace {

// A leanest solve's memory weight, in the layer's fastest latency per its
// fastest footprint: saving a thousandth of that footprint is worth the whole
// latency, so memory decides and time only breaks ties.
constexpr double kLeanestWeight = 1000;

// The forward share of an op's work: by FLOPs, or by bytes for ops without any.
double forwardFraction(const ir::OpCost& c) {
  double total = c.flops + c.backwardFlops;
  if (total > 0) return c.flops / total;
  double fwd = c.bytesRead + c.bytesWritten;
  double all = fwd + c.backwardBytesRead + c.backwardBytesWritten;
  return all > 0 ? fwd / all : 0.5;
}

bool isLeaf(ir::OpKind kind) {
  return kind == ir::OpKind::Input || kind == ir::OpKind::Parameter ||
         kind == ir::OpKind::Constant;
}

bool readsParameter(const ir::Graph& g, const ir::Op& op) {
  for (ir::ValueId v : op.inputs)
    if (g.op(g.value(v).producer).kind == ir::OpKind::Parameter) return true;
  return false;
}

// Whether an output of `op` goes on into an Add that reads a parameter (a
// bias), whose output gradient is the same value.
bool feedsParameterReader(const ir::Graph& g, const std::vector<std::vector<ir::OpId>>& consumers,
                          const ir::Op& op) {
  for (ir::ValueId v : op.outputs)
    for (ir::OpId c : consumers[v])
      if (g.op(c).kind == ir::OpKind::Add && readsParameter(g, g.op(c))) return true;
  return false;
}

double valueBytes(const ir::Graph& g, ir::ValueId v, std::int64_t batch) {
  const ir::TensorType& t = g.value(v).type;
  return double(t.elements(batch)) * double(ir::dtypeBytes(t.dtype));
}

LayerCost summarise(const ir::Graph& g, const IntraOpResult& r, const MeshConfig& config,
                    std::int64_t batch, const MemoryOptions& memory,
                    const ir::DeviceSpec& device) {
  LayerCost c;
  const std::vector<std::vector<ir::OpId>> consumers = g.consumers();
  double forwardCompute = 0, backwardCompute = 0;
  for (const OpSharding& o : r.ops) {
    const ir::Op& op = g.op(o.op);
    double fraction = forwardFraction(ir::opCost(g, o.op, batch));
    forwardCompute += o.computeTime * fraction;
    double backward = o.computeTime * (1 - fraction);
    backwardCompute += backward;
    // dW is one of the two products of a weight's backward; it reads the
    // gradient of the op's output, which I makes (one gradient for a chain of
    // such ops, a matmul and its bias: an add passes its gradient on).
    if (readsParameter(g, op)) {
      c.weightGrad += backward / 2;
      MemoryOptions all = memory;
      all.heldForBackward = nullptr;
      if (!feedsParameterReader(g, consumers, op))
        c.weightGradInputs += activationMemory(g, o.op, batch, o.outputs, config.mesh, all);
    }
    if (isAttentionScore(g, op)) {
      c.attentionScoresForward += o.computeTime * fraction;
      c.attentionScores += activationMemory(g, o.op, batch, o.outputs, config.mesh, memory);
    }
    if (op.kind == ir::OpKind::Input) {
      // Full recomputation keeps what enters the stage from other layers
      // whether or not the backward reads it: the rerun does. The graph's own
      // inputs are bound again from the microbatch, never kept.
      MemoryOptions entering = memory;
      entering.heldForBackward = nullptr;
      if (g.value(op.outputs[0]).name == "boundary")
        c.inputs += activationMemory(g, o.op, batch, o.outputs, config.mesh, entering);
      if (op.attrs.count("requires_grad")) c.boundaryBytes += valueBytes(g, op.outputs[0], batch);
    }
  }
  // Tensor-parallel collectives come in forward/backward pairs (Megatron's f
  // and g); resharding likewise goes both ways. Half each.
  double perMicrobatch = r.communication - r.parameterSync + r.resharding;
  c.forward = forwardCompute + perMicrobatch / 2;
  c.backward = backwardCompute + perMicrobatch / 2;
  c.parameterSync = r.parameterSync;
  c.syncBytes = r.gradientSyncBytes;
  c.weights = r.memory.weights;
  c.gradients = r.memory.gradients;
  c.optimizerState = r.memory.optimizerState;
  MemoryOptions zero = memory;
  zero.shardOptimizerState = true;
  for (const OpSharding& o : r.ops) {
    if (g.op(o.op).kind != ir::OpKind::Parameter) continue;
    const ir::TensorType& t = g.value(g.op(o.op).outputs[0]).type;
    std::int64_t sync = config.mesh.size() / o.outputs[0].shardCount(config.mesh);
    MemoryBreakdown m =
        parameterMemory(double(t.elements(batch)), t.dtype, o.outputs[0], sync, config.mesh, zero);
    c.zeroGradients += m.gradients;
    c.zeroOptimizerState += m.optimizerState;
  }
  c.activations = r.memory.activations;
  // The optimizer reads weights, gradients and state and writes weights and state.
  c.update = (2 * (c.weights + c.optimizerState) + c.gradients) / device.memoryBandwidth;
  return c;
}

// Per value of `forward`: whether a backward op of its training graph reads it,
// as the runtime's stash holds it (passes/StagePartition.cpp): leaves are bound
// again, never stashed. The backward does not depend on the optimizer.
std::vector<bool> readByBackward(const ir::Graph& forward) {
  std::vector<bool> read(forward.valueCount(), false);
  TrainingGraph training;
  try {
    training = buildTrainingGraph(forward, OptimizerConfig::adam());
  } catch (const AutodiffError&) {
    return std::vector<bool>(forward.valueCount(), true);  // priced as before: all held
  }
  const ir::Graph& g = training.graph;
  for (const ir::Op& op : g.ops()) {
    if (op.phase != ir::Phase::Backward) continue;
    for (ir::ValueId v : op.inputs) {
      if (v >= read.size()) continue;  // made by the backward itself
      const ir::Op& producer = g.op(g.value(v).producer);
      if (producer.phase == ir::Phase::Forward && !isLeaf(producer.kind)) read[v] = true;
    }
  }
  return read;
}

}  // namespace

LayerCostTable::LayerCostTable(const ir::Graph& forward, const LayerClustering& layers,
                               const ir::DeviceSpec& device, LayerCostOptions options)
    : forward_(forward), device_(device), options_(std::move(options)) {
  std::vector<bool> read = readByBackward(forward);
  if (device.fusedKernels) keepWhatFusedKernelsRead(findFusedKernels(forward), read);
  std::map<std::string, int> kinds;
  for (int l = 0; l < static_cast<int>(layers.layers.size()); ++l) {
    LayerSubgraph sub = layerSubgraph(forward, layers.layerOfOp, l, l + 1);
    auto [it, added] = kinds.try_emplace(graphSignature(sub.graph), int(subgraphs_.size()));
    if (added) {
      std::vector<bool> held;
      for (ir::ValueId v : sub.sourceValue) held.push_back(v < read.size() && read[v]);
      heldForBackward_.push_back(std::move(held));
      subgraphs_.push_back(std::move(sub));
    }
    kindOf_.push_back(it->second);
  }
}

const std::optional<LayerCost>& LayerCostTable::cost(int layer, int configIndex,
                                                     const MeshConfig& config,
                                                     std::int64_t microbatch, double syncWeight,
                                                     bool lean) {
  int kind = kindOf_[layer];
  auto key = std::make_tuple(kind, configIndex, microbatch, syncWeight, lean);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::optional<LayerCost> value;
  if (!lean) {
    value = solve(kind, config, microbatch, syncWeight, 0);
  } else if (const auto& fastest = cost(layer, configIndex, config, microbatch, syncWeight)) {
    double weight = leanWeight(config, *fastest, syncWeight);
    value = weight > 0 ? solve(kind, config, microbatch, syncWeight, weight) : fastest;
  }
  return cache_.emplace(key, std::move(value)).first->second;
}

std::int64_t LayerCostTable::stagesOf(const MeshConfig& config) const {
  return std::max<std::int64_t>(1, options_.devices / config.shape.devices());
}

std::int64_t LayerCostTable::microbatchesInFlight(const MeshConfig& config,
                                                  double syncWeight) const {
  const auto microbatches = std::max<std::int64_t>(1, std::llround(1 / syncWeight));
  return std::min(stagesOf(config), microbatches);
}

std::int64_t LayerCostTable::leanHolding(const MeshConfig& config, double syncWeight) const {
  return countInFlight_ ? microbatchesInFlight(config, syncWeight) : 1;
}

bool LayerCostTable::countMicrobatchesInFlight() {
  if (countInFlight_) return false;
  countInFlight_ = true;
  dropLeanCosts();
  return true;
}

bool LayerCostTable::priceLeanest() {
  if (leanest_) return false;
  leanest_ = countInFlight_ = true;
  dropLeanCosts();
  return true;
}

void LayerCostTable::dropLeanCosts() {
  for (auto it = cache_.begin(); it != cache_.end();)
    it = std::get<4>(it->first) ? cache_.erase(it) : std::next(it);
}

double LayerCostTable::leanWeight(const MeshConfig& config, const LayerCost& fastest,
                                  double syncWeight) const {
  double held = double(leanHolding(config, syncWeight));
  double memory =
      fastest.weights + fastest.gradients + fastest.optimizerState + held * fastest.activations;
  double latency = fastest.forward + fastest.backward;
  if (leanest_) return memory > 0 ? kLeanestWeight * latency / memory : 0;
  if (options_.memoryBudget <= 0) return 0;
  double layersPerStage = std::ceil(double(layerCount()) / double(stagesOf(config)));
  double share = options_.memoryBudget / layersPerStage;
  if (memory <= share) return 0;
  return latency / share;
}

void LayerCostTable::prefetch(const std::vector<Request>& requests, unsigned threads) {
  struct Work {
    std::optional<LayerCost>* slot;
    const Request* request;
    double memoryWeight;
  };
  // Lean requests need their fastest entry first: they run in a second round.
  for (bool lean : {false, true}) {
    std::vector<Work> work;
    for (const Request& r : requests) {
      auto key = std::make_tuple(kindOf_[r.layer], r.configIndex, r.microbatch, r.syncWeight, lean);
      if (r.lean != lean || cache_.count(key)) continue;
      double weight = 0;
      if (lean) {
        const auto& fastest = cost(r.layer, r.configIndex, *r.config, r.microbatch, r.syncWeight);
        if (fastest) weight = leanWeight(*r.config, *fastest, r.syncWeight);
        if (weight <= 0) {  // nothing to solve: the lean entry is the fastest one
          cost(r.layer, r.configIndex, *r.config, r.microbatch, r.syncWeight, true);
          continue;
        }
      }
      // Inserted before the workers start, so they only fill their own slots.
      work.push_back({&cache_.try_emplace(key).first->second, &r, weight});
    }
    std::atomic<std::size_t> next = 0;
    // A worker stopped at a safe point (PlanInterrupted) stops the others; the
    // first such exception is rethrown once all have joined.
    std::exception_ptr stopped;
    std::mutex stoppedMutex;
    auto worker = [&] {
      try {
        for (std::size_t i = next++; i < work.size(); i = next++) {
          const Request& r = *work[i].request;
          *work[i].slot =
              solve(kindOf_[r.layer], *r.config, r.microbatch, r.syncWeight, work[i].memoryWeight);
        }
      } catch (...) {
        next = work.size();
        std::lock_guard lock(stoppedMutex);
        if (!stopped) stopped = std::current_exception();
      }
    };
    std::vector<std::thread> pool;
    unsigned count = std::max(1u, std::min<unsigned>(threads, unsigned(work.size())));
    for (unsigned t = 1; t < count; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool) t.join();
    // The slots left unsolved read as "no strategy": the table is dropped with
    // the search the exception ends.
    if (stopped) std::rethrow_exception(stopped);
  }
}

std::optional<LayerCost> LayerCostTable::solve(int kind, const MeshConfig& config,
                                               std::int64_t microbatch, double syncWeight,
                                               double memoryWeight) {
  const ir::Graph& g = subgraphs_[kind].graph;
  IntraOpOptions o;
  o.batch = microbatch;
  o.memory.optimizerCopies = options_.optimizerCopies;
  o.memory.heldForBackward = &heldForBackward_[kind];
  o.parameterSyncWeight = syncWeight;
  o.pins = options_.pins;
  o.memoryWeight = memoryWeight;
  // A lean solve weighs a byte of activations as often as the stage holds it.
  const std::int64_t held = memoryWeight > 0 ? leanHolding(config, syncWeight) : 1;
  o.memory.microbatchesHeld = held;
  checkpoint(options_.control, 1);
  if (options_.control)
    o.solver.timeBudgetSeconds =
        std::max(1e-3, std::min(o.solver.timeBudgetSeconds, options_.control->secondsLeft()));
  ++solves_;
  try {
    IntraOpResult r = solveIntraOp(g, config.mesh, device_, o);
    // The layer's figures are per microbatch.
    r.memory.activations /= double(held);
    o.memory.microbatchesHeld = 1;
    LayerCost c = summarise(g, r, config, microbatch, o.memory, device_);
    c.sharding = std::make_shared<const IntraOpResult>(std::move(r));
    return c;
  } catch (const IntraOpError&) {
    return std::nullopt;  // a pin no strategy on this mesh meets
  }
}

}  // namespace meshflow::passes
