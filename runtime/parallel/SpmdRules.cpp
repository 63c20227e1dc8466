#include "runtime/parallel/SpmdRules.h"

#include <initializer_list>

namespace meshflow::runtime {
namespace {

using ir::MeshAxes;
using ir::OpKind;
using ir::ShardingSpec;
using Shapes = std::vector<std::vector<std::int64_t>>;

ShardingSpec withoutPartial(const ShardingSpec& s) { return ShardingSpec::fromDims(s.dims()); }

MeshAxes usedAxes(const ShardingSpec& s) {
  MeshAxes used = s.partial();
  for (MeshAxes a : s.dims()) used = used | a;
  return used;
}

bool fits(const ShardingSpec& s, const std::vector<std::int64_t>& shape, const ir::LogicalMesh& mesh) {
  return !s.validate(shape, mesh);
}

SpmdLayout whole(const Shapes& inputs, const Shapes& outputs) {
  SpmdLayout l;
  for (const auto& s : inputs) l.inputs.push_back(ShardingSpec::replicated(s.size()));
  for (const auto& s : outputs) l.outputs.push_back(ShardingSpec::replicated(s.size()));
  return l;
}

const ShardingSpec& preferred(const std::vector<ShardingSpec>& held, const std::vector<ShardingSpec>& planned,
                              std::size_t i) {
  return planned.empty() ? held[i] : planned[i];
}

// y[..., m, n] = a[..., m, k] · b[(...,) k, n] (a as [..., k, m] with
// transpose_a, b as [n, k] with transpose_b).
std::optional<SpmdLayout> matmulLayout(const ir::Op& op, const std::vector<ShardingSpec>& held,
                                       const Shapes& in, const Shapes& out,
                                       const std::vector<ShardingSpec>& planned, const ir::LogicalMesh& mesh) {
  bool transposeA = ir::flagAttr(op, "transpose_a"), transposeB = ir::flagAttr(op, "transpose_b");
  std::size_t ra = in[0].size(), rb = in[1].size();
  if (ra < 2 || rb < 2) return std::nullopt;
  bool batched = rb == ra && ra > 2;
  std::size_t kA = transposeA ? ra - 2 : ra - 1, mA = transposeA ? ra - 1 : ra - 2;
  std::size_t kB = transposeB ? rb - 1 : rb - 2, nB = transposeB ? rb - 2 : rb - 1;
  std::vector<MeshAxes> a = withoutPartial(preferred(held, planned, 0)).dims();
  MeshAxes n = preferred(held, planned, 1).dim(nB);
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt == 1) a[kA] = MeshAxes::kNone;  // b cannot follow a's k split: gather k
    if (attempt == 2) n = MeshAxes::kNone;
    ShardingSpec as = ShardingSpec::fromDims(a);
    MeshAxes nFree = (n & usedAxes(as)) == MeshAxes::kNone ? n : MeshAxes::kNone;
    std::vector<MeshAxes> b(rb, MeshAxes::kNone);
    b[kB] = a[kA];
    b[nB] = nFree;
    if (batched)
      for (std::size_t i = 0; i + 2 < ra; ++i) b[i] = a[i];
    std::vector<MeshAxes> y(a.begin(), a.end() - 2);
    y.push_back(a[mA]);
    y.push_back(nFree);
    SpmdLayout l{{as, ShardingSpec::fromDims(b)}, {ShardingSpec::fromDims(y, a[kA])}};
    if (fits(l.inputs[0], in[0], mesh) && fits(l.inputs[1], in[1], mesh) && fits(l.outputs[0], out[0], mesh))
      return l;
  }
  return std::nullopt;
}

bool isLinear(OpKind k) { return k == OpKind::Add || k == OpKind::Sub || k == OpKind::Neg || k == OpKind::Scale; }

