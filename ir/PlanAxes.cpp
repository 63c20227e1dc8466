#include "ir/PlanAxes.h"

#include <algorithm>
#include <set>

namespace meshflow::ir {
namespace {

// The mesh axes a spec splits tensor dimension `dim` over (none when the
// spec does not parse or has no such dimension).
MeshAxes splitOf(const std::string& text, std::size_t dim) {
  try {
    ShardingSpec spec = ShardingSpec::parse(text);
    return dim < spec.rank() ? spec.dim(dim) : MeshAxes::kNone;
  } catch (const ShardingParseError&) {
    return MeshAxes::kNone;
  }
}

std::size_t rankOf(const std::string& text) {
  try {
    return ShardingSpec::parse(text).rank();
  } catch (const ShardingParseError&) {
    return 0;
  }
}

// How many of a stage's ops split something over each mesh axis.
struct AxisCounts {
  int activations = 0;  // [batch, sequence, hidden] outputs of compute ops
  int parameters = 0;
  std::array<int, 2> batch{}, weights{}, inputBatch{};
  std::array<bool, 2> experts{}, sequence{};

  void add(MeshAxes axes, std::array<int, 2>& counts) {
    for (int a = 0; a < 2; ++a)
      if (hasAxis(axes, a)) ++counts[static_cast<std::size_t>(a)];
  }
  void mark(MeshAxes axes, std::array<bool, 2>& flags) {
    for (int a = 0; a < 2; ++a)
      if (hasAxis(axes, a)) flags[static_cast<std::size_t>(a)] = true;
  }

  void count(const OpStrategy& op) {
    const std::string& out = op.outputs[0];
    const std::size_t rank = rankOf(out);
    if (op.kind == "input") {
      add(splitOf(out, 0), inputBatch);
    } else if (op.kind == "parameter") {
      ++parameters;
      // A stacked [experts, ...] parameter split along its experts.
      if (rank == 3) mark(splitOf(out, 0), experts);
      MeshAxes split = MeshAxes::kNone;
      for (std::size_t d = rank == 3 ? 1 : 0; d < rank; ++d) split = split | splitOf(out, d);
      add(split, weights);
    } else if (rank == 3 && op.kind != "moe_dispatch") {
      ++activations;
      add(splitOf(out, 0), batch);
      // Megatron's sequence parallelism: the layer norms' sequence split.
      if (op.kind == "layer_norm") mark(withoutAxes(splitOf(out, 1), splitOf(out, 0)), sequence);
    }
  }
};

}  // namespace

std::string AxisRoles::text() const {
  if (size <= 1) return "-";
  std::string out;
  auto add = [&](bool on, const char* name) {
    if (on) out += (out.empty() ? "" : "+") + std::string(name);
  };
  add(data, "data");
  add(tensor, "tensor");
  add(sequence, "sequence");
  add(expert, "expert");
  return out.empty() ? "replicated" : out;
}

std::array<AxisRoles, 2> axisRoles(const PlanStage& stage) {
  std::array<AxisRoles, 2> roles;
  roles[0].size = stage.logicalMesh[0];
  roles[1].size = stage.logicalMesh[1];
  bool leaves = std::any_of(stage.strategies.begin(), stage.strategies.end(), [](const OpStrategy& op) {
    return op.kind == "input" || op.kind == "parameter";
  });
  if (!leaves) {
    // A plan built by hand without its leaves' layouts: the mesh's convention.
    roles[0].data = roles[0].size > 1;
    roles[1].tensor = roles[1].size > 1;
    return roles;
  }
  AxisCounts c;
  for (const OpStrategy& op : stage.strategies)
    if (!op.outputs.empty()) c.count(op);
  for (std::size_t a = 0; a < 2; ++a) {
    // Most activations split their batch over it (a stage without any:
    // its inputs do); a quarter of its parameters or more are split over it.
    roles[a].data = c.activations > 0 ? 2 * c.batch[a] >= c.activations && c.batch[a] > 0
                                      : c.inputBatch[a] > 0;
    roles[a].tensor = c.weights[a] > 0 && 4 * c.weights[a] >= c.parameters;
    roles[a].expert = c.experts[a];
    roles[a].sequence = c.sequence[a];
  }
  return roles;
}

std::string axesText(const PlanStage& stage) {
  std::array<AxisRoles, 2> roles = axisRoles(stage);
  if (roles[0].size <= 1 && roles[1].size <= 1) return "-";
  if (roles[0].size <= 1) return roles[1].text();
  if (roles[1].size <= 1) return roles[0].text();
  return roles[0].text() + " x " + roles[1].text();
}

int blocksOf(const PlanStage& stage) {
  std::set<std::string> scopes;
  for (const OpStrategy& op : stage.strategies)
    if (op.kind == "split_heads") scopes.insert(op.scope.substr(0, op.scope.find('.')));
  return static_cast<int>(scopes.size());
}

std::int64_t degreeOf(const std::array<AxisRoles, 2>& roles, bool AxisRoles::*role) {
  std::int64_t degree = 1;
  for (const AxisRoles& axis : roles)
    if (axis.*role) degree *= axis.size;
  return degree;
}

}  // namespace meshflow::ir
