#include "runtime/checkpoint/CheckpointFormat.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>

namespace meshflow::runtime::checkpoint {
namespace {

// The \r\n, as in PNG's signature, catches a file mangled by newline translation.
constexpr std::array<std::uint8_t, 8> kMagic = {'M', 'F', 'C', 'K', 'P', 'T', '\r', '\n'};
constexpr std::size_t kHeaderBytes = kMagic.size() + 4 + 4;
constexpr std::size_t kTrailerBytes = 8;
// Codes of their own rather than ir::DType's values, so that reordering the IR's
// enum never changes what old files mean. Zero is no dtype, so zeroed bytes fail.
constexpr std::uint8_t kCodeF32 = 1;
constexpr std::uint8_t kCodeI32 = 2;
constexpr std::uint8_t kCodeF16 = 3;  // 2 bytes an element, like bf16
constexpr std::uint8_t kCodeBF16 = 4;

std::uint8_t dtypeCode(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::F32: return kCodeF32;
    case ir::DType::F16: return kCodeF16;
    case ir::DType::BF16: return kCodeBF16;
    default: return kCodeI32;
  }
}

// Piece kinds of version 2.
constexpr std::uint8_t kBlockPiece = 0;
constexpr std::uint8_t kFlatPiece = 1;

// Appends little-endian integers whatever the host's byte order.
class ByteWriter {
 public:
  explicit ByteWriter(std::size_t capacity) { out_.reserve(capacity); }

  void u8(std::uint8_t value) { out_.push_back(value); }
  void u16(std::uint16_t value) { littleEndian(value, 2); }
  void u32(std::uint32_t value) { littleEndian(value, 4); }
  void u64(std::uint64_t value) { littleEndian(value, 8); }
  void i64(std::int64_t value) { u64(static_cast<std::uint64_t>(value)); }
  void dims(const std::vector<std::int64_t>& dims) {
    for (auto d : dims) i64(d);
  }
  void raw(std::span<const std::uint8_t> bytes) {
    out_.insert(out_.end(), bytes.begin(), bytes.end());
  }
  void text(std::string_view text) {
    u32(static_cast<std::uint32_t>(text.size()));
    for (char c : text) out_.push_back(static_cast<std::uint8_t>(c));
  }
  Bytes take() { return std::move(out_); }

 private:
  void littleEndian(std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  }

  Bytes out_;
};

// Reads little-endian integers, failing with a CheckpointError that names the file
// (and the tensor being read) instead of reading past the end.
class ByteReader {
 public:
  ByteReader(std::span<const std::uint8_t> bytes, const std::filesystem::path& file)
      : bytes_(bytes), file_(file) {}

  std::size_t remaining() const { return bytes_.size() - position_; }
  void setTensor(std::string name) { tensor_ = std::move(name); }

