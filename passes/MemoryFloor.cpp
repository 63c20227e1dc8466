#include "passes/MemoryFloor.h"

#include <cmath>

namespace meshflow::passes {
namespace {

// The peak of the plan under `budget` bytes per device, or nothing.
std::optional<double> peakUnder(const ir::Graph& forward, const ir::Cluster& cluster,
                                PlanRequest request, double budget) {
  request.memoryPerDevice = budget;
  try {
    return planTraining(forward, cluster, request).peakMemoryBytes();
  } catch (const PlanningError&) {
    return std::nullopt;
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<MemoryFloor> memoryFloor(const ir::Graph& forward, const ir::Cluster& cluster,
                                       PlanRequest request, double precision, int probes) {
  request.simulateStep = nullptr;
  double failed = request.memoryPerDevice.value_or(cluster.device.memoryBytes);
  // Far beyond any device: the fastest plan's peak bounds the floor; the
  // budget that plans must be one the planner accepts (near a budget it
  // prunes by an upper bound of the peak), so grow it until it does.
  std::optional<double> unbounded = peakUnder(forward, cluster, request, 1e30);
  if (!unbounded) return std::nullopt;
  double fits = std::max(*unbounded, failed);
  while (fits < 1e30 && !peakUnder(forward, cluster, request, fits)) fits *= 1.25;
  MemoryFloor floor{fits, failed};
  for (int probe = 0; probe < probes && floor.fits > floor.tooSmall * (1 + precision); ++probe) {
    double mid = std::sqrt(floor.fits * std::max(floor.tooSmall, 1.0));
    (peakUnder(forward, cluster, request, mid) ? floor.fits : floor.tooSmall) = mid;
  }
  return floor;
}

}  // namespace meshflow::passes
