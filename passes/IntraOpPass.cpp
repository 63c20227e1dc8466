#include "passes/IntraOpPass.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>

#include "ir/GraphText.h"
#include "ir/OpCost.h"
#include "ir/ScopeGlob.h"
#include "passes/Collectives.h"
#include "passes/strategies/Strategy.h"

namespace meshflow::passes {

namespace {

using ir::OpId;
using ir::ShardingSpec;
using ir::ValueId;

void checkForward(const ir::Graph& g) {
  for (OpId id = 0; id < g.ops().size(); ++id) {
    const ir::Op& op = g.op(id);
    if (op.phase != ir::Phase::Forward || op.kind >= ir::OpKind::ReduceToShape) {
      throw IntraOpError(fmt::format("op #{} ({}): the intra-op pass takes a forward graph; "
                                     "backward and update ops are priced with their forward op",
                                     id, ir::opName(op.kind)));
    }
  }
}

// A value needs a gradient when it is floating and depends on a parameter.
std::vector<bool> valuesNeedingGradient(const ir::Graph& g) {
  std::vector<bool> needs(g.valueCount(), false);
  for (const ir::Op& op : g.ops()) {
    bool any = op.kind == ir::OpKind::Parameter ||
               (op.kind == ir::OpKind::Input && op.attrs.count("requires_grad") != 0);
    for (ValueId v : op.inputs) any = any || needs[v];
    for (ValueId v : op.outputs) {
      ir::DType d = g.value(v).type.dtype;
      needs[v] = any && (d == ir::DType::F32 || d == ir::DType::F16 || d == ir::DType::BF16);
    }
  }
  return needs;
}

// ---------------------------------------------------------------------------
// Repeated layers: ops whose scope's first component is a name and a number.

std::optional<std::pair<std::string, long long>> layerOf(const std::string& scope) {
  std::string first = scope.substr(0, scope.find('.'));
  std::size_t digits = first.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(first[digits - 1]))) --digits;
  if (digits == 0 || digits == first.size() || first.size() - digits > 15) return std::nullopt;
  return std::make_pair(first.substr(0, digits), std::stoll(first.substr(digits)));
}

// Everything a strategy list and its costs depend on, minus names and seeds.
std::string opSignature(const ir::Graph& g, const ir::Op& op, const std::vector<bool>& needs) {
  std::string s = ir::opName(op.kind);
  for (const auto& [key, value] : op.attrs) {
    if (key == "name" || key == "seed") continue;
    s += "|" + key + "=" + ir::attributeText(value);
  }
  for (ValueId v : op.inputs) {
    bool parameter = g.op(g.value(v).producer).kind == ir::OpKind::Parameter;
    s += fmt::format("|{}{}{}", g.value(v).type.text(), needs[v] ? "g" : "", parameter ? "p" : "");
  }
  for (ValueId v : op.outputs) s += "|" + g.value(v).type.text();
  return s;
}

// representative[id]: the op whose choice op `id` copies (itself if none).
std::vector<OpId> tieRepeatedLayers(const ir::Graph& g, const std::vector<bool>& needs,
                                    const std::function<std::string(OpId)>& pinText,
                                    std::size_t* tiedLayers) {
  std::vector<OpId> rep(g.ops().size());
  for (OpId id = 0; id < rep.size(); ++id) rep[id] = id;
  std::map<std::pair<std::string, long long>, std::vector<OpId>> instances;
  for (OpId id = 0; id < g.ops().size(); ++id) {
    if (auto layer = layerOf(g.op(id).scope)) instances[*layer].push_back(id);
  }
  // Instances in order of their first op; the first of each (name, op sequence)
  // is the representative of the others.
  std::vector<const std::vector<OpId>*> ordered;
  for (const auto& [key, ops] : instances) ordered.push_back(&ops);
  std::sort(ordered.begin(), ordered.end(),
            [](const auto* a, const auto* b) { return a->front() < b->front(); });
  std::map<std::pair<std::string, std::string>, const std::vector<OpId>*> first;
  for (const std::vector<OpId>* ops : ordered) {
    std::string sig;
    for (OpId id : *ops) sig += opSignature(g, g.op(id), needs) + pinText(id) + "\n";
    auto [it, inserted] = first.try_emplace({layerOf(g.op(ops->front()).scope)->first, sig}, ops);
    if (inserted) continue;
    const std::vector<OpId>& base = *it->second;
    for (std::size_t j = 0; j < base.size(); ++j) rep[(*ops)[j]] = base[j];
    ++*tiedLayers;
  }
  return rep;
}

