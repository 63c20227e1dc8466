#include "runtime/cuda/StreamPlan.h"

#include <array>
#include <map>
#include <optional>

namespace meshflow::runtime::cuda {
namespace {

constexpr std::size_t kStreams = 3;  // ir::Stream: compute, comm, grad

struct BufferHistory {
  std::optional<std::size_t> writer;   // the last instruction that wrote it
  std::vector<std::size_t> readers;    // instructions that read it since
};

std::size_t streamIndex(ir::Stream s) { return static_cast<std::size_t>(s); }

}  // namespace

std::vector<StreamStep> planStreams(const ir::DeviceCode& code) {
  std::vector<StreamStep> plan(code.code.size());
  std::map<ir::BufferId, BufferHistory> history;
  for (std::size_t i = 0; i < code.code.size(); ++i) {
    const ir::Instruction& in = code.code[i];
    plan[i].stream = in.stream;
    // Per other stream, the latest instruction this one must follow.
    std::array<std::optional<std::size_t>, kStreams> latest;
    auto follow = [&](std::size_t j) {
      const std::size_t s = streamIndex(plan[j].stream);
      if (plan[j].stream == in.stream) return;
      if (!latest[s] || *latest[s] < j) latest[s] = j;
    };
    for (ir::BufferId b : code.uses(in))
      if (auto it = history.find(b); it != history.end() && it->second.writer) follow(*it->second.writer);
    for (ir::BufferId b : code.defs(in)) {
      auto it = history.find(b);
      if (it == history.end()) continue;
      if (it->second.writer) follow(*it->second.writer);
      for (std::size_t reader : it->second.readers) follow(reader);
    }
    for (const auto& j : latest)
      if (j) {
        plan[i].waitFor.push_back(*j);
        plan[*j].recordEvent = true;
      }
    for (ir::BufferId b : code.uses(in)) history[b].readers.push_back(i);
    for (ir::BufferId b : code.defs(in)) history[b] = {i, {}};
  }
  return plan;
}

}  // namespace meshflow::runtime::cuda
