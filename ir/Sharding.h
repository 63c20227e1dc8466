// Sharding specs and logical meshes: the vocabulary of intra-operator parallelism.
//
// A ShardingSpec says, for one tensor on one 2-D logical mesh, how each tensor
// dimension is laid out (replicated, or split over mesh dimension 0, 1 or both)
// and over which mesh dimensions the tensor is still a partial sum. It is a value
// type in the manner of XLA's HloSharding: factories, a canonical string that
// parses back, validation against a shape and a mesh, equality and ordering.
//
// Canonical string: one token per tensor dimension, `R`, `S0`, `S1` or `S01`
// (split over both mesh dimensions, dimension 0 major), followed by `+P0`, `+P1`
// or `+P01` when the tensor is a partial sum over those mesh dimensions. A scalar
// (rank 0) is written `()`, so `()+P0` is a scalar partial sum. Examples: `S0R`,
// `RS1`, `S01R`, `RR+P1`, `S0R+P1`.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace meshflow::ir {

/// A set of logical-mesh dimensions, as a bit mask: bit 0 is mesh dimension 0,
/// bit 1 is mesh dimension 1.
enum class MeshAxes : uint8_t { kNone = 0, k0 = 1, k1 = 2, k01 = 3 };

constexpr MeshAxes operator|(MeshAxes a, MeshAxes b) {
  return static_cast<MeshAxes>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}
constexpr MeshAxes operator&(MeshAxes a, MeshAxes b) {
  return static_cast<MeshAxes>(static_cast<uint8_t>(a) & static_cast<uint8_t>(b));
}
/// The axes of `a` that are not in `b`.
constexpr MeshAxes withoutAxes(MeshAxes a, MeshAxes b) {
  return static_cast<MeshAxes>(static_cast<uint8_t>(a) & ~static_cast<uint8_t>(b) & 3);
}
/// The single mesh dimension `dim` (0 or 1) as a set.
constexpr MeshAxes meshAxis(int dim) { return dim == 0 ? MeshAxes::k0 : MeshAxes::k1; }
constexpr bool hasAxis(MeshAxes axes, int dim) {
  return (static_cast<uint8_t>(axes) & static_cast<uint8_t>(meshAxis(dim))) != 0;
}

/// A 2-D view of a submesh (shape a × b) with a latency α (seconds) and an inverse
/// bandwidth β (seconds per byte) for collectives along each mesh dimension.
struct LogicalMesh {
  std::array<int64_t, 2> shape{1, 1};
  std::array<double, 2> alpha{0.0, 0.0};
  std::array<double, 2> beta{0.0, 0.0};

  /// Number of devices in a collective group spanning `axes` (1 for kNone).
  int64_t devices(MeshAxes axes) const;
  int64_t size() const { return shape[0] * shape[1]; }

  bool operator==(const LogicalMesh&) const = default;
};

/// A malformed sharding-spec string; position() is the 0-based offset of the problem.
class ShardingParseError : public std::runtime_error {
 public:
  ShardingParseError(const std::string& message, size_t position);
  size_t position() const { return position_; }

 private:
  size_t position_;
};

class ShardingSpec {
 public:
  /// Every tensor dimension replicated, no partial sum.
  static ShardingSpec replicated(size_t rank);
  /// Tensor dimension `dim` split over `meshDims`; every other dimension replicated.
  static ShardingSpec split(size_t rank, size_t dim, MeshAxes meshDims);
  /// An explicit layout: one MeshAxes per tensor dimension, plus partial-sum axes.
  static ShardingSpec fromDims(std::vector<MeshAxes> dims, MeshAxes partial = MeshAxes::kNone);
  /// Parses the canonical string; throws ShardingParseError naming the position.
  static ShardingSpec parse(std::string_view text);

  size_t rank() const { return dims_.size(); }
  MeshAxes dim(size_t i) const { return dims_.at(i); }
  const std::vector<MeshAxes>& dims() const { return dims_; }
  MeshAxes partial() const { return partial_; }
  bool isReplicated() const;

  /// The same layout, a partial sum over `axes`.
  ShardingSpec withPartial(MeshAxes axes) const;

  std::string toString() const;

  /// Why this spec cannot describe a tensor of `shape` on `mesh` (a rank mismatch,
  /// a mesh dimension used twice, a dimension not divisible by its device count),
  /// or nullopt when it can.
  std::optional<std::string> validate(std::span<const int64_t> shape,
                                      const LogicalMesh& mesh) const;
  /// Whether validate finds nothing, without making its message (the
  /// planner's candidates and reshardings ask this many times over).
  bool fits(std::span<const int64_t> shape, const LogicalMesh& mesh) const;

  /// Number of pieces the tensor is cut into (product of the split mesh dims).
  int64_t shardCount(const LogicalMesh& mesh) const;

  auto operator<=>(const ShardingSpec&) const = default;
  bool operator==(const ShardingSpec&) const = default;

 private:
  std::vector<MeshAxes> dims_;
  MeshAxes partial_ = MeshAxes::kNone;
};

}  // namespace meshflow::ir