// ---------------------------------------------------------------------------
// The problem.

struct EdgeUse {
  int from;        // problem node of the producer
  std::size_t output;
  int to;          // problem node of the consumer
  std::size_t input;
  auto operator<=>(const EdgeUse&) const = default;
};

class ProblemBuilder {
 public:
  ProblemBuilder(const ir::Graph& g, const ir::LogicalMesh& mesh, const ir::DeviceSpec& device,
                 const IntraOpOptions& options)
      : g_(g), mesh_(mesh), device_(device), options_(options) {
    memory_ = options.memory;
    memory_.shardOptimizerState = options.shardOptimizerState;
    if (device.fusedKernels) fused_ = findFusedKernels(g);
  }

  IntraOpResult run() {
    checkForward(g_);
    needs_ = valuesNeedingGradient(g_);
    IntraOpResult result;
    std::vector<OpId> rep(g_.ops().size());
    for (OpId id = 0; id < rep.size(); ++id) rep[id] = id;
    if (options_.mergeRepeatedLayers) {
      // Copies with different pins must not share a choice.
      auto pinText = [this](OpId id) {
        const IntraOpPin* pin = pinOf(id);
        return pin ? "|pin=" + pin->spec.toString() : std::string();
      };
      rep = tieRepeatedLayers(g_, needs_, pinText, &result.repeatedLayers);
    }
    buildNodes(rep);
    buildEdges(rep);
    if (options_.problemOut) *options_.problemOut = problem_;
    ShardingSolution solution = solveSharding(problem_, options_.solver);
    fillResult(rep, solution, result);
    return result;
  }

 private:
  OpContext contextOf(OpId id) const {
    const ir::Op& op = g_.op(id);
    std::vector<bool> needs;
    for (ValueId v : op.inputs) needs.push_back(needs_[v]);
    return OpContext{g_,    id, options_.batch, mesh_, needs,
                     {options_.shardOptimizerState, options_.parameterSyncWeight}};
  }

  double computeTime(OpId id, std::int64_t parallelism) const {
    return opComputeTime(g_, id, options_.batch, parallelism, device_,
                         fused_ ? &*fused_ : nullptr);
  }

  double memoryOf(OpId id, const Strategy& s) const {
    const ir::Op& op = g_.op(id);
    if (op.kind != ir::OpKind::Parameter) {
      return activationMemory(g_, id, options_.batch, s.outputs, mesh_, memory_);
    }
    return parameterBreakdown(id, s).total();
  }

  // The parameters' gradients `s` leaves partial, by the axes it sums them over.
  void addGradientSync(OpId id, const Strategy& s, IntraOpResult& r) const {
    const ir::Op& op = g_.op(id);
    for (std::size_t i = 0; i < op.inputs.size() && i < s.gradientSync.size(); ++i) {
      if (s.gradientSync[i] == ir::MeshAxes::kNone) continue;
      const ir::ValueInfo& v = g_.value(op.inputs[i]);
      if (g_.op(v.producer).kind != ir::OpKind::Parameter) continue;
      double bytes = double(v.type.elements(options_.batch)) * double(ir::dtypeBytes(v.type.dtype));
      r.gradientSyncBytes[static_cast<std::size_t>(s.gradientSync[i])] +=
          bytes / double(s.inputs[i].shardCount(mesh_));
    }
  }

  // A parameter's gradient is assumed synchronised over the devices that do not
  // hold distinct shards of it (its data-parallel group).
  MemoryBreakdown parameterBreakdown(OpId id, const Strategy& s) const {
    const ir::TensorType& t = g_.value(g_.op(id).outputs[0]).type;
    std::int64_t shards = s.outputs[0].shardCount(mesh_);
    return parameterMemory(double(t.elements(options_.batch)), t.dtype, s.outputs[0],
                           mesh_.size() / shards, mesh_, memory_);
  }

  const IntraOpPin* pinOf(OpId id) const {
    const ir::Op& op = g_.op(id);
    if (op.outputs.empty()) return nullptr;
    std::size_t rank = g_.value(op.outputs[0]).type.shape.size();
    for (const IntraOpPin& pin : options_.pins)
      if (pin.spec.rank() == rank && ir::scopeMatches(pin.pattern, op.scope)) return &pin;
    return nullptr;
  }

