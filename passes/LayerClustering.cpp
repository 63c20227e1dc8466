#include "passes/LayerClustering.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "ir/OpCost.h"

namespace meshflow::passes {
namespace {

bool isLeaf(ir::OpKind kind) {
  return kind == ir::OpKind::Input || kind == ir::OpKind::Parameter || kind == ir::OpKind::Constant;
}

std::string firstScopeSegment(const std::string& scope) { return scope.substr(0, scope.find('.')); }

// The graph seen as the sequence of its compute ops: leaves are folded into
// their first consumer, so a value's position is where it becomes available.
struct OpSequence {
  std::vector<ir::OpId> ops;                         // compute ops in graph order
  std::vector<double> flops;                         // per position, forward + backward
  std::vector<int> valuePos;                         // per value, -1 for an unread leaf
  std::vector<std::vector<ir::ValueId>> producedAt;  // per position, values that appear there
  std::vector<std::vector<ir::ValueId>> inputsAt;    // per position, the op's distinct inputs
  std::vector<double> valueBytes;
};

OpSequence makeSequence(const ir::Graph& graph, std::int64_t batch) {
  OpSequence seq;
  std::vector<int> posOfOp(graph.ops().size(), -1);
  for (ir::OpId id = 0; id < graph.ops().size(); ++id) {
    const ir::Op& op = graph.op(id);
    if (op.phase != ir::Phase::Forward)
      throw LayerClusteringError(
          fmt::format("layer clustering expects a forward graph, but op {} ({}) is in phase {}", id,
                      ir::opName(op.kind), ir::phaseName(op.phase)));
    if (isLeaf(op.kind)) continue;
    posOfOp[id] = static_cast<int>(seq.ops.size());
    seq.ops.push_back(id);
    ir::OpCost cost = ir::opCost(graph, id, batch);
    seq.flops.push_back(cost.flops + cost.backwardFlops);
  }
  seq.valuePos.assign(graph.valueCount(), -1);
  seq.valueBytes.assign(graph.valueCount(), 0);
  seq.producedAt.resize(seq.ops.size());
  seq.inputsAt.resize(seq.ops.size());
  for (ir::ValueId v = 0; v < graph.valueCount(); ++v) {
    const ir::TensorType& t = graph.value(v).type;
    seq.valueBytes[v] = double(t.elements(batch)) * double(ir::dtypeBytes(t.dtype));
    seq.valuePos[v] = posOfOp[graph.value(v).producer];
  }
  for (std::size_t p = 0; p < seq.ops.size(); ++p) {
    for (ir::ValueId v : graph.op(seq.ops[p]).inputs) {
      // A leaf becomes available where it is first read.
      if (seq.valuePos[v] < 0 && isLeaf(graph.op(graph.value(v).producer).kind))
        seq.valuePos[v] = static_cast<int>(p);
      auto& in = seq.inputsAt[p];
      if (std::find(in.begin(), in.end(), v) == in.end()) in.push_back(v);
    }
  }
  for (ir::ValueId v = 0; v < graph.valueCount(); ++v)
    if (seq.valuePos[v] >= 0) seq.producedAt[seq.valuePos[v]].push_back(v);
  return seq;
}

// Bytes a group of positions [i, k) reads from before i, kept up to date while
// the group grows to the left one position at a time (Alpa's C(i, k)).
class IncomingBytes {
 public:
  explicit IncomingBytes(const OpSequence& seq) : seq_(seq), mark_(seq.valuePos.size(), -1) {}

  void reset(int k) {
    k_ = k;
    bytes_ = 0;
  }
  // Adds position i (the group was [i + 1, k)).
  void extendTo(int i) {
    for (ir::ValueId v : seq_.producedAt[i])
      if (mark_[v] == k_) bytes_ -= seq_.valueBytes[v];  // now produced inside
    for (ir::ValueId v : seq_.inputsAt[i])
      if (seq_.valuePos[v] < i && mark_[v] != k_) {
        mark_[v] = k_;
        bytes_ += seq_.valueBytes[v];
      }
  }
  double bytes() const { return bytes_; }

