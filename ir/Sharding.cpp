#include "ir/Sharding.h"

#include <fmt/format.h>

namespace meshflow::ir {

namespace {

// The digits naming a set of mesh axes in the canonical string ("0", "1", "01").
std::string axisDigits(MeshAxes axes) {
  switch (axes) {
    case MeshAxes::k0:
      return "0";
    case MeshAxes::k1:
      return "1";
    case MeshAxes::k01:
      return "01";
    case MeshAxes::kNone:
      break;
  }
  return "";
}

std::string dimToken(MeshAxes axes) {
  return axes == MeshAxes::kNone ? "R" : "S" + axisDigits(axes);
}

// A hand-written scanner: the grammar is four tokens and a suffix, and the errors
// must point at the exact character, which a regex cannot do.
class SpecParser {
 public:
  explicit SpecParser(std::string_view text) : text_(text) {}

  ShardingSpec parse() {
    if (text_.empty()) fail("empty sharding spec (a scalar is written `()`)");
    std::vector<MeshAxes> dims = text_.starts_with("()") ? scalar() : dimTokens();
    MeshAxes partial = MeshAxes::kNone;
    if (pos_ < text_.size() && text_[pos_] == '+') partial = partialSuffix();
    if (pos_ != text_.size()) fail(fmt::format("unexpected '{}'", text_[pos_]));
    return ShardingSpec::fromDims(std::move(dims), partial);
  }

 private:
  std::vector<MeshAxes> scalar() {
    pos_ = 2;
    return {};
  }

  std::vector<MeshAxes> dimTokens() {
    std::vector<MeshAxes> dims;
    while (pos_ < text_.size() && text_[pos_] != '+') dims.push_back(dimToken());
    if (dims.empty()) fail("expected R, S0, S1 or S01 before the partial-sum suffix");
    return dims;
  }

  MeshAxes dimToken() {
    char c = text_[pos_];
    if (c == 'R') {
      ++pos_;
      return MeshAxes::kNone;
    }
    if (c != 'S') fail(fmt::format("expected R, S0, S1 or S01, found '{}'", c));
    ++pos_;
    return axes("after 'S'");
  }

  MeshAxes partialSuffix() {
    ++pos_;  // '+'
    if (pos_ >= text_.size() || text_[pos_] != 'P') fail("expected 'P' after '+'");
    ++pos_;
    return axes("after 'P'");
  }

