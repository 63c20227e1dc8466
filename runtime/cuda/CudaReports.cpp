#include "runtime/cuda/CudaReports.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "runtime/cuda/CudaKernels.h"

namespace meshflow::runtime::cuda {
namespace {

// "reshape 40, constant 16": the kinds of `counts` whose name `take` takes, in
// name order; adds their counts to `total`.
template <class Take>
std::string kindsOf(const std::map<std::string, std::int64_t>& counts, std::int64_t& total, Take take) {
  std::string text;
  for (const auto& [name, count] : counts) {
    total += count;
    if (take(name)) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", name, count);
  }
  return text;
}

// "device 0: 1234 ops on the GPU, 56 on the host (reshape 40, constant 16);
// fused: fused_bias_gelu 2, fused_softmax 2; widened to f32: add 4" (a fused
// group counts as one op; widened: GPU ops whose half operands went through
// f32 copies, OperandPath.h).
std::string opsSummary(int device, const CudaKernels& kernels) {
  std::int64_t onGpu = 0, onHost = 0, widened = 0;
  const auto all = [](const std::string&) { return true; };
  const std::string fused =
      kindsOf(kernels.gpuOps(), onGpu, [](const std::string& name) { return name.starts_with("fused_"); });
  const std::string hostKinds = kindsOf(kernels.hostOps(), onHost, all);
  const std::string widenedKinds = kindsOf(kernels.widenedOps(), widened, all);
  return fmt::format("meshflow: cuda device {} (GPU {}): {} ops on the GPU, {} on the host{}{}{}", device,
                     kernels.gpu(), onGpu, onHost, hostKinds.empty() ? "" : " (" + hostKinds + ")",
                     fused.empty() ? "" : "; fused: " + fused,
                     widenedKinds.empty() ? "" : "; widened to f32: " + widenedKinds);
}

// "device 0 time by op kind (each op waited for): matmul 1.23 s (40%, 480 ops), ..." — the twenty largest (matmuls by their operands).
std::string timeSummary(int device, const CudaKernels& kernels) {
  struct Kind {
    std::string name;
    double seconds;
    std::int64_t ops;
  };
  std::vector<Kind> kinds;
  double total = 0;
  const auto add = [&](const auto& seconds, const auto& counts, const char* where) {
    for (const auto& [name, s] : seconds) {
      kinds.push_back({name + where, s, counts.count(name) ? counts.at(name) : 0});
      total += s;
    }
  };
  add(kernels.gpuSeconds(), kernels.gpuOps(), "");
  add(kernels.hostSeconds(), kernels.hostOps(), " (host)");
  std::sort(kinds.begin(), kinds.end(), [](const Kind& a, const Kind& b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name;
  });
  std::string text;
  for (std::size_t i = 0; i < kinds.size() && i < 20; ++i)
    text += fmt::format("{}{} {:.3f} s ({:.0f}%, {} ops)", i ? ", " : "", kinds[i].name, kinds[i].seconds,
                        total > 0 ? 100 * kinds[i].seconds / total : 0.0, kinds[i].ops);
  return fmt::format("meshflow: cuda device {} time by op kind, each op waited for ({:.3f} s in all): {}", device,
                     total, text);
}

bool asked(const char* variable) {
  const char* value = std::getenv(variable);
  return value && *value && std::string(value) != "0";
}

}  // namespace

void reportTransport(int device, const std::string& choice) {
  if (asked("MESHFLOW_CUDA_OPS")) std::fprintf(stderr, "meshflow: cuda device %d communicates through %s\n", device, choice.c_str());
}

void reportDevices(const std::vector<std::pair<int, const CudaKernels*>>& devices) {
  if (asked("MESHFLOW_CUDA_OPS"))
    for (const auto& [device, kernels] : devices) std::fprintf(stderr, "%s\n", opsSummary(device, *kernels).c_str());
  for (const auto& [device, kernels] : devices)
    if (kernels->profiling()) std::fprintf(stderr, "%s\n", timeSummary(device, *kernels).c_str());
}

}  // namespace meshflow::runtime::cuda
