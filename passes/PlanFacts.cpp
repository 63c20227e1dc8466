#include "passes/PlanFacts.h"

#include <set>
#include <string>
#include <variant>

namespace meshflow::passes {
namespace {

// Product of a tensor's constant dimensions past the first (the batch's).
std::int64_t perSample(const ir::TensorType& type) {
  std::int64_t n = 1;
  for (std::size_t d = 1; d < type.shape.size(); ++d) n *= type.shape[d].value;
  return n;
}

std::string precisionOf(ir::DType dtype) {
  if (dtype == ir::DType::F16) return "fp16";
  if (dtype == ir::DType::BF16) return "bf16";
  return "fp32";
}

}  // namespace

ir::ModelFacts modelFacts(const ir::Graph& forward) {
  ir::ModelFacts facts;
  std::set<std::string> blocks;
  bool precisionSeen = false;
  for (const ir::Op& op : forward.ops()) {
    if (op.kind == ir::OpKind::Parameter && !precisionSeen && !op.outputs.empty()) {
      facts.precision = precisionOf(forward.value(op.outputs[0]).type.dtype);
      precisionSeen = true;
    }
    if (op.kind == ir::OpKind::Embedding && facts.sequence == 0 && op.inputs.size() == 2)
      facts.sequence = perSample(forward.value(op.inputs[1]).type);
    if (op.kind != ir::OpKind::SplitHeads || op.inputs.empty()) continue;
    blocks.insert(op.scope.substr(0, op.scope.find('.')));
    const ir::TensorType& x = forward.value(op.inputs[0]).type;
    auto heads = op.attrs.find("heads");
    if (facts.heads == 0 && heads != op.attrs.end() &&
        std::holds_alternative<std::int64_t>(heads->second))
      facts.heads = std::get<std::int64_t>(heads->second);
    if (facts.hidden == 0 && x.rank() == 3) {
      facts.hidden = x.shape[2].value;
      if (facts.sequence == 0) facts.sequence = x.shape[1].value;
    }
  }
  facts.blocks = static_cast<std::int64_t>(blocks.size());
  return facts;
}

}  // namespace meshflow::passes
