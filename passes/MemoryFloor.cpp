#include "passes/MemoryFloor.h"

#include <cmath>
#include <string>

namespace meshflow::passes {
namespace {

struct Planned {
  double peak = 0;
  std::string description;
};

// The plan under `budget` bytes per device, or nothing.
std::optional<Planned> planUnder(const ir::Graph& forward, const ir::Cluster& cluster,
                                 PlanRequest request, double budget) {
  request.memoryPerDevice = budget;
  try {
    ir::Plan plan = planTraining(forward, cluster, request);
    return Planned{plan.peakMemoryBytes(), std::move(plan.description)};
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
  std::optional<Planned> plan = planUnder(forward, cluster, request, 1e30);
  if (!plan) return std::nullopt;
  double fits = std::max(plan->peak, failed);
  while (fits < 1e30 && !(plan = planUnder(forward, cluster, request, fits))) fits *= 1.25;
  MemoryFloor floor{fits, failed, {}, 0};
  for (int probe = 0; probe < probes && floor.fits > floor.tooSmall * (1 + precision); ++probe) {
    double mid = std::sqrt(floor.fits * std::max(floor.tooSmall, 1.0));
    if (auto under = planUnder(forward, cluster, request, mid)) {
      floor.fits = mid;
      plan = std::move(under);
    } else {
      floor.tooSmall = mid;
    }
  }
  if (plan) floor.plan = plan->description, floor.peak = plan->peak;
  return floor;
}

}  // namespace meshflow::passes
