#include "runtime/cuda/SignatureTensor.h"

#include <stdexcept>

namespace meshflow::runtime::cuda {
namespace {

void putWide(std::vector<std::int32_t>& words, std::int64_t value) {
  words.push_back(static_cast<std::int32_t>(value & 0xffffffff));
  words.push_back(static_cast<std::int32_t>(value >> 32));
}

// Reads the words in order; running past the end is a malformed signature.
struct Words {
  std::span<const std::int32_t> words;
  std::size_t next = 0;

  std::int32_t get() {
    if (next >= words.size()) throw std::invalid_argument("a call signature ends too early");
    return words[next++];
  }
  std::int64_t getWide() {
    const auto low = static_cast<std::uint32_t>(get());
    return static_cast<std::int64_t>(
        static_cast<std::uint64_t>(static_cast<std::uint32_t>(get())) << 32 | low);
  }
};

}  // namespace

Tensor signatureTensor(const CallSignature& call) {
  std::vector<std::int32_t> words;
  words.push_back(static_cast<std::int32_t>(call.op.size()));
  for (char c : call.op) words.push_back(static_cast<unsigned char>(c));
  words.push_back(call.root);
  words.push_back(call.operandsAgree ? 1 : 0);
  words.push_back(static_cast<std::int32_t>(call.group.size()));
  words.insert(words.end(), call.group.begin(), call.group.end());
  words.push_back(static_cast<std::int32_t>(call.operands.size()));
  for (const OperandType& operand : call.operands) {
    words.push_back(operand.allocated ? 1 : 0);
    words.push_back(static_cast<std::int32_t>(operand.dtype));
    words.push_back(static_cast<std::int32_t>(operand.shape.size()));
    for (std::int64_t dim : operand.shape) putWide(words, dim);
  }
  const auto count = static_cast<std::int64_t>(words.size());
  return Tensor::fromI32({count}, std::move(words));
}

CallSignature signatureOf(const Tensor& tensor) {
  if (!tensor.allocated() || tensor.dtype() != ir::DType::I32 || tensor.rank() != 1)
    throw std::invalid_argument("a call signature is a rank-1 i32 tensor, not " +
                                tensor.typeText());
  Words in{tensor.i32()};
  CallSignature call;
  for (std::int32_t i = 0, n = in.get(); i < n; ++i) call.op.push_back(static_cast<char>(in.get()));
  call.root = in.get();
  call.operandsAgree = in.get() != 0;
  for (std::int32_t i = 0, n = in.get(); i < n; ++i) call.group.push_back(in.get());
  for (std::int32_t i = 0, n = in.get(); i < n; ++i) {
    OperandType operand;
    operand.allocated = in.get() != 0;
    operand.dtype = static_cast<ir::DType>(in.get());
    for (std::int32_t d = 0, rank = in.get(); d < rank; ++d) operand.shape.push_back(in.getWide());
    call.operands.push_back(std::move(operand));
  }
  return call;
}

}  // namespace meshflow::runtime::cuda
