// A value of training data: synthetic(seed), text(path) or a host's loader
// (Interpreter::defineTokenData); train(..., data = d) takes its batches.
#pragma once

#include <memory>
#include <string>

#include "interp/Heap.h"
#include "interp/Object.h"
#include "meshflow/meshflow.h"
#include "runtime/data/DataSource.h"

namespace meshflow::interp {

class DataObject final : public Object {
 public:
  explicit DataObject(std::shared_ptr<runtime::DataSource> source) : source(std::move(source)) {}
  std::string typeName() const override { return "data"; }
  std::string repr(int) const override { return source->describe(); }
  std::shared_ptr<runtime::DataSource> source;
};

/// `source` as a value held by `heap`.
Value dataValue(Heap& heap, std::shared_ptr<runtime::DataSource> source);

/// Data a host's loader fills: inputs `tokens` and `labels`, i32[batch, seq].
/// Its recipe has kind "host", which no other process can make (the mpi
/// backend refuses it).
std::unique_ptr<runtime::DataSource> tokenData(std::string name, TokenLoader loader);

}  // namespace meshflow::interp
