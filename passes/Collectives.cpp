#include "passes/Collectives.h"

#include <algorithm>
#include <limits>

namespace meshflow::passes {

namespace {

using ir::LogicalMesh;
using ir::MeshAxes;
using ir::ShardingSpec;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Alpa (ClusterEnvironment) charges a collective spanning both mesh dimensions
// with the slower dimension's α and β: every ring step crosses the slow link.
struct Link {
  double alpha = 0.0;
  double beta = 0.0;
  double n = 1.0;
};

Link linkOf(MeshAxes axes, const LogicalMesh& mesh) {
  Link link;
  link.n = static_cast<double>(mesh.devices(axes));
  for (int d = 0; d < 2; ++d) {
    if (!ir::hasAxis(axes, d)) continue;
    link.alpha = std::max(link.alpha, mesh.alpha[d]);
    link.beta = std::max(link.beta, mesh.beta[d]);
  }
  return link;
}

// The role one mesh dimension plays in a spec: unused, carrying a partial sum, or
// splitting tensor dimension `dim` at `position` (0 for a sole or major split,
// 1 for the minor half of S01).
struct AxisRole {
  enum Kind { kUnused, kPartial, kSplit } kind = kUnused;
  size_t dim = 0;
  int position = 0;
};

AxisRole roleOf(const ShardingSpec& spec, int axis) {
  if (ir::hasAxis(spec.partial(), axis)) return {AxisRole::kPartial};
  for (size_t i = 0; i < spec.rank(); ++i) {
    MeshAxes d = spec.dim(i);
    if (!ir::hasAxis(d, axis)) continue;
    int position = (d == MeshAxes::k01 && axis == 1) ? 1 : 0;
    return {AxisRole::kSplit, i, position};
  }
  return {};
}

// The mesh axes splitting a tensor dimension, major first (no allocation: the
// planner prices every pair of strategies' specs through here).
struct AxisOrder {
  int axis[2] = {0, 0};
  int count = 0;
};

AxisOrder axisOrder(MeshAxes d) {
  AxisOrder order;
  for (int a = 0; a < 2; ++a) {
    if (ir::hasAxis(d, a)) order.axis[order.count++] = a;
  }
  return order;
}

// A split survives the conversion untouched only when every mesh axis before it
// on that tensor dimension survives too; otherwise the tiles move even if the
// axis keeps splitting the same dimension (S1 → S01 is a shuffle, S0 → S01 a slice).
bool splitKept(const ShardingSpec& from, const ShardingSpec& to, int axis) {
  AxisRole src = roleOf(from, axis);
  AxisRole dst = roleOf(to, axis);
  if (src.kind != AxisRole::kSplit || dst.kind != AxisRole::kSplit || src.dim != dst.dim) {
    return false;
  }
  const AxisOrder s = axisOrder(from.dim(src.dim));
  const AxisOrder t = axisOrder(to.dim(dst.dim));
  for (int p = 0; p <= src.position; ++p) {
    if (p >= t.count || s.axis[p] != t.axis[p]) return false;
  }
  return true;
}

// One collective step of a resharding, in the order the plan applies them.
enum class Step { kNone, kSlice, kReduceScatter, kAllToAll, kAllReduce, kAllGather };

Step stepFor(const ShardingSpec& from, const ShardingSpec& to, int axis, bool* impossible) {
  AxisRole src = roleOf(from, axis);
  AxisRole dst = roleOf(to, axis);
  if (dst.kind == AxisRole::kPartial) {
    // A reshard never creates a partial sum: that is an op's strategy, not a move.
    *impossible = src.kind != AxisRole::kPartial;
    return Step::kNone;
  }
  if (src.kind == AxisRole::kPartial) {
    return dst.kind == AxisRole::kSplit ? Step::kReduceScatter : Step::kAllReduce;
  }
  if (src.kind == AxisRole::kUnused) {
    return dst.kind == AxisRole::kSplit ? Step::kSlice : Step::kNone;
  }
  if (splitKept(from, to, axis)) return Step::kNone;
  return dst.kind == AxisRole::kSplit ? Step::kAllToAll : Step::kAllGather;
}

// Tensor dimensions that lose a split in the conversion: new splits on them can
// only be cut after the old tiles are reassembled. At most one a mesh axis.
struct DisturbedDims {
  size_t dim[2] = {0, 0};
  int count = 0;
  bool has(size_t d) const {
    for (int i = 0; i < count; ++i)
      if (dim[i] == d) return true;
    return false;
  }
};

DisturbedDims disturbedDims(const ShardingSpec& from, const ShardingSpec& to) {
  DisturbedDims disturbed;
  for (int axis = 0; axis < 2; ++axis) {
    AxisRole src = roleOf(from, axis);
    if (src.kind == AxisRole::kSplit && !splitKept(from, to, axis))
      disturbed.dim[disturbed.count++] = src.dim;
  }
  return disturbed;
}

class ReshardPlan {
 public:
  ReshardPlan(const ShardingSpec& from, const ShardingSpec& to, double totalBytes,
              const LogicalMesh& mesh)
      : from_(from), to_(to), mesh_(mesh) {
    deviceBytes_ = totalBytes / static_cast<double>(from.shardCount(mesh));
  }

