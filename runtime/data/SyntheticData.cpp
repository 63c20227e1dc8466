#include <fmt/format.h>

#include <algorithm>

#include "runtime/data/DataSource.h"

namespace meshflow::runtime {
namespace {

// The exclusive upper bound of ids that `input` may hold: the rows of the
// embedding table or the classes of the cross entropy that read it.
std::int32_t idBound(const ir::Graph& graph, ir::ValueId input) {
  std::int64_t bound = 0;
  const auto consumers = graph.consumers();
  for (ir::OpId consumer : consumers[input]) {
    const ir::Op& op = graph.op(consumer);
    if (op.kind == ir::OpKind::Embedding && op.inputs.size() == 2 && op.inputs[1] == input)
      bound = std::max(bound, graph.value(op.inputs[0]).type.shape.at(0).value);
    if (op.kind == ir::OpKind::CrossEntropy && op.inputs.size() == 2 && op.inputs[1] == input)
      bound = std::max(bound, graph.value(op.inputs[0]).type.shape.back().value);
  }
  if (bound <= 0)
    throw DataError(fmt::format("synthetic data cannot fill the i32 input '{}': it is not read by an "
                                "embedding or a cross_entropy",
                                graph.value(input).name));
  return static_cast<std::int32_t>(bound);
}

class SyntheticData final : public DataSource {
 public:
  explicit SyntheticData(std::uint64_t seed) : seed_(seed) {}

  std::map<std::string, Tensor> batch(const ir::Graph& graph, std::int64_t batchSize,
                                      std::int64_t step) const override {
    std::map<std::string, Tensor> tensors;
    std::uint64_t index = 0;
    for (ir::ValueId input : graph.inputs()) {
      const auto& info = graph.value(input);
      Shape shape = boundShape(info.type, batchSize);
      // A distinct, reproducible stream per (seed, step, input).
      std::uint64_t seed = seed_ * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(step) * 1000003u + index++;
      if (info.type.dtype == ir::DType::I32)
        tensors.emplace(info.name, randomInts(shape, 0, idBound(graph, input), seed));
      else
        tensors.emplace(info.name, randomNormal(shape, seed).castTo(info.type.dtype));
    }
    return tensors;
  }

  std::string describe() const override { return fmt::format("synthetic(seed = {})", seed_); }
  DataRecipe recipe() const override { return {"synthetic", seed_, {}, {}}; }

 private:
  std::uint64_t seed_;
};

}  // namespace

std::unique_ptr<DataSource> syntheticData(std::uint64_t seed) {
  return std::make_unique<SyntheticData>(seed);
}

}  // namespace meshflow::runtime
