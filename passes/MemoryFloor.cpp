#include "passes/MemoryFloor.h"

#include <chrono>
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
                                       PlanRequest request, double precision, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  request.simulateStep = nullptr;
  double failed = request.memoryPerDevice.value_or(cluster.device.memoryBytes);
  // Far beyond any device: the fastest plan's peak bounds the floor.
  std::optional<double> unbounded = peakUnder(forward, cluster, request, 1e30);
  if (!unbounded) return std::nullopt;
  MemoryFloor floor{*unbounded, std::min(failed, *unbounded)};
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  while (floor.fits > floor.tooSmall * (1 + precision) && elapsed() < seconds) {
    double mid = std::sqrt(floor.fits * std::max(floor.tooSmall, 1.0));
    if (std::optional<double> peak = peakUnder(forward, cluster, request, mid))
      floor.fits = std::min(*peak, mid);
    else
      floor.tooSmall = mid;
  }
  return floor;
}

}  // namespace meshflow::passes
