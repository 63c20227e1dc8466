#include "ir/PlanFile.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "ir/JsonReader.h"

namespace meshflow::ir {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "meshflow-plan";

json linkToJson(const LinkSpec& link) {
  return {{"bandwidth_bytes_per_s", link.bandwidth}, {"latency_s", link.latency}};
}

json clusterToJson(const Cluster& c) {
  return {{"nodes", c.nodes},
          {"devices_per_node", c.devicesPerNode},
          {"device",
           {{"name", c.device.name},
            {"memory_bytes", c.device.memoryBytes},
            {"peak_flops", c.device.peakFlops},
            {"memory_bandwidth_bytes_per_s", c.device.memoryBandwidth},
            {"vector_flops", c.device.vectorFlops},
            {"kernel_latency_s", c.device.kernelLatency},
            {"fused_kernels", c.device.fusedKernels}}},
          {"intra_node", linkToJson(c.intraNode)},
          {"inter_node", linkToJson(c.interNode)},
          {"host_cores", c.hostCores}};
}

double positive(const JsonReader& r) {
  double value = r.number();
  if (!(value > 0)) r.fail("expected a positive number");
  return value;
}

double nonNegative(const JsonReader& r) {
  double value = r.number();
  if (!(value >= 0)) r.fail("expected a number >= 0");
  return value;
}

LinkSpec linkFromJson(const JsonReader& r) {
  r.object({"bandwidth_bytes_per_s", "latency_s"});
  return {positive(r.at("bandwidth_bytes_per_s")), nonNegative(r.at("latency_s"))};
}

std::int64_t count(const JsonReader& r) {
  std::int64_t n = r.integer();
  if (n < 1) r.fail("expected a count >= 1");
  return n;
}

Cluster clusterFromJson(const JsonReader& r) {
  r.object({"nodes", "devices_per_node", "device", "intra_node", "inter_node", "host_cores"});
  Cluster c;
  c.nodes = count(r.at("nodes"));
  c.devicesPerNode = count(r.at("devices_per_node"));
  // A plan numbers its devices with int.
  constexpr std::int64_t kMaxDevices = std::numeric_limits<int>::max();
  if (c.nodes > kMaxDevices / c.devicesPerNode)
    r.at("nodes").fail(fmt::format("{} nodes of {} devices are more than the {} devices a plan can number",
                                   c.nodes, c.devicesPerNode, kMaxDevices));
  JsonReader d = r.at("device").object({"name", "memory_bytes", "peak_flops",
                                        "memory_bandwidth_bytes_per_s", "vector_flops",
                                        "kernel_latency_s", "fused_kernels"});
  c.device.name = d.at("name").string();
  c.device.memoryBytes = positive(d.at("memory_bytes"));
  c.device.peakFlops = positive(d.at("peak_flops"));
  c.device.memoryBandwidth = positive(d.at("memory_bandwidth_bytes_per_s"));
  c.device.vectorFlops = nonNegative(d.at("vector_flops"));
  c.device.kernelLatency = nonNegative(d.at("kernel_latency_s"));
  // Optional: files written before the field existed ran every op on its own.
  if (d.has("fused_kernels")) c.device.fusedKernels = d.at("fused_kernels").boolean();
  c.intraNode = linkFromJson(r.at("intra_node"));
  c.interNode = linkFromJson(r.at("inter_node"));
  c.hostCores = r.at("host_cores").integer();
  if (c.hostCores < 0) r.at("host_cores").fail("expected a count >= 0");
  return c;
}

// Every stage's devices must be in the cluster the file names.
void checkDevices(const JsonReader& plan, const Plan& p, const Cluster& c) {
  for (std::size_t s = 0; s < p.stages.size(); ++s)
    for (std::size_t i = 0; i < p.stages[s].devices.size(); ++i) {
      int d = p.stages[s].devices[i];
      if (d < 0 || d >= c.deviceCount())
        plan.at("stages").at(s).at("devices").at(i).fail(fmt::format(
            "device {} is not in the cluster's {} devices", d, c.deviceCount()));
    }
}

}  // namespace

json planFileToJson(const PlanFile& file) {
  return {{"format", kFormat},
          {"version", kPlanFileVersion},
          {"model", file.model},
          {"cluster", clusterToJson(file.cluster)},
          {"plan", planToJson(file.plan)}};
}

PlanFile planFileFromJson(const json& j) {
  JsonReader root(j, "");
  if (j.is_object() && !j.contains("format") && j.contains("stages"))
    root.fail(
        "a plan's JSON alone, without the model and cluster it was made for (what planToJson "
        "writes); p.save(path) and `meshflow plan --json` write the plan file load_plan reads");
  if (!j.is_object() || !j.contains("format"))
    root.fail(fmt::format(
        "not a saved plan: no \"format\": \"{}\" (p.save(path) and `meshflow plan --json` "
        "write one)",
        kFormat));
  if (root.at("format").string() != kFormat)
    root.at("format").fail(fmt::format("expected \"{}\", got \"{}\"", kFormat,
                                       root.at("format").string()));
  std::int64_t version = root.at("version").integer();
  if (version != kPlanFileVersion)
    root.at("version").fail(fmt::format(
        "version {} is not one this meshflow reads (it reads version {}); save the plan again "
        "with this meshflow",
        version, kPlanFileVersion));
  root.object({"format", "version", "model", "cluster", "plan"});
  PlanFile file;
  file.model = root.at("model").string();
  file.cluster = clusterFromJson(root.at("cluster"));
  file.plan = planFromJson(root.at("plan"));
  if (file.plan.stages.empty()) root.at("plan").at("stages").fail("expected at least one stage");
  checkDevices(root.at("plan"), file.plan, file.cluster);
  return file;
}

}  // namespace meshflow::ir
