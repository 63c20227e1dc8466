#include "runtime/sim/PlanSimulation.h"

#include "passes/Lowering.h"
#include "passes/PlanPipeline.h"
#include "runtime/sim/Simulator.h"

namespace meshflow::runtime::sim {

double simulatePlanStep(const ir::Plan& plan, const ir::Cluster& cluster) {
  const ir::Program program = passes::lowerPipeline(passes::describePipeline(plan, nullptr));
  return simulate(program, passes::simulatorOptions(cluster)).makespan;
}

}  // namespace meshflow::runtime::sim