// Element-wise with NumPy broadcasting: the operand shaped like the output
// leads; the other follows it where it is not broadcast.
std::optional<SpmdLayout> elementwiseLayout(const ir::Op& op, const std::vector<ShardingSpec>& held,
                                            const Shapes& in, const Shapes& out,
                                            const std::vector<ShardingSpec>& planned,
                                            const ir::LogicalMesh& mesh) {
  const auto& shape = out[0];
  std::size_t lead = in.size();
  for (std::size_t i = in.size(); i-- > 0;)
    if (in[i] == shape) lead = i;
  if (lead == in.size()) return std::nullopt;
  ShardingSpec leader = preferred(held, planned, lead);
  bool samePartial = isLinear(op.kind) && leader.partial() != MeshAxes::kNone;
  SpmdLayout l;
  for (std::size_t i = 0; i < in.size(); ++i) {
    std::vector<MeshAxes> dims(in[i].size(), MeshAxes::kNone);
    std::size_t shift = shape.size() - in[i].size();
    for (std::size_t d = 0; d < in[i].size(); ++d)
      if (in[i][d] == shape[d + shift]) dims[d] = leader.dim(d + shift);
    l.inputs.push_back(ShardingSpec::fromDims(dims));
    samePartial = samePartial && held[i].partial() == leader.partial() && held[i].dims() == dims;
  }
  MeshAxes partial = samePartial ? leader.partial() : MeshAxes::kNone;
  if (partial != MeshAxes::kNone)
    for (ShardingSpec& s : l.inputs) s = s.withPartial(partial);
  l.outputs.push_back(ShardingSpec::fromDims(leader.dims(), partial));
  if (!fits(l.outputs[0], shape, mesh)) return std::nullopt;
  return l;
}

// Activation gradients (v, dy) -> dx and optimizer updates (w, g, scale, m[, v]):
// every operand but the scalar scale in the first operand's layout.
SpmdLayout followFirst(const std::vector<ShardingSpec>& held, const Shapes& in, const Shapes& out) {
  ShardingSpec first = withoutPartial(held[0]);
  SpmdLayout l;
  for (const auto& s : in) l.inputs.push_back(s == in[0] ? first : ShardingSpec::replicated(s.size()));
  for (const auto& s : out) l.outputs.push_back(s == in[0] ? first : ShardingSpec::replicated(s.size()));
  return l;
}

// Mixture-of-experts ops (docs/graph-ir.md, "Mixture of experts"). Their
// routing is per group (a row of the batch) and per expert, so a device can
// run the kernel on any box that keeps each group's whole sequence: tokens
// [B, S, h] and gates [B, S, E] split over B (`batch`), E (`experts`, gates
// only) and h (`hidden`); slot tensors [E, B*capacity, h] split the same way
// (B as blocks of whole groups). The batch split comes from the gates, the
// expert split from the slot tensor (or the gates), the hidden split from the
// tokens or slots; an expert-split slot tensor meeting batch-split gates is
// thus resharded to batch-split slots, the all-to-all of expert parallelism.
struct MoeAxes {
  MeshAxes batch = MeshAxes::kNone, experts = MeshAxes::kNone, hidden = MeshAxes::kNone;
};

MeshAxes firstFree(std::initializer_list<MeshAxes> candidates, MeshAxes used) {
  for (MeshAxes a : candidates)
    if (a != MeshAxes::kNone && (a & used) == MeshAxes::kNone) return a;
  return MeshAxes::kNone;
}

// `slots` is the index of the slot tensor among the inputs (none for dispatch),
// `tokens` that of the token-shaped tensor (x or dout; none for combine).
MoeAxes moeAxes(const std::vector<ShardingSpec>& specs, std::optional<std::size_t> slots,
                std::optional<std::size_t> tokens) {
  const ShardingSpec& gates = specs[1];  // the gates are input 1 of every moe op
  MoeAxes m;
  m.batch = gates.dim(0);
  m.experts = firstFree({slots ? specs[*slots].dim(0) : MeshAxes::kNone, gates.dim(2)}, m.batch);
  m.hidden = firstFree({tokens ? specs[*tokens].dim(2) : MeshAxes::kNone,
                        slots ? specs[*slots].dim(2) : MeshAxes::kNone},
                       m.batch | m.experts);
  return m;
}

ShardingSpec tokensSpec(const MoeAxes& m) {
  return ShardingSpec::fromDims({m.batch, MeshAxes::kNone, m.hidden});
}
ShardingSpec gatesSpec(const MoeAxes& m, MeshAxes partial = MeshAxes::kNone) {
  return ShardingSpec::fromDims({m.batch, MeshAxes::kNone, m.experts}, partial);
}
ShardingSpec slotsSpec(const MoeAxes& m) {
  return ShardingSpec::fromDims({m.experts, m.batch, m.hidden});
}