  std::vector<Strategy> pinned(OpId id, std::vector<Strategy> all) const {
    const IntraOpPin* pin = pinOf(id);
    if (!pin) return all;
    std::vector<Strategy> kept;
    for (Strategy& s : all)
      if (s.outputs[0].withPartial(ir::MeshAxes::kNone) == pin->spec) kept.push_back(std::move(s));
    if (kept.empty())
      throw IntraOpError(fmt::format(
          "pin(op = \"{}\", sharding = \"{}\"): op #{} ({} in {}) has no strategy producing {} "
          "on a {}x{} mesh",
          pin->pattern, pin->spec.toString(), id, ir::opName(g_.op(id).kind), g_.op(id).scope,
          pin->spec.toString(), mesh_.shape[0], mesh_.shape[1]));
    return kept;
  }

  void buildNodes(const std::vector<OpId>& rep) {
    nodeOf_.assign(g_.ops().size(), -1);
    std::vector<int> copies(g_.ops().size(), 0);
    for (OpId id = 0; id < rep.size(); ++id) ++copies[rep[id]];
    for (OpId id = 0; id < rep.size(); ++id) {
      if (rep[id] != id) continue;
      nodeOf_[id] = static_cast<int>(problem_.nodes.size());
      nodeOp_.push_back(id);
      strategies_.push_back(pinned(id, strategiesFor(contextOf(id))));
      double ideal = computeTime(id, mesh_.size());
      ShardingNode node;
      node.name = fmt::format("#{} {} {}", id, ir::opName(g_.op(id).kind), g_.op(id).scope);
      std::vector<double> own;
      for (const Strategy& s : strategies_.back()) {
        double cost = s.communication + std::max(0.0, computeTime(id, s.parallelism) - ideal);
        own.push_back(cost);
        double memory = memoryOf(id, s) * copies[id];
        node.costs.push_back(cost * copies[id] + options_.memoryWeight * memory);
        node.memory.push_back(memory);
      }
      ownCost_.push_back(own);
      problem_.nodes.push_back(std::move(node));
    }
    for (OpId id = 0; id < rep.size(); ++id) nodeOf_[id] = nodeOf_[rep[id]];
    problem_.memoryBudget = options_.memoryBudget;
  }