  // Shrinking steps run first so later collectives move less data, except into a
  // tensor dimension whose old split must be undone first; growing steps run last.
  double cost() {
    bool impossible = false;
    for (int axis = 0; axis < 2; ++axis) steps_[axis] = stepFor(from_, to_, axis, &impossible);
    if (impossible) return kInfinity;
    const DisturbedDims disturbed = disturbedDims(from_, to_);
    shrink(disturbed, false);
    run(Step::kAllReduce, Collective::kAllReduce);
    run(Step::kAllToAll, Collective::kAllToAll);
    gather();
    shrink(disturbed, true);
    return cost_;
  }

 private:
  void shrink(const DisturbedDims& disturbed, bool disturbedPass) {
    for (int axis = 0; axis < 2; ++axis) {
      if (steps_[axis] != Step::kSlice && steps_[axis] != Step::kReduceScatter) continue;
      if (disturbed.has(roleOf(to_, axis).dim) != disturbedPass) continue;
      if (steps_[axis] == Step::kReduceScatter) add(Collective::kReduceScatter, axis);
      deviceBytes_ /= static_cast<double>(mesh_.shape[axis]);
    }
  }

  void run(Step step, Collective kind) {
    for (int axis = 0; axis < 2; ++axis) {
      if (steps_[axis] == step) add(kind, axis);
    }
  }

  // The minor axis is gathered first, so each gather reassembles contiguous tiles.
  void gather() {
    for (int axis = 1; axis >= 0; --axis) {
      if (steps_[axis] != Step::kAllGather) continue;
      deviceBytes_ *= static_cast<double>(mesh_.shape[axis]);
      add(Collective::kAllGather, axis);
    }
  }

  void add(Collective kind, int axis) {
    cost_ += collectiveCost(kind, deviceBytes_, ir::meshAxis(axis), mesh_);
  }

  const ShardingSpec& from_;
  const ShardingSpec& to_;
  const LogicalMesh& mesh_;
  Step steps_[2] = {Step::kNone, Step::kNone};
  double deviceBytes_ = 0.0;
  double cost_ = 0.0;
};

}  // namespace

double collectiveCost(Collective kind, double bytes, MeshAxes axes, const LogicalMesh& mesh) {
  Link link = linkOf(axes, mesh);
  double n = link.n;
  if (n <= 1.0) return 0.0;
  switch (kind) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1.0) / n * bytes * link.beta + 2.0 * (n - 1.0) * link.alpha;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      return (n - 1.0) / n * bytes * link.beta + (n - 1.0) * link.alpha;
    case Collective::kAllToAll:
      return (n - 1.0) / (n * n) * bytes * (n / 2.0) * link.beta + (n - 1.0) * link.alpha;
    case Collective::kBroadcast:
      return bytes * link.beta + (n - 1.0) * link.alpha;
  }
  return kInfinity;
}

double reshardingCost(const ShardingSpec& from, const ShardingSpec& to,
                      std::span<const int64_t> shape, double bytesPerElement,
                      const LogicalMesh& mesh) {
  if (!from.fits(shape, mesh) || !to.fits(shape, mesh)) return kInfinity;
  if (from == to) return 0.0;
  double elements = 1.0;
  for (int64_t d : shape) elements *= static_cast<double>(d);
  return ReshardPlan(from, to, elements * bytesPerElement, mesh).cost();
}

}  // namespace meshflow::passes
