// Descriptions the simulator tests share.
#pragma once

#include <vector>

#include "passes/PipelineDescription.h"

namespace meshflow::simtest {

/// A pipeline of `stages` ranks × `replicas` data-parallel replicas, each rank's mesh
/// `meshSizes[rank]` devices (1 when empty), numbered replica by replica, rank by
/// rank. Every stage gets the given per-microbatch times and no bytes.
inline passes::PipelineDescription pipeline(const char* kind, int stages, int microbatches,
                                            int chunks, double forward, double backward,
                                            double weight = 0, int replicas = 1,
                                            std::vector<int> meshSizes = {}) {
  passes::PipelineDescription description;
  description.schedule = kind;
  description.microbatches = microbatches;
  description.chunks = chunks;
  description.stages.resize(static_cast<size_t>(stages));
  int next = 0;
  for (int replica = 0; replica < replicas; ++replica) {
    for (int rank = 0; rank < stages; ++rank) {
      const int size = meshSizes.empty() ? 1 : meshSizes[static_cast<size_t>(rank)];
      std::vector<int> mesh;
      for (int k = 0; k < size; ++k) mesh.push_back(next++);
      description.stages[static_cast<size_t>(rank)].meshes.push_back(mesh);
    }
  }
  for (passes::StageDescription& stage : description.stages) {
    stage.forwardSeconds = forward;
    stage.backwardSeconds = backward;
    stage.weightGradSeconds = weight;
  }
  return description;
}

}  // namespace meshflow::simtest
