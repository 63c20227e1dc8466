// Which attentions of a training graph run fused (runtime/AttentionGroups.h):
// the standard library's multi-head and grouped-query attention, with the
// backward autodiff gives them, and none where an intermediate is read
// elsewhere.
#include "ParallelModels.h"
#include "runtime/AttentionGroups.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

std::vector<runtime::AttentionGroup> groupsOf(const std::string& prelude, const std::string& model) {
  auto training = passes::buildTrainingGraph(traceModel(prelude, model), passes::OptimizerConfig::adam());
  // The groups name ops and values of this graph only by id: copy them out.
  return runtime::findAttentionGroups(training.graph, runtime::ValueReaders(training.graph));
}

// Attention without a causal mask; `reuse` also reads the probabilities
// into the loss, which keeps them from being fused.
const char* kProbe = R"(
model probe(reuse = false) {
  let x = input("x", f32[batch, 8, 16])
  let qkv = split(linear(x, 48, name = "qkv"), 3)
  let q = split_heads(qkv[0], 2)
  let k = split_heads(qkv[1], 2)
  let v = split_heads(qkv[2], 2)
  let p = softmax(matmul(q, k, transpose_b = true) * 0.25)
  let o = merge_heads(matmul(p, v))
  var loss = mean(o * o)
  if reuse { loss = loss + mean(p) }
  return loss
}
)";

}  // namespace

TEST_CASE("a GPT's attentions are found with their backward", "[parallel][attention]") {
  auto groups = groupsOf("", "gpt(layers = 3, hidden = 16, heads = 2, seq = 8, vocab = 32)");
  REQUIRE(groups.size() == 3);
  for (const auto& g : groups) {
    CHECK(g.forward.size() == 5);   // matmul, scale, causal mask, softmax, matmul
    CHECK(g.backward.size() == 7);  // 2 matmuls, softmax grad, mask grad, scale, 2 matmuls
    CHECK(g.causal);
    CHECK(g.scale == Approx(1 / std::sqrt(8.0)));
    CHECK(g.probs == g.softmaxOut);
    CHECK(g.backward.front() > g.forward.back());
  }
  CHECK(groups[0].forward.back() < groups[1].forward.front());
}

TEST_CASE("grouped-query attention is found through its reshapes", "[parallel][attention]") {
  auto groups =
      groupsOf("", "llama(layers = 2, hidden = 16, heads = 4, kv_heads = 2, ffn = 32, seq = 8, vocab = 32, dtype = bf16)");
  REQUIRE(groups.size() == 2);
  for (const auto& g : groups) {
    CHECK(g.forward.size() == 7);
    CHECK(g.backward.size() == 9);
    CHECK(g.causal);
    CHECK(g.probs != g.softmaxOut);  // the reshaped probabilities the last matmul reads
  }
}

TEST_CASE("attention without a mask is fused unless its probabilities are read elsewhere", "[parallel][attention]") {
  auto plain = groupsOf(kProbe, "probe()");
  REQUIRE(plain.size() == 1);
  CHECK_FALSE(plain[0].causal);
  CHECK(plain[0].scale == 0.25);
  CHECK(plain[0].forward.size() == 4);
  CHECK(plain[0].backward.size() == 6);
  CHECK(groupsOf(kProbe, "probe(reuse = true)").empty());
}

TEST_CASE("an op of a fused attention run apart from its group is an error naming it", "[parallel][attention]") {
  ir::Graph forward = traceModel("", "gpt(layers = 1, hidden = 16, heads = 2, seq = 8, vocab = 32)");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::OpRunner runner(training.graph, 2);
  auto groups = runtime::findAttentionGroups(training.graph, runner.readers());
  REQUIRE(groups.size() == 1);
  const ir::OpId softmax = groups[0].forward[3];
  runner.fuseAttention(groups);
  runtime::ValueTable values;
  const std::vector<ir::OpId> alone{softmax};
  CHECK_THROWS_WITH(runner.run(alone, values, {}, {}, 1),
                    Catch::Contains("runs apart from the fused attention of ops") &&
                        Catch::Contains("its forward must run as one"));
}
