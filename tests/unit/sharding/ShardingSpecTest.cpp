#include <catch2/catch.hpp>
#include <set>
#include <vector>

#include "ir/Sharding.h"

using meshflow::ir::LogicalMesh;
using meshflow::ir::MeshAxes;
using meshflow::ir::ShardingParseError;
using meshflow::ir::ShardingSpec;

namespace {

// Every spec of rank ≤ 3 over the four per-dimension layouts and four partial sets.
std::vector<ShardingSpec> allSpecs() {
  const MeshAxes kinds[] = {MeshAxes::kNone, MeshAxes::k0, MeshAxes::k1, MeshAxes::k01};
  std::vector<ShardingSpec> out;
  for (size_t rank = 0; rank <= 3; ++rank) {
    size_t combos = 1;
    for (size_t i = 0; i < rank; ++i) combos *= 4;
    for (size_t c = 0; c < combos; ++c) {
      std::vector<MeshAxes> dims;
      for (size_t i = 0, x = c; i < rank; ++i, x /= 4) dims.push_back(kinds[x % 4]);
      for (MeshAxes p : kinds) out.push_back(ShardingSpec::fromDims(dims, p));
    }
  }
  return out;
}

size_t parseErrorPosition(const char* text) {
  try {
    ShardingSpec::parse(text);
  } catch (const ShardingParseError& e) {
    return e.position();
  }
  FAIL("expected a parse error for " << text);
  return 0;
}

LogicalMesh mesh24() {
  LogicalMesh m;
  m.shape = {2, 4};
  return m;
}

}  // namespace

TEST_CASE("sharding spec: canonical strings", "[sharding][spec]") {
  CHECK(ShardingSpec::replicated(2).toString() == "RR");
  CHECK(ShardingSpec::split(2, 0, MeshAxes::k0).toString() == "S0R");
  CHECK(ShardingSpec::split(2, 1, MeshAxes::k1).toString() == "RS1");
  CHECK(ShardingSpec::split(2, 0, MeshAxes::k01).toString() == "S01R");
  CHECK(ShardingSpec::replicated(2).withPartial(MeshAxes::k0).toString() == "RR+P0");
  CHECK(ShardingSpec::split(2, 0, MeshAxes::k0).withPartial(MeshAxes::k1).toString() == "S0R+P1");
  CHECK(ShardingSpec::replicated(0).toString() == "()");
  CHECK(ShardingSpec::replicated(0).withPartial(MeshAxes::k01).toString() == "()+P01");
  CHECK(ShardingSpec::replicated(3).isReplicated());
  CHECK_FALSE(ShardingSpec::replicated(3).withPartial(MeshAxes::k1).isReplicated());
  CHECK_THROWS_AS(ShardingSpec::split(2, 2, MeshAxes::k0), std::invalid_argument);
}

TEST_CASE("sharding spec: every spec round-trips through its string", "[sharding][spec]") {
  std::vector<ShardingSpec> specs = allSpecs();
  std::set<std::string> strings;
  for (const ShardingSpec& s : specs) {
    INFO(s.toString());
    CHECK(ShardingSpec::parse(s.toString()) == s);
    strings.insert(s.toString());
  }
  CHECK(strings.size() == specs.size());  // Distinct specs print differently.
}

TEST_CASE("sharding spec: equality and a strict total order", "[sharding][spec]") {
  CHECK(ShardingSpec::parse("S0R") == ShardingSpec::split(2, 0, MeshAxes::k0));
  CHECK(ShardingSpec::parse("S0R") != ShardingSpec::parse("S0R+P1"));
  CHECK(ShardingSpec::parse("RR") < ShardingSpec::parse("RS0"));
  CHECK(ShardingSpec::parse("S0R") < ShardingSpec::parse("S1R"));
  std::set<ShardingSpec> ordered;
  std::vector<ShardingSpec> specs = allSpecs();
  for (const ShardingSpec& s : specs) ordered.insert(s);
  CHECK(ordered.size() == specs.size());
}

TEST_CASE("sharding spec: malformed text names the column", "[sharding][spec]") {
  CHECK(parseErrorPosition("") == 0);
  CHECK(parseErrorPosition("X") == 0);
  CHECK(parseErrorPosition("S2R") == 1);
  CHECK(parseErrorPosition("RS") == 2);
  CHECK(parseErrorPosition("S10") == 1);
  CHECK(parseErrorPosition("RR+Q") == 3);
  CHECK(parseErrorPosition("RR+P") == 4);
  CHECK(parseErrorPosition("RR+P0x") == 5);
  CHECK(parseErrorPosition("+P0") == 0);
  CHECK(parseErrorPosition("()R") == 2);
  try {
    ShardingSpec::parse("S0Rx");
  } catch (const ShardingParseError& e) {
    CHECK(std::string(e.what()) == "column 4: expected R, S0, S1 or S01, found 'x'");
  }
}

TEST_CASE("sharding spec: validate against shape and mesh", "[sharding][spec]") {
  LogicalMesh mesh = mesh24();
  std::vector<int64_t> shape{8, 12};
  CHECK_FALSE(ShardingSpec::parse("S0S1").validate(shape, mesh));
  CHECK_FALSE(ShardingSpec::parse("S01R").validate(shape, mesh));
  CHECK_FALSE(ShardingSpec::parse("RR+P01").validate(shape, mesh));
  CHECK_FALSE(ShardingSpec::parse("S0R+P1").validate(shape, mesh));

  CHECK(ShardingSpec::parse("S0S0").validate(shape, mesh) ==
        "spec S0S0 uses mesh dimension 0 twice");
  CHECK(ShardingSpec::parse("S01S1").validate(shape, mesh) ==
        "spec S01S1 uses mesh dimension 1 twice");
  CHECK(ShardingSpec::parse("S0R+P0").validate(shape, mesh) ==
        "spec S0R+P0 uses mesh dimension 0 twice");
  CHECK(ShardingSpec::parse("S0R").validate(std::vector<int64_t>{8}, mesh) ==
        "spec S0R has rank 2 but the tensor has rank 1");
  CHECK(ShardingSpec::parse("RS01").validate(std::vector<int64_t>{8, 12}, mesh) ==
        "spec RS01: tensor dimension 1 of size 12 is not divisible by the 8 devices of mesh "
        "dimension 01");
  CHECK(ShardingSpec::parse("S1R").validate(std::vector<int64_t>{6, 12}, mesh));
  CHECK(ShardingSpec::parse("S01R").shardCount(mesh) == 8);
  CHECK(mesh.devices(MeshAxes::k1) == 4);
}
