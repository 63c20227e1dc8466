// How the MPI transport writes what it sends besides tensors' bytes (internal
// to meshflow_mpi): plain values, operand types, and a collective's header —
// its call signature (runtime/CallSignature.h) and number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

#include "runtime/CallSignature.h"

namespace meshflow::runtime::mpi {

class Writer {
 public:
  template <class T>
  void put(T value) {
    auto* bytes = reinterpret_cast<const std::byte*>(&value);
    out_.insert(out_.end(), bytes, bytes + sizeof(T));
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <class T>
  T get() {
    if (at_ + sizeof(T) > in_.size()) throw std::runtime_error("a truncated meshflow MPI header");
    T value;
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::size_t consumed() const { return at_; }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

// An operand's type on the wire.
inline void writeType(Writer& w, const OperandType& t) {
  w.put<std::uint8_t>(t.allocated);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(t.dtype));
  w.put<std::uint32_t>(static_cast<std::uint32_t>(t.shape.size()));
  for (std::int64_t d : t.shape) w.put<std::int64_t>(d);
}

inline OperandType readType(Reader& r) {
  OperandType t;
  t.allocated = r.get<std::uint8_t>() != 0;
  t.dtype = static_cast<ir::DType>(r.get<std::uint8_t>());
  auto rank = r.get<std::uint32_t>();
  for (std::uint32_t i = 0; i < rank; ++i) t.shape.push_back(r.get<std::int64_t>());
  return t;
}

// A collective's header: its signature (runtime/CallSignature.h) and number.
inline std::vector<std::byte> encodeCall(const CallSignature& call, std::uint64_t number) {
  Writer w;
  w.put<std::uint8_t>(static_cast<std::uint8_t>(call.op.size()));
  for (char c : call.op) w.put<char>(c);
  w.put<std::uint64_t>(number);
  w.put<std::int32_t>(call.root);
  w.put<std::uint8_t>(call.operandsAgree);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(call.group.size()));
  for (int m : call.group) w.put<std::int32_t>(m);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(call.operands.size()));
  for (const OperandType& t : call.operands) writeType(w, t);
  return w.take();
}

/// `consumed`: where the header ends in `bytes` (a payload may follow).
inline CallSignature decodeCall(std::span<const std::byte> bytes, std::uint64_t& number,
                         std::size_t& consumed) {
  Reader r(bytes);
  CallSignature call;
  auto length = r.get<std::uint8_t>();
  for (std::uint8_t i = 0; i < length; ++i) call.op.push_back(r.get<char>());
  number = r.get<std::uint64_t>();
  call.root = r.get<std::int32_t>();
  call.operandsAgree = r.get<std::uint8_t>() != 0;
  auto members = r.get<std::uint32_t>();
  for (std::uint32_t i = 0; i < members; ++i) call.group.push_back(r.get<std::int32_t>());
  auto count = r.get<std::uint32_t>();
  for (std::uint32_t i = 0; i < count; ++i) call.operands.push_back(readType(r));
  consumed = r.consumed();
  return call;
}

}  // namespace meshflow::runtime::mpi