 private:
  const OpSequence& seq_;
  std::vector<int> mark_;
  int k_ = -1;
  double bytes_ = 0;
};

// A DP value: total boundary bytes, then the FLOP imbalance. Both add up over
// layers, so comparing them lexicographically keeps the DP exact.
struct Score {
  double bytes = std::numeric_limits<double>::infinity();
  double imbalance = 0;
  bool operator<(const Score& o) const {
    if (bytes != o.bytes) return bytes < o.bytes;
    return imbalance < o.imbalance;
  }
};

struct Cut {
  std::vector<int> starts;  // starts[l]: first position of layer l; starts[L] = K
};

// G(k, r) over positions, cuts allowed only where `cutAllowed`; nullopt when no
// split meets the FLOP bounds.
std::optional<Cut> solve(const OpSequence& seq, int layers, double tolerance,
                         const std::vector<bool>& cutAllowed) {
  const int k = static_cast<int>(seq.ops.size());
  double total = 0;
  for (double f : seq.flops) total += f;
  const double avg = total / layers;
  const double slack = 1e-9 * avg;
  const double lo = (1 - tolerance) * avg - slack, hi = (1 + tolerance) * avg + slack;

  // best[r][e]: positions [0, e) in r layers; from[r][e]: the start of the last one.
  std::vector<std::vector<Score>> best(layers + 1, std::vector<Score>(k + 1));
  std::vector<std::vector<int>> from(layers + 1, std::vector<int>(k + 1, -1));
  best[0][0] = Score{0, 0};
  IncomingBytes incoming(seq);
  for (int e = 1; e <= k; ++e) {
    if (e < k && !cutAllowed[e]) continue;
    incoming.reset(e);
    double flops = 0;
    for (int i = e - 1; i >= 0; --i) {
      incoming.extendTo(i);
      flops += seq.flops[i];
      if (flops > hi) break;
      if (i > 0 && !cutAllowed[i]) continue;
      if (flops < lo || flops <= 0) continue;
      double dev = (flops - avg) / avg;
      for (int r = 1; r <= layers; ++r) {
        const Score& prev = best[r - 1][i];
        if (prev.bytes == std::numeric_limits<double>::infinity()) continue;
        Score candidate{prev.bytes + incoming.bytes(), prev.imbalance + dev * dev};
        if (candidate < best[r][e]) {
          best[r][e] = candidate;
          from[r][e] = i;
        }
      }
    }
  }
  if (from[layers][k] < 0) return std::nullopt;
  Cut cut;
  cut.starts.assign(layers + 1, k);
  for (int r = layers, e = k; r > 0; --r) {
    e = from[r][e];
    cut.starts[r - 1] = e;
  }
  return cut;
}

LayerClustering describe(const ir::Graph& graph, const OpSequence& seq, const Cut& cut) {
  LayerClustering result;
  const int layers = static_cast<int>(cut.starts.size()) - 1;
  result.layerOfOp.assign(graph.ops().size(), 0);
  std::vector<int> layerOfPos(seq.ops.size());
  IncomingBytes incoming(seq);
  for (int l = 0; l < layers; ++l) {
    int first = cut.starts[l], end = cut.starts[l + 1];
    LayerInfo info;
    info.firstOp = seq.ops[first];
    info.endOp = seq.ops[end - 1] + 1;
    incoming.reset(end);
    for (int p = end - 1; p >= first; --p) {
      incoming.extendTo(p);
      info.flops += seq.flops[p];
      layerOfPos[p] = l;
      result.layerOfOp[seq.ops[p]] = l;
    }
    info.boundaryBytes = incoming.bytes();
    result.totalBoundaryBytes += info.boundaryBytes;
    result.layers.push_back(info);
  }
  // Leaves join their first consumer's layer; a leaf nobody reads stays in layer 0.
  for (ir::ValueId v = 0; v < graph.valueCount(); ++v) {
    ir::OpId producer = graph.value(v).producer;
    if (isLeaf(graph.op(producer).kind) && seq.valuePos[v] >= 0)
      result.layerOfOp[producer] = layerOfPos[seq.valuePos[v]];
  }
  return result;
}

}  // namespace

LayerClustering clusterLayers(const ir::Graph& graph, const LayerClusteringOptions& options) {
  if (options.layers < 1)
    throw LayerClusteringError(fmt::format("layers: expected at least 1, got {}", options.layers));
  if (options.tolerance < 0)
    throw LayerClusteringError(fmt::format("tolerance: expected δ ≥ 0, got {}", options.tolerance));
  OpSequence seq = makeSequence(graph, options.batch);
  int withFlops = static_cast<int>(
      std::count_if(seq.flops.begin(), seq.flops.end(), [](double f) { return f > 0; }));
  if (options.layers > withFlops)
    throw LayerClusteringError(
        fmt::format("cannot split the graph into {} layers: only {} of its {} compute ops "
                    "carry FLOPs, and every layer needs one",
                    options.layers, withFlops, seq.ops.size()));

  const std::size_t k = seq.ops.size();
  if (options.useScopes) {
    std::vector<bool> atScopeBoundary(k, false);
    for (std::size_t p = 1; p < k; ++p)
      atScopeBoundary[p] = firstScopeSegment(graph.op(seq.ops[p]).scope) !=
                           firstScopeSegment(graph.op(seq.ops[p - 1]).scope);
    if (auto cut = solve(seq, options.layers, options.tolerance, atScopeBoundary)) {
      LayerClustering result = describe(graph, seq, *cut);
      result.fromScopes = true;
      result.tolerance = options.tolerance;
      return result;
    }
  }
  // Relaxing δ terminates: once (1 − δ) ≤ 0 and (1 + δ)·avg ≥ the total, any split
  // giving every layer an op with FLOPs qualifies, and the count check ensures one.
  std::vector<bool> anywhere(k, true);
  for (double tolerance = options.tolerance;; tolerance = std::max(2 * tolerance, 0.125)) {
    if (auto cut = solve(seq, options.layers, tolerance, anywhere)) {
      LayerClustering result = describe(graph, seq, *cut);
      result.tolerance = tolerance;
      return result;
    }
  }
}

}  // namespace meshflow::passes
