// What each mesh axis of a stage carries, read from the strategies the planner
// chose rather than from the mesh's shape: a (1, 2) mesh whose matmuls split
// the batch and replicate the weights is data parallelism, not tensor
// parallelism (docs/planning.md, "What each axis carries").
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "ir/Plan.h"

namespace meshflow::ir {

/// The kinds of parallelism one mesh axis carries, by what most of the
/// stage's ops do with it (an embedding that splits its table over the data
/// axis does not make it a tensor axis).
struct AxisRoles {
  /// Most [batch, sequence, hidden] activations split their batch over it (a
  /// stage without such activations: an input's batch is split over it).
  bool data = false;
  /// A quarter or more of the parameters are split over it (experts aside).
  bool tensor = false;
  /// A layer norm's [batch, sequence, hidden] output splits its sequence over it.
  bool sequence = false;
  /// A stacked [experts, ...] parameter splits its experts over it.
  bool expert = false;
  std::int64_t size = 1;  ///< Devices along the axis.

  /// "data", "tensor+sequence", "replicated" (the axis computes the same on
  /// each device), "-" for an axis of one device.
  std::string text() const;
  bool operator==(const AxisRoles&) const = default;
};

/// Both axes of `stage`'s logical mesh. A stage whose strategies hold no
/// input or parameter (a plan built by hand) gets the mesh's convention: axis
/// 0 data, axis 1 tensor.
std::array<AxisRoles, 2> axisRoles(const PlanStage& stage);

/// "data × tensor+sequence": both axes, or one when the other has one device.
std::string axesText(const PlanStage& stage);

/// The transformer blocks a stage holds: the top-level scopes of its
/// attention (split_heads) ops; 0 when its strategies show none.
int blocksOf(const PlanStage& stage);

/// Devices along the axes that carry a role (the product of their sizes).
std::int64_t degreeOf(const std::array<AxisRoles, 2>& roles, bool AxisRoles::*role);

}  // namespace meshflow::ir
