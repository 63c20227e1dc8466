// The SPMD rules of ops the backward meets on a batch-split mesh
// (runtime/parallel/SpmdRules.h): which layout each op runs in, given the
// layouts its inputs are held in. Whole training steps under these rules are
// checked against the serial reference in SpmdRunnerTest.cpp and the property
// tests; this file pins the layouts themselves.
#include <catch2/catch.hpp>

#include "runtime/parallel/SpmdRules.h"

using namespace meshflow;
using ir::ShardingSpec;
using runtime::spmdLayout;

namespace {

using Shapes = std::vector<std::vector<std::int64_t>>;

ir::LogicalMesh mesh(std::int64_t a, std::int64_t b) {
  ir::LogicalMesh m;
  m.shape = {a, b};
  return m;
}

ir::Op opOf(ir::OpKind kind, ir::Attributes attrs = {}) {
  ir::Op op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  return op;
}

std::vector<ShardingSpec> specs(std::initializer_list<const char*> texts) {
  std::vector<ShardingSpec> out;
  for (const char* t : texts) out.push_back(ShardingSpec::parse(t));
  return out;
}

}  // namespace

TEST_CASE("row-wise ops keep the batch split of their leading operand", "[parallel][spmd][rules]") {
  SECTION("layer norm's gradient: dx split, dgamma and dbeta partial sums") {
    auto l = spmdLayout(opOf(ir::OpKind::LayerNormGrad), specs({"S1RR", "R", "RRR"}),
                        Shapes{{4, 8, 16}, {16}, {4, 8, 16}}, Shapes{{4, 8, 16}, {16}, {16}}, {},
                        mesh(1, 2));
    CHECK(l.inputs == specs({"S1RR", "R", "S1RR"}));
    CHECK(l.outputs == specs({"S1RR", "R+P1", "R+P1"}));
  }
  SECTION("softmax and the heads' layout") {
    auto l = spmdLayout(opOf(ir::OpKind::SplitHeads), specs({"S0RR"}), Shapes{{4, 8, 16}},
                        Shapes{{4, 2, 8, 8}}, {}, mesh(2, 1));
    CHECK(l.outputs == specs({"S0RRR"}));
    l = spmdLayout(opOf(ir::OpKind::Softmax), specs({"S0RRS1"}), Shapes{{4, 2, 8, 8}},
                   Shapes{{4, 2, 8, 8}}, {}, mesh(2, 2));
    CHECK(l.inputs == specs({"S0RRR"}));  // the softmax dimension is gathered
    CHECK(l.outputs == specs({"S0RRR"}));
  }
  SECTION("split along the batch is not row-wise") {
    auto l = spmdLayout(opOf(ir::OpKind::Split, {{"axis", std::int64_t{0}}}), specs({"S1R"}),
                        Shapes{{4, 6}}, Shapes{{2, 6}, {2, 6}}, {}, mesh(1, 2));
    CHECK(l.outputs == specs({"RR", "RR"}));
  }
  SECTION("cross entropy's gradient runs whole, and is cut back to the logits' split") {
    const Shapes in{{4, 8, 12}, {4, 8}, {}};
    auto held = specs({"S1RR", "S1R", "()"});
    auto l = spmdLayout(opOf(ir::OpKind::CrossEntropyGrad), held, in, Shapes{{4, 8, 12}}, {}, mesh(1, 2));
    CHECK(l.outputs == specs({"RRR"}));
    CHECK(runtime::cutTarget(held, in, {4, 8, 12}) == ShardingSpec::parse("S1RR"));
    CHECK(runtime::cutTarget(specs({"RRR+P1"}), Shapes{{4, 8, 12}}, {4, 8, 12}) ==
          ShardingSpec::parse("RRR"));  // a partial sum is not a layout to cut to
  }
}

TEST_CASE("reshape and reduce_to_shape keep the splits they can", "[parallel][spmd][rules]") {
  SECTION("reshape: the batch split and a kept last dimension's split pass through") {
    auto l = spmdLayout(opOf(ir::OpKind::Reshape), specs({"S0RS1"}), Shapes{{4, 8, 16}},
                        Shapes{{32, 16}}, {}, mesh(2, 2));
    CHECK(l.outputs == specs({"S0S1"}));
    // The last dimension changes: only the batch split stays.
    l = spmdLayout(opOf(ir::OpKind::Reshape), specs({"S0RS1"}), Shapes{{4, 8, 16}},
                   Shapes{{4, 128}}, {}, mesh(2, 2));
    CHECK(l.inputs == specs({"S0RR"}));
    CHECK(l.outputs == specs({"S0R"}));
  }
  SECTION("reduce_to_shape: a bias gradient") {
    // Summed over the split batch: a partial sum.
    auto l = spmdLayout(opOf(ir::OpKind::ReduceToShape), specs({"S1RR", "R"}),
                        Shapes{{4, 8, 16}, {16}}, Shapes{{16}}, {}, mesh(1, 2));
    CHECK(l.outputs == specs({"R+P1"}));
    // A column-parallel bias: the kept dimension keeps its split, nothing to sum.
    l = spmdLayout(opOf(ir::OpKind::ReduceToShape), specs({"RRS1", "S1"}),
                   Shapes{{4, 8, 16}, {16}}, Shapes{{16}}, {}, mesh(1, 2));
    CHECK(l.inputs == specs({"RRS1", "S1"}));
    CHECK(l.outputs == specs({"S1"}));
  }
}
