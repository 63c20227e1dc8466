#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "runtime/data/DataSource.h"

namespace meshflow::runtime {
namespace {

class TextData final : public DataSource {
 public:
  TextData(std::string name, std::string text, std::string file) : name_(std::move(name)), file_(std::move(file)) {
    tokens_.reserve(text.size());
    for (unsigned char c : text) tokens_.push_back(encodeCharacter(c));
  }

  std::map<std::string, Tensor> batch(const ir::Graph& graph, std::int64_t batchSize,
                                      std::int64_t step) const override {
    const ir::TensorType* tokensType = nullptr;
    for (ir::ValueId input : graph.inputs()) {
      const auto& info = graph.value(input);
      if (info.name != "tokens" && info.name != "labels")
        throw DataError(fmt::format("text data fills the inputs 'tokens' and 'labels'; the model "
                                    "also has '{}'",
                                    info.name));
      if (info.name == "tokens") tokensType = &info.type;
    }
    if (!tokensType || tokensType->rank() != 2 || tokensType->dtype != ir::DType::I32)
      throw DataError("text data needs an input 'tokens' of type i32[batch, seq]");
    std::int64_t seq = tokensType->shape[1].value;
    auto length = static_cast<std::int64_t>(tokens_.size());
    if (length < seq + 1)
      throw DataError(fmt::format("{} has {} characters, fewer than one sequence of {} plus one",
                                  name_, length, seq));
    Tensor tokens(ir::DType::I32, {batchSize, seq});
    Tensor labels(ir::DType::I32, {batchSize, seq});
    // Windows start every `seq` characters and wrap around the text.
    std::int64_t windows = (length - 1) / seq;
    for (std::int64_t b = 0; b < batchSize; ++b) {
      std::int64_t start = ((step * batchSize + b) % windows) * seq;
      for (std::int64_t t = 0; t < seq; ++t) {
        tokens.i32()[b * seq + t] = tokens_[start + t];
        labels.i32()[b * seq + t] = tokens_[start + t + 1];
      }
    }
    std::map<std::string, Tensor> tensors;
    tensors.emplace("tokens", std::move(tokens));
    tensors.emplace("labels", std::move(labels));
    return tensors;
  }

  std::string describe() const override {
    return fmt::format("text({}, {} characters)", name_, tokens_.size());
  }

  DataRecipe recipe() const override { return {"text", 0, name_, file_}; }

 private:
  std::string name_, file_;
  std::vector<std::int32_t> tokens_;
};

}  // namespace

std::int32_t encodeCharacter(unsigned char c) {
  if (c == '\n') return 0;
  if (c >= 32 && c <= 126) return c - 31;
  return '?' - 31;
}

std::unique_ptr<DataSource> textData(std::string name, std::string text, std::string file) {
  if (text.empty()) throw DataError(fmt::format("{} is empty", name));
  if (file.empty()) file = name;
  return std::make_unique<TextData>(std::move(name), std::move(text), std::move(file));
}

std::unique_ptr<DataSource> dataFromRecipe(const DataRecipe& recipe) {
  if (recipe.kind == "synthetic") return syntheticData(recipe.seed);
  if (recipe.kind != "text") throw DataError(fmt::format("unknown data source '{}'", recipe.kind));
  std::ifstream in(recipe.file, std::ios::binary);
  if (!in) throw DataError(fmt::format("cannot read '{}'", recipe.file));
  std::ostringstream contents;
  contents << in.rdbuf();
  return textData(recipe.name, contents.str(), recipe.file);
}

}  // namespace meshflow::runtime