SpmdLayout moeLayoutOf(OpKind kind, const MoeAxes& m) {
  switch (kind) {
    case OpKind::MoeDispatch:  // x, gates -> slots
      return {{tokensSpec(m), gatesSpec(m)}, {slotsSpec(m)}};
    case OpKind::MoeCombine:  // slots, gates -> tokens, summed over the experts
    case OpKind::MoeDispatchGrad:
      return {{slotsSpec(m), gatesSpec(m)},
              {ShardingSpec::fromDims({m.batch, MeshAxes::kNone, m.hidden}, m.experts)}};
    default:  // MoeCombineGrad: slots, gates, dout -> dslots, dgates (a dot over h)
      return {{slotsSpec(m), gatesSpec(m), tokensSpec(m)}, {slotsSpec(m), gatesSpec(m, m.hidden)}};
  }
}

bool layoutFits(const SpmdLayout& l, const Shapes& in, const Shapes& out,
                const ir::LogicalMesh& mesh) {
  for (std::size_t i = 0; i < in.size(); ++i)
    if (!fits(l.inputs[i], in[i], mesh)) return false;
  for (std::size_t o = 0; o < out.size(); ++o)
    if (!fits(l.outputs[o], out[o], mesh)) return false;
  return true;
}

std::optional<SpmdLayout> moeLayout(const ir::Op& op, const std::vector<ShardingSpec>& held,
                                    const Shapes& in, const Shapes& out,
                                    const std::vector<ShardingSpec>& planned,
                                    const ir::LogicalMesh& mesh) {
  if (in.size() < 2 || in[1].size() != 3) return std::nullopt;
  std::vector<ShardingSpec> specs;
  for (std::size_t i = 0; i < in.size(); ++i)
    specs.push_back(withoutPartial(preferred(held, planned, i)));
  bool dispatch = op.kind == OpKind::MoeDispatch;
  std::optional<std::size_t> slots = dispatch ? std::nullopt : std::optional<std::size_t>(0);
  std::optional<std::size_t> tokens = dispatch ? std::optional<std::size_t>(0)
                                      : op.kind == OpKind::MoeCombineGrad
                                          ? std::optional<std::size_t>(2)
                                          : std::nullopt;
  MoeAxes m = moeAxes(specs, slots, tokens);
  // Give up splits, finest first, until every box divides.
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (attempt == 1) m.hidden = MeshAxes::kNone;
    if (attempt == 2) m.experts = MeshAxes::kNone;
    if (attempt == 3) m.batch = MeshAxes::kNone;
    SpmdLayout l = moeLayoutOf(op.kind, m);
    if (layoutFits(l, in, out, mesh)) return l;
  }
  return std::nullopt;
}

}  // namespace

SpmdLayout spmdLayout(const ir::Op& op, const std::vector<ShardingSpec>& held, const Shapes& inputShapes,
                      const Shapes& outputShapes, const std::vector<ShardingSpec>& planned,
                      const ir::LogicalMesh& mesh) {
  std::optional<SpmdLayout> layout;
  switch (op.kind) {
    case OpKind::MatMul:
      layout = matmulLayout(op, held, inputShapes, outputShapes, planned, mesh);
      break;
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Neg:
    case OpKind::Relu:
    case OpKind::Gelu:
    case OpKind::Tanh:
    case OpKind::Sigmoid:
    case OpKind::Exp:
    case OpKind::Rsqrt:
    case OpKind::Scale:
    case OpKind::Cast:
      layout = elementwiseLayout(op, held, inputShapes, outputShapes, planned, mesh);
      break;
    case OpKind::ReluGrad:
    case OpKind::GeluGrad:
    case OpKind::TanhGrad:
    case OpKind::SigmoidGrad:
    case OpKind::SgdUpdate:
    case OpKind::AdamUpdate:
      layout = followFirst(held, inputShapes, outputShapes);
      break;
    case OpKind::MoeDispatch:
    case OpKind::MoeCombine:
    case OpKind::MoeDispatchGrad:
    case OpKind::MoeCombineGrad:
      layout = moeLayout(op, held, inputShapes, outputShapes, planned, mesh);
      break;
    default:
      break;
  }
  return layout ? *layout : whole(inputShapes, outputShapes);
}

}  // namespace meshflow::runtime
