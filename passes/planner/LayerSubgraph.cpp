#include "passes/planner/LayerSubgraph.h"

#include <fmt/format.h>

#include <map>

#include "ir/GraphText.h"

namespace meshflow::passes {
namespace {

bool isFloating(ir::DType d) {
  return d == ir::DType::F32 || d == ir::DType::F16 || d == ir::DType::BF16;
}

class Extractor {
 public:
  Extractor(const ir::Graph& g, const std::vector<int>& layerOfOp, int first, int end)
      : g_(g), layerOf_(layerOfOp), first_(first), end_(end) {}

  LayerSubgraph run() {
    for (ir::OpId id = 0; id < g_.ops().size(); ++id) {
      if (inRange(id)) copy(id);
    }
    return std::move(out_);
  }

 private:
  bool inRange(ir::OpId id) const { return layerOf_[id] >= first_ && layerOf_[id] < end_; }

  void copy(ir::OpId id) {
    ir::Op op = g_.op(id);
    for (ir::ValueId& v : op.inputs) v = localValue(v);
    std::vector<ir::TensorType> types;
    for (ir::ValueId v : g_.op(id).outputs) types.push_back(g_.value(v).type);
    ir::OpId local = out_.graph.addOp(std::move(op), types);
    out_.sourceOp.push_back(id);
    const auto& outs = g_.op(id).outputs;
    for (std::size_t o = 0; o < outs.size(); ++o) {
      local_[outs[o]] = out_.graph.op(local).outputs[o];
      noteSource(out_.graph.op(local).outputs[o], outs[o]);
    }
  }

  ir::ValueId localValue(ir::ValueId v) {
    auto it = local_.find(v);
    if (it != local_.end()) return it->second;
    // Produced by an op outside the range: the layer receives it as an input.
    const ir::ValueInfo& info = g_.value(v);
    ir::Op input{ir::OpKind::Input, {}, {}, {{"name", std::string("boundary")}}, "", {}, {}, {}};
    if (isFloating(info.type.dtype)) input.attrs["requires_grad"] = std::int64_t{1};
    ir::OpId local = out_.graph.addOp(std::move(input), {info.type});
    out_.sourceOp.push_back(info.producer);
    ir::ValueId value = out_.graph.op(local).outputs[0];
    out_.graph.value(value).name = "boundary";
    local_[v] = value;
    noteSource(value, v);
    return value;
  }

  void noteSource(ir::ValueId local, ir::ValueId source) {
    if (out_.sourceValue.size() <= local) out_.sourceValue.resize(local + 1);
    out_.sourceValue[local] = source;
  }

  const ir::Graph& g_;
  const std::vector<int>& layerOf_;
  int first_, end_;
  LayerSubgraph out_;
  std::map<ir::ValueId, ir::ValueId> local_;
};

}  // namespace

LayerSubgraph layerSubgraph(const ir::Graph& graph, const std::vector<int>& layerOfOp,
                            int firstLayer, int endLayer) {
  return Extractor(graph, layerOfOp, firstLayer, endLayer).run();
}

std::string graphSignature(const ir::Graph& graph) {
  std::string s;
  for (const ir::Op& op : graph.ops()) {
    s += ir::opName(op.kind);
    for (const auto& [key, value] : op.attrs) {
      if (key == "name" || key == "seed") continue;
      s += "|" + key + "=" + ir::attributeText(value);
    }
    for (ir::ValueId v : op.inputs) s += fmt::format("|%{}", v);
    for (ir::ValueId v : op.outputs) s += "|" + graph.value(v).type.text();
    s += "\n";
  }
  return s;
}

}  // namespace meshflow::passes
