// Device and link specs of a cluster, and the logical meshes a submesh of it can
// be viewed as. The cost model reads the device spec (peak FLOP/s, memory and its
// bandwidth); the intra-op pass reads a LogicalMesh whose α and β per mesh
// dimension come from the links that dimension's collectives cross.
//
// Devices are numbered node-major: device d of a submesh of n nodes × m devices
// sits in node d / m. A logical view (a, b) of it (a·b = n·m) puts device d at mesh
// position (d / b, d % b): mesh dimension 1 runs over consecutive devices, mesh
// dimension 0 strides by b. A mesh dimension whose groups stay inside one node
// uses the intra-node link; one whose groups span nodes uses the inter-node link,
// whose bandwidth the node's concurrent groups along that dimension share.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/Sharding.h"

namespace meshflow::ir {

struct DeviceSpec {
  std::string name;
  double memoryBytes = 0;      ///< Device memory.
  double peakFlops = 0;        ///< Dense peak FLOP/s at the training precision.
  double memoryBandwidth = 0;  ///< Bytes per second to device memory.
  /// FLOP/s of the kernels that are not matrix products (element-wise ops,
  /// normalisation, reductions, losses), a peak like peakFlops: a GPU's CUDA
  /// cores beside its tensor cores, a CPU's vector loops beside its sgemm.
  /// 0 means peakFlops.
  double vectorFlops = 0;
  /// Seconds every kernel costs beyond its roofline time: a launch, or a CPU
  /// runtime's dispatch and output allocation. 0 means none.
  double kernelLatency = 0;
  /// The device's training stack fuses attention (FlashAttention), RMSNorm and
  /// SwiGLU's gate into one kernel each (passes/FusedKernels.h): their inner
  /// values cost no memory traffic and are not kept for the backward. False:
  /// every op runs as its own kernel, as meshflow's runtimes run them.
  bool fusedKernels = false;
};

struct LinkSpec {
  double bandwidth = 0;  ///< Bytes per second, one direction.
  double latency = 0;    ///< Seconds per message (the α of the α–β model).
};

struct Cluster {
  std::int64_t nodes = 1;
  std::int64_t devicesPerNode = 1;
  DeviceSpec device;
  /// Per device (NVLink per GPU).
  LinkSpec intraNode;
  /// Per node (the node's network interface), shared by the groups leaving it.
  LinkSpec interNode;
  /// Host cores the devices share (a virtual cpu cluster on one machine: its
  /// device threads take turns on the machine's cores); 0: every device has
  /// its own processor. Only the simulator and the cpu runtime read it.
  std::int64_t hostCores = 0;

  std::int64_t deviceCount() const { return nodes * devicesPerNode; }
};

/// An invalid submesh or view (does not fit the cluster, sizes do not multiply).
class ClusterError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The logical mesh of a submesh of `submesh` = (n nodes, m devices per node)
/// viewed as `view` = (a, b) with a·b = n·m: per mesh dimension, α = the latency
/// and β = 1 / bandwidth of the link its groups cross (the inter-node bandwidth
/// divided among the groups of that dimension that leave one node). Throws
/// ClusterError when the submesh does not fit the cluster or the view's size
/// differs from the submesh's.
LogicalMesh logicalMesh(const Cluster& cluster, std::array<std::int64_t, 2> submesh,
                        std::array<std::int64_t, 2> view);

/// Every 2-D view (a, b) of a submesh of `devices` devices, a ascending.
std::vector<std::array<std::int64_t, 2>> logicalViews(std::int64_t devices);

/// AWS p3.16xlarge nodes (Alpa's testbed; shared notes, reference/hardware.md):
/// 8 × V100-SXM2-16GB (125 TFLOP/s fp16, 900 GB/s), NVLink2 150 GB/s per GPU,
/// 25 Gb/s between nodes. Latencies: 5 µs on NVLink, 25 µs across the network.
Cluster p3_16xlarge(std::int64_t nodes);

}  // namespace meshflow::ir