  // Mesh-axis digits: "0", "1" or "01". "10" is refused rather than read as "01"
  // because a split with mesh dimension 1 major is a different device order, which
  // meshflow does not model.
  MeshAxes axes(const char* where) {
    size_t start = pos_;
    if (pos_ >= text_.size() || (text_[pos_] != '0' && text_[pos_] != '1')) {
      fail(fmt::format("expected mesh dimension 0, 1 or 01 {}", where));
    }
    if (text_[pos_] == '1') {
      ++pos_;
      if (pos_ < text_.size() && text_[pos_] == '0') {
        throw ShardingParseError("`10` is not a mesh-axis set; write `01`", start);
      }
      return MeshAxes::k1;
    }
    ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '1') {
      ++pos_;
      return MeshAxes::k01;
    }
    return MeshAxes::k0;
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw ShardingParseError(message, pos_);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

int64_t LogicalMesh::devices(MeshAxes axes) const {
  int64_t n = 1;
  for (int d = 0; d < 2; ++d) {
    if (hasAxis(axes, d)) n *= shape[d];
  }
  return n;
}

ShardingParseError::ShardingParseError(const std::string& message, size_t position)
    : std::runtime_error(fmt::format("column {}: {}", position + 1, message)),
      position_(position) {}

ShardingSpec ShardingSpec::replicated(size_t rank) {
  return fromDims(std::vector<MeshAxes>(rank, MeshAxes::kNone));
}

ShardingSpec ShardingSpec::split(size_t rank, size_t dim, MeshAxes meshDims) {
  if (dim >= rank) {
    throw std::invalid_argument(fmt::format("split dimension {} of a rank-{} tensor", dim, rank));
  }
  std::vector<MeshAxes> dims(rank, MeshAxes::kNone);
  dims[dim] = meshDims;
  return fromDims(std::move(dims));
}

ShardingSpec ShardingSpec::fromDims(std::vector<MeshAxes> dims, MeshAxes partial) {
  ShardingSpec spec;
  spec.dims_ = std::move(dims);
  spec.partial_ = partial;
  return spec;
}

ShardingSpec ShardingSpec::parse(std::string_view text) { return SpecParser(text).parse(); }

bool ShardingSpec::isReplicated() const {
  if (partial_ != MeshAxes::kNone) return false;
  for (MeshAxes d : dims_) {
    if (d != MeshAxes::kNone) return false;
  }
  return true;
}

ShardingSpec ShardingSpec::withPartial(MeshAxes axes) const {
  ShardingSpec spec = *this;
  spec.partial_ = axes;
  return spec;
}

std::string ShardingSpec::toString() const {
  std::string out = dims_.empty() ? "()" : "";
  for (MeshAxes d : dims_) out += dimToken(d);
  if (partial_ != MeshAxes::kNone) out += "+P" + axisDigits(partial_);
  return out;
}

namespace {

// The first reason a spec cannot describe a tensor, found without making its
// message: the planner asks this of every candidate strategy and resharding.
struct Misfit {
  enum Kind { kNone, kRank, kAxisTwice, kNegative, kIndivisible } kind = kNone;
  size_t dim = 0;                      // the tensor dimension at fault
  MeshAxes twice = MeshAxes::kNone;    // kAxisTwice: the mesh axes used again
};

Misfit findMisfit(const std::vector<MeshAxes>& dims, MeshAxes partial, std::span<const int64_t> shape,
                  const LogicalMesh& mesh) {
  if (shape.size() != dims.size()) return {Misfit::kRank};
  // Each mesh dimension can hold one role only: split one tensor dimension, or
  // carry a partial sum, because a device has one coordinate along it.
  MeshAxes used = partial;
  for (size_t i = 0; i < dims.size(); ++i) {
    if ((used & dims[i]) != MeshAxes::kNone) return {Misfit::kAxisTwice, i, used & dims[i]};
    used = used | dims[i];
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (shape[i] < 0) return {Misfit::kNegative, i};
    if (shape[i] % mesh.devices(dims[i]) != 0) return {Misfit::kIndivisible, i};
  }
  return {};
}

}  // namespace

bool ShardingSpec::fits(std::span<const int64_t> shape, const LogicalMesh& mesh) const {
  return findMisfit(dims_, partial_, shape, mesh).kind == Misfit::kNone;
}

std::optional<std::string> ShardingSpec::validate(std::span<const int64_t> shape,
                                                  const LogicalMesh& mesh) const {
  const Misfit m = findMisfit(dims_, partial_, shape, mesh);
  switch (m.kind) {
    case Misfit::kNone:
      return std::nullopt;
    case Misfit::kRank:
      return fmt::format("spec {} has rank {} but the tensor has rank {}", toString(), dims_.size(),
                         shape.size());
    case Misfit::kAxisTwice:
      return fmt::format("spec {} uses mesh dimension {} twice", toString(),
                         axisDigits(m.twice).substr(0, 1));
    case Misfit::kNegative:
      return fmt::format("tensor dimension {} has negative size", m.dim);
    case Misfit::kIndivisible:
      return fmt::format(
          "spec {}: tensor dimension {} of size {} is not divisible by the {} "
          "devices of mesh dimension {}",
          toString(), m.dim, shape[m.dim], mesh.devices(dims_[m.dim]), axisDigits(dims_[m.dim]));
  }
  return std::nullopt;
}

int64_t ShardingSpec::shardCount(const LogicalMesh& mesh) const {
  int64_t n = 1;
  for (MeshAxes d : dims_) n *= mesh.devices(d);
  return n;
}

}  // namespace meshflow::ir
