// Training data: what feeds a model's inputs each step.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "ir/Graph.h"
#include "runtime/Tensor.h"

namespace meshflow::runtime {

/// Data that cannot be read or does not fit the model (an empty file, a
/// sequence longer than the text, an input the source cannot fill).
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// How another process makes the same source, reading what it reads itself
/// (the mpi backend's workers): `synthetic` from its seed, or `text` from the
/// file at `file`.
struct DataRecipe {
  std::string kind;  ///< "synthetic" or "text"
  std::uint64_t seed = 0;
  std::string name;  ///< As the script named it (text only).
  std::string file;  ///< The file to read (text only).
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  /// Tensors for every Input of `graph`, by input name, for global batch
  /// `batchSize` at training step `step`. Deterministic in (step, batchSize).
  virtual std::map<std::string, Tensor> batch(const ir::Graph& graph, std::int64_t batchSize,
                                              std::int64_t step) const = 0;
  /// One line for progress output and printing: `text(/path, 35149 characters)`.
  virtual std::string describe() const = 0;
  virtual DataRecipe recipe() const = 0;
};

/// Random inputs from a seed: f32 inputs are standard normal; i32 inputs are
/// uniform below the size of what consumes them (the embedding's vocabulary,
/// the classes of cross_entropy).
std::unique_ptr<DataSource> syntheticData(std::uint64_t seed);

/// Character-level language-model data from `text`: each character is a token
/// (printable ASCII 32..126 as 1..95, newline as 0, anything else as `?`, so the
/// vocabulary has 96 entries); input `tokens` holds windows of the text and
/// `labels` the characters that follow them. Windows advance through the text
/// step by step. Throws DataError for text shorter than one window plus one.
/// `file`: where the text was read from, for recipe() (default: `name`).
std::unique_ptr<DataSource> textData(std::string name, std::string text, std::string file = {});

/// The source `recipe` describes; a text file is read now. Throws DataError
/// naming the file when it cannot be read, or for an unknown kind.
std::unique_ptr<DataSource> dataFromRecipe(const DataRecipe& recipe);

/// The vocabulary size of textData's encoding.
inline constexpr std::int32_t kTextVocabulary = 96;
std::int32_t encodeCharacter(unsigned char c);

}  // namespace meshflow::runtime
