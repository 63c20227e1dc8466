// Training data a host's loader fills (Interpreter::defineTokenData).
#include <fmt/format.h>

#include <algorithm>

#include "interp/DataObject.h"

namespace meshflow::interp {
namespace {

class TokenData final : public runtime::DataSource {
 public:
  TokenData(std::string name, TokenLoader loader) : name_(std::move(name)), loader_(std::move(loader)) {}

  std::map<std::string, runtime::Tensor> batch(const ir::Graph& graph, std::int64_t batchSize,
                                               std::int64_t step) const override {
    std::int64_t seq = sequenceLength(graph);
    TokenBatch fed;
    try {
      fed = loader_(batchSize, seq, step);
    } catch (const std::exception& error) {
      throw runtime::DataError(fmt::format("the host's loader '{}' failed at step {}: {}", name_,
                                           step + 1, error.what()));
    }
    std::map<std::string, runtime::Tensor> tensors;
    tensors.emplace("tokens", tensorOf("tokens", fed.tokens, batchSize, seq));
    tensors.emplace("labels", tensorOf("labels", fed.labels, batchSize, seq));
    return tensors;
  }

  std::string describe() const override { return fmt::format("host data '{}'", name_); }
  runtime::DataRecipe recipe() const override { return {"host", 0, name_, {}}; }

 private:
  std::int64_t sequenceLength(const ir::Graph& graph) const {
    const ir::TensorType* tokens = nullptr;
    for (ir::ValueId input : graph.inputs()) {
      const auto& info = graph.value(input);
      if (info.name != "tokens" && info.name != "labels")
        throw runtime::DataError(fmt::format(
            "the host's loader '{}' fills the inputs 'tokens' and 'labels'; the model also has '{}'",
            name_, info.name));
      if (info.name == "tokens") tokens = &info.type;
    }
    if (!tokens || tokens->rank() != 2 || tokens->dtype != ir::DType::I32)
      throw runtime::DataError(fmt::format(
          "the host's loader '{}' needs a model input 'tokens' of type i32[batch, seq]", name_));
    return tokens->shape[1].value;
  }

  runtime::Tensor tensorOf(const char* what, const std::vector<std::int32_t>& ids,
                           std::int64_t batch, std::int64_t seq) const {
    if (static_cast<std::int64_t>(ids.size()) != batch * seq)
      throw runtime::DataError(fmt::format(
          "the host's loader '{}' gave {} ids for '{}'; the batch needs {} x {} = {}", name_,
          ids.size(), what, batch, seq, batch * seq));
    runtime::Tensor tensor(ir::DType::I32, {batch, seq});
    std::copy(ids.begin(), ids.end(), tensor.i32().begin());
    return tensor;
  }

  std::string name_;
  TokenLoader loader_;
};

}  // namespace

Value dataValue(Heap& heap, std::shared_ptr<runtime::DataSource> source) {
  auto object = std::make_shared<DataObject>(std::move(source));
  heap.adopt(object, kObjectOverhead);
  return Value::object(ValueKind::Object, std::move(object));
}

std::unique_ptr<runtime::DataSource> tokenData(std::string name, TokenLoader loader) {
  return std::make_unique<TokenData>(std::move(name), std::move(loader));
}

}  // namespace meshflow::interp
