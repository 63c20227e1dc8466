// Whole tensors from the blocks devices hold. The writer runs it to refuse a
// checkpoint that could not be read back; the reader, to rebuild each tensor.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/checkpoint/Checkpoint.h"

namespace meshflow::runtime::checkpoint {

/// A piece and where it comes from ("device-0003.bin", "device 3"), for messages.
struct SourcedPiece {
  const ShardPiece* piece = nullptr;
  std::string source;
};

/// Pieces that do not make their tensor. `source` is the piece at fault; it is
/// empty when no piece is (a gap in the coverage).
class AssemblyError : public std::runtime_error {
 public:
  AssemblyError(std::string source, const std::string& message)
      : std::runtime_error(message), source_(std::move(source)) {}

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

/// The whole tensor of `dtype` and `globalShape` made of `pieces`: each must have
/// that dtype and global shape and lie inside it, together they must cover every
/// element, and where they overlap they must agree bit for bit. Throws
/// AssemblyError otherwise.
Tensor assembleTensor(ir::DType dtype, const Shape& globalShape,
                      const std::vector<SourcedPiece>& pieces);

}  // namespace meshflow::runtime::checkpoint