  std::span<const std::uint8_t> take(std::size_t size, const char* what) {
    if (remaining() < size)
      fail(fmt::format("truncated: the {} needs {} bytes, {} are left", what, size, remaining()));
    auto bytes = bytes_.subspan(position_, size);
    position_ += size;
    return bytes;
  }
  std::uint64_t littleEndian(int size, const char* what) {
    std::uint64_t value = 0;
    auto bytes = take(static_cast<std::size_t>(size), what);
    for (int i = 0; i < size; ++i) value |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
    return value;
  }
  std::uint8_t u8(const char* what) { return static_cast<std::uint8_t>(littleEndian(1, what)); }
  std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(littleEndian(4, what)); }
  std::int64_t i64(const char* what) { return static_cast<std::int64_t>(littleEndian(8, what)); }
  std::vector<std::int64_t> dims(std::uint32_t rank, const char* what) {
    std::vector<std::int64_t> dims;
    for (std::uint32_t i = 0; i < rank; ++i) dims.push_back(i64(what));
    return dims;
  }
  std::string text(const char* what) {
    auto bytes = take(u32(what), what);
    return std::string(bytes.begin(), bytes.end());
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw CheckpointError(file_, fmt::format("{} (at byte {})", message, position_), tensor_);
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t position_ = 0;
  const std::filesystem::path& file_;
  std::string tensor_;
};

std::size_t encodedSize(const ShardPiece& piece) {
  return 4 + piece.name.size() + 1 + 4 + 3 * 8 * piece.globalShape.size() + 1 + 16 + piece.tensor.bytes();
}

// Version 2 adds each piece's kind; files without flat pieces stay version 1,
// which every meshflow reads.
std::uint32_t versionFor(const std::vector<const ShardPiece*>& pieces) {
  const bool flat = std::any_of(pieces.begin(), pieces.end(), [](const ShardPiece* p) { return p->flat.has_value(); });
  return flat ? kShardFormatVersion : 1;
}

void writePayload(ByteWriter& out, const Tensor& tensor) {
  if (tensor.dtype() == ir::DType::F32) {
    for (float v : tensor.f32()) out.u32(std::bit_cast<std::uint32_t>(v));
  } else if (tensor.dtype() == ir::DType::F16) {
    for (Half v : tensor.f16()) out.u16(v.bits);
  } else if (tensor.dtype() == ir::DType::BF16) {
    for (BFloat16 v : tensor.bf16()) out.u16(v.bits);
  } else {
    for (std::int32_t v : tensor.i32()) out.u32(static_cast<std::uint32_t>(v));
  }
}

void writePiece(ByteWriter& out, const ShardPiece& piece, std::uint32_t version) {
  out.text(piece.name);
  out.u8(dtypeCode(piece.tensor.dtype()));
  out.u32(static_cast<std::uint32_t>(piece.globalShape.size()));
  out.dims(piece.globalShape);
  out.dims(piece.offset);
  out.dims(piece.flat ? piece.flat->block : piece.tensor.shape());
  if (version >= 2) {
    out.u8(piece.flat ? kFlatPiece : kBlockPiece);
    if (piece.flat) {
      out.i64(piece.flat->begin);
      out.i64(piece.tensor.elements());
    }
  }
  writePayload(out, piece.tensor);
}

ir::DType readDType(ByteReader& in) {
  std::uint8_t code = in.u8("dtype");
  if (code == kCodeF32) return ir::DType::F32;
  if (code == kCodeI32) return ir::DType::I32;
  if (code == kCodeF16) return ir::DType::F16;
  if (code == kCodeBF16) return ir::DType::BF16;
  in.fail(fmt::format("unknown dtype code {}", code));
}

// The elements of a local block, refusing negative dimensions and blocks larger
// than what is left of the file (which also keeps the product from overflowing).
std::size_t payloadElements(ByteReader& in, const Shape& shape, std::size_t elementBytes) {
  for (auto d : shape)
    if (d < 0) in.fail("local shape " + shapeText(shape) + " has a negative dimension");
  // A block with a zero dimension is empty, but the tensor multiplies every
  // dimension in turn: the others must not overflow int64 either.
  std::uint64_t nonZero = 1;
  for (auto d : shape)
    if (d > 0) {
      if (nonZero > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) /
                        static_cast<std::uint64_t>(d))
        in.fail("local shape " + shapeText(shape) + " has more elements than a tensor can hold");
      nonZero *= static_cast<std::uint64_t>(d);
    }
  for (auto d : shape)
    if (d == 0) return 0;
  const std::uint64_t limit = in.remaining() / elementBytes;
  std::uint64_t elements = 1;
  for (auto d : shape) {
    if (elements > limit / static_cast<std::uint64_t>(d))
      in.fail("truncated: a block of shape " + shapeText(shape) + " is larger than the rest");
    elements *= static_cast<std::uint64_t>(d);
  }
  return elements;
}

std::uint32_t elementBits(std::span<const std::uint8_t> payload, std::size_t i,
                          std::size_t size = 4) {
  std::uint32_t bits = 0;
  for (std::size_t b = 0; b < size; ++b)
    bits |= static_cast<std::uint32_t>(payload[size * i + b]) << (8 * b);
  return bits;
}

Tensor readPayload(ByteReader& in, ir::DType dtype, Shape shape) {
  const std::size_t size = ir::dtypeBytes(dtype);
  const std::size_t elements = payloadElements(in, shape, size);
  auto payload = in.take(elements * size, "payload");
  Tensor tensor(dtype, std::move(shape));
  if (dtype == ir::DType::F16) {
    auto values = tensor.f16();
    for (std::size_t i = 0; i < elements; ++i)
      values[i].bits = static_cast<std::uint16_t>(elementBits(payload, i, 2));
  } else if (dtype == ir::DType::BF16) {
    auto values = tensor.bf16();
    for (std::size_t i = 0; i < elements; ++i)
      values[i].bits = static_cast<std::uint16_t>(elementBits(payload, i, 2));
  } else if (dtype == ir::DType::F32) {
    auto values = tensor.f32();
    for (std::size_t i = 0; i < elements; ++i)
      values[i] = std::bit_cast<float>(elementBits(payload, i));
  } else {
    auto values = tensor.i32();
    for (std::size_t i = 0; i < elements; ++i)
      values[i] = static_cast<std::int32_t>(elementBits(payload, i));
  }
  return tensor;
}