  void buildEdges(const std::vector<OpId>& rep) {
    std::map<EdgeUse, int> uses;
    for (OpId id = 0; id < g_.ops().size(); ++id) {
      const ir::Op& op = g_.op(id);
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const ir::ValueInfo& v = g_.value(op.inputs[i]);
        const auto& outs = g_.op(v.producer).outputs;
        std::size_t o = std::find(outs.begin(), outs.end(), op.inputs[i]) - outs.begin();
        ++uses[{nodeOf_[v.producer], o, nodeOf_[id], i}];
      }
    }
    for (const auto& [use, count] : uses) {
      ShardingEdge edge{use.from, use.to, matrixOf(use)};
      for (auto& row : edge.costs) {
        for (double& c : row) c *= count;
      }
      problem_.edges.push_back(std::move(edge));
    }
  }

  // Strategies share few distinct specs, so resharding is priced once per
  // distinct (producer spec, consumer spec) pair of the edge.
  std::vector<std::vector<double>> matrixOf(const EdgeUse& use) const {
    OpId producer = nodeOp_[use.from];
    ValueId v = g_.op(producer).outputs[use.output];
    const ir::TensorType& t = g_.value(v).type;
    std::vector<std::int64_t> shape;
    for (const ir::Dim& d : t.shape) shape.push_back(d.resolve(options_.batch));
    double perElement = double(ir::dtypeBytes(t.dtype));
    std::vector<ShardingSpec> fromSpecs, toSpecs;
    std::vector<int> fromIndex = distinctSpecs(strategies_[use.from], use.output, true, fromSpecs);
    std::vector<int> toIndex = distinctSpecs(strategies_[use.to], use.input, false, toSpecs);
    std::vector<std::vector<double>> distinct(fromSpecs.size(), std::vector<double>(toSpecs.size()));
    for (std::size_t a = 0; a < fromSpecs.size(); ++a)
      for (std::size_t b = 0; b < toSpecs.size(); ++b) {
        double c = reshardingCost(fromSpecs[a], toSpecs[b], shape, perElement, mesh_);
        // The gradient flows back from the consumer's layout to the producer's.
        if (needs_[v] && std::isfinite(c))
          c += reshardingCost(toSpecs[b].withPartial(ir::MeshAxes::kNone),
                              fromSpecs[a].withPartial(ir::MeshAxes::kNone), shape, perElement,
                              mesh_);
        distinct[a][b] = c;
      }
    std::vector<std::vector<double>> m(fromIndex.size(), std::vector<double>(toIndex.size()));
    for (std::size_t s = 0; s < fromIndex.size(); ++s)
      for (std::size_t k = 0; k < toIndex.size(); ++k) m[s][k] = distinct[fromIndex[s]][toIndex[k]];
    return m;
  }

  // For each strategy, the index in `specs` of its output (or input) `slot`.
  static std::vector<int> distinctSpecs(const std::vector<Strategy>& strategies, std::size_t slot,
                                        bool output, std::vector<ShardingSpec>& specs) {
    std::vector<int> index;
    for (const Strategy& s : strategies) {
      const ShardingSpec& spec = output ? s.outputs[slot] : s.inputs[slot];
      auto it = std::find(specs.begin(), specs.end(), spec);
      if (it == specs.end()) it = specs.insert(specs.end(), spec);
      index.push_back(static_cast<int>(it - specs.begin()));
    }
    return index;
  }

  void fillResult(const std::vector<OpId>& rep, const ShardingSolution& solution,
                  IntraOpResult& r) {
    r.objective = solution.objective;
    r.optimal = solution.optimal;
    r.lowerBound = solution.lowerBound;
    r.graphOps = g_.ops().size();
    r.problemNodes = problem_.nodes.size();
    r.problemEdges = problem_.edges.size();
    r.residualNodes = solution.residualNodes;
    for (const auto& s : strategies_) r.strategies += s.size();
    for (OpId id = 0; id < g_.ops().size(); ++id) r.ops.push_back(opResult(id, rep, solution, r));
    for (std::size_t e = 0; e < problem_.edges.size(); ++e) {
      const ShardingEdge& edge = problem_.edges[e];
      r.resharding += edge.costs[solution.choice[edge.from]][solution.choice[edge.to]];
    }
  }

  OpSharding opResult(OpId id, const std::vector<OpId>& rep, const ShardingSolution& solution,
                      IntraOpResult& r) {
    int node = nodeOf_[id];
    int k = solution.choice[node];
    const Strategy& s = strategies_[node][k];
    OpSharding o;
    o.op = id;
    o.representative = rep[id];
    o.chosen = k;
    o.strategy = s.name;
    o.inputs = s.inputs;
    o.outputs = s.outputs;
    o.parameterSync = s.parameterSync;
    o.communication = s.communication + s.parameterSync * (1 - options_.parameterSyncWeight);
    o.parallelism = s.parallelism;
    o.computeTime = computeTime(id, s.parallelism);
    o.computePenalty = ownCost_[node][k] - s.communication;
    for (std::size_t a = 0; a < strategies_[node].size(); ++a) {
      o.alternatives.push_back(
          {strategies_[node][a].name, ownCost_[node][a], solution.alternatives[node][a]});
    }
    r.communication += o.communication;
    r.parameterSync += o.parameterSync;
    addGradientSync(id, s, r);
    r.computePenalty += o.computePenalty;
    r.computeTime += o.computeTime;
    if (g_.op(id).kind == ir::OpKind::Parameter) {
      r.memory += parameterBreakdown(id, s);
    } else {
      r.memory.activations += memoryOf(id, s);
    }
    return o;
  }

  const ir::Graph& g_;
  const ir::LogicalMesh& mesh_;
  const ir::DeviceSpec& device_;
  const IntraOpOptions& options_;
  MemoryOptions memory_;
  std::optional<FusedKernels> fused_;  // the device's fused kernels, when it has them
  std::vector<bool> needs_;
  ShardingProblem problem_;
  std::vector<int> nodeOf_;     // op -> problem node
  std::vector<OpId> nodeOp_;    // problem node -> representative op
  std::vector<std::vector<Strategy>> strategies_;
  std::vector<std::vector<double>> ownCost_;  // per node, per strategy, one copy
};

}  // namespace

IntraOpResult solveIntraOp(const ir::Graph& forward, const ir::LogicalMesh& mesh,
                           const ir::DeviceSpec& device, const IntraOpOptions& options) {
  return ProblemBuilder(forward, mesh, device, options).run();
}

}  // namespace meshflow::passes