ShardPiece readPiece(ByteReader& in, std::uint32_t version) {
  ShardPiece piece;
  piece.name = in.text("tensor name");
  in.setTensor(piece.name);
  const ir::DType dtype = readDType(in);
  const std::uint32_t rank = in.u32("rank");
  piece.globalShape = in.dims(rank, "global shape");
  piece.offset = in.dims(rank, "offset");
  Shape local = in.dims(rank, "local shape");
  const std::uint8_t kind = version >= 2 ? in.u8("piece kind") : kBlockPiece;
  if (kind == kFlatPiece) {
    piece.flat = FlatRange{std::move(local), in.i64("flat begin")};
    local = {in.i64("flat count")};
  } else if (kind != kBlockPiece) {
    in.fail(fmt::format("unknown piece kind {}", kind));
  }
  piece.tensor = readPayload(in, dtype, std::move(local));
  in.setTensor({});
  return piece;
}

// The magic first, so that a file of something else is named as such rather than
// as a checksum failure; then the trailer, so that nothing unverified is parsed.
void verifyEnvelope(std::span<const std::uint8_t> bytes, const std::filesystem::path& file) {
  if (bytes.size() < kHeaderBytes + kTrailerBytes)
    throw CheckpointError(file, fmt::format("truncated: {} bytes is less than a shard file's "
                                            "header and trailer",
                                            bytes.size()));
  if (!std::equal(kMagic.begin(), kMagic.end(), bytes.begin()))
    throw CheckpointError(file, "not a meshflow shard file (bad magic)");
  ByteReader trailer(bytes.last(kTrailerBytes), file);
  const std::uint64_t stored = trailer.littleEndian(8, "trailer");
  const std::uint64_t actual = fnv1a64(bytes.first(bytes.size() - kTrailerBytes));
  if (stored != actual)
    throw CheckpointError(file, fmt::format("checksum mismatch: the contents hash to {}, the "
                                            "trailer says {} (truncated or corrupted)",
                                            checksumText(actual), checksumText(stored)));
}

}  // namespace

std::uint64_t fnv1a64(std::span<const std::uint8_t> bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (std::uint8_t b : bytes) {
    hash ^= b;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::uint64_t fnv1a64(std::string_view text) {
  return fnv1a64({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
}

std::string checksumText(std::uint64_t checksum) { return fmt::format("{:016x}", checksum); }

Bytes encodeShard(const std::vector<const ShardPiece*>& pieces) {
  std::size_t size = kHeaderBytes + kTrailerBytes;
  for (const ShardPiece* piece : pieces) size += encodedSize(*piece);
  ByteWriter out(size);
  const std::uint32_t version = versionFor(pieces);
  out.raw(kMagic);
  out.u32(version);
  out.u32(static_cast<std::uint32_t>(pieces.size()));
  for (const ShardPiece* piece : pieces) writePiece(out, *piece, version);
  Bytes bytes = out.take();
  const std::uint64_t checksum = fnv1a64(bytes);
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<std::uint8_t>(checksum >> (8 * i)));
  return bytes;
}

std::vector<ShardPiece> decodeShard(std::span<const std::uint8_t> bytes,
                                    const std::filesystem::path& file) {
  verifyEnvelope(bytes, file);
  ByteReader in(bytes.first(bytes.size() - kTrailerBytes), file);
  in.take(kMagic.size(), "magic");
  const std::uint32_t version = in.u32("version");
  if (version < 1 || version > kShardFormatVersion)
    in.fail(fmt::format("shard format version {}; this meshflow reads versions 1 to {}", version,
                        kShardFormatVersion));
  const std::uint32_t count = in.u32("piece count");
  std::vector<ShardPiece> pieces;
  for (std::uint32_t i = 0; i < count; ++i) pieces.push_back(readPiece(in, version));
  if (in.remaining() != 0)
    in.fail(fmt::format("{} bytes after the last of {} pieces", in.remaining(), count));
  return pieces;
}

}  // namespace meshflow::runtime::checkpoint
