#include "runtime/parallel/SpmdRules.h"

#include <initializer_list>
#include <variant>

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
  return s.fits(shape, mesh);
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

// Ops whose rows along the leading dimension are independent: a split of
// dimension 0 passes through them. How each operand and result goes with it.
enum class RowRole : std::uint8_t { kRows, kWhole, kPartial };

struct RowOp {
  std::size_t lead = 0;  ///< The input whose dimension-0 split the op takes.
  std::vector<RowRole> inputs, outputs;
};

std::int64_t axisOf(const ir::Op& op, std::size_t rank) {
  auto it = op.attrs.find("axis");
  std::int64_t a = it == op.attrs.end() ? -1 : std::get<std::int64_t>(it->second);
  return a < 0 ? a + static_cast<std::int64_t>(rank) : a;
}

std::optional<RowOp> rowOp(const ir::Op& op, const Shapes& in, const Shapes& out) {
  using R = RowRole;
  const std::size_t rank = in.empty() ? 0 : in[0].size();
  switch (op.kind) {
    case OpKind::Softmax:
    case OpKind::CausalMask:
    case OpKind::CausalMaskGrad:
    case OpKind::SplitHeads:
    case OpKind::MergeHeads:
      return RowOp{0, {R::kRows}, {R::kRows}};
    case OpKind::SoftmaxGrad:
      return RowOp{0, {R::kRows, R::kRows}, {R::kRows}};
    case OpKind::LayerNorm:
      return RowOp{0, {R::kRows, R::kWhole, R::kWhole}, {R::kRows}};
    case OpKind::LayerNormGrad:  // dgamma and dbeta sum over the rows
      return RowOp{0, {R::kRows, R::kWhole, R::kRows}, {R::kRows, R::kPartial, R::kPartial}};
    case OpKind::EmbeddingGrad:  // the rows' scatter-adds into the table
      return RowOp{1, {R::kRows, R::kRows}, {R::kPartial}};
    case OpKind::Split:
      if (axisOf(op, rank) == 0) return std::nullopt;
      return RowOp{0, {R::kRows}, std::vector<R>(out.size(), R::kRows)};
    case OpKind::Concat:
      if (axisOf(op, rank) == 0) return std::nullopt;
      return RowOp{0, std::vector<R>(in.size(), R::kRows), {R::kRows}};
    default:
      return std::nullopt;
  }
}

ShardingSpec rowSpec(RowRole role, std::size_t rank, MeshAxes rows) {
  switch (role) {
    case RowRole::kRows: return ShardingSpec::split(rank, 0, rows);
    case RowRole::kPartial: return ShardingSpec::replicated(rank).withPartial(rows);
    case RowRole::kWhole: break;
  }
  return ShardingSpec::replicated(rank);
}

// The lead operand's dimension-0 split through a row-wise op; other splits of
// it are gathered.
std::optional<SpmdLayout> rowsLayout(const ir::Op& op, const std::vector<ShardingSpec>& held,
                                     const Shapes& in, const Shapes& out,
                                     const std::vector<ShardingSpec>& planned,
                                     const ir::LogicalMesh& mesh) {
  std::optional<RowOp> r = rowOp(op, in, out);
  if (!r || r->lead >= in.size() || r->inputs.size() != in.size() || r->outputs.size() != out.size() ||
      in[r->lead].empty())
    return std::nullopt;
  const MeshAxes rows = preferred(held, planned, r->lead).dim(0);
  if (rows == MeshAxes::kNone) return std::nullopt;
  SpmdLayout l;
  for (std::size_t i = 0; i < in.size(); ++i) l.inputs.push_back(rowSpec(r->inputs[i], in[i].size(), rows));
  for (std::size_t o = 0; o < out.size(); ++o) l.outputs.push_back(rowSpec(r->outputs[o], out[o].size(), rows));
  if (!layoutFits(l, in, out, mesh)) return std::nullopt;
  return l;
}

// x -> y of another shape: a split of dimension 0 is a contiguous run of rows
// on both sides, and a split of the last dimension, where both keep it,
// splits the same elements of each row. Other splits are gathered.
std::optional<SpmdLayout> reshapeLayout(const std::vector<ShardingSpec>& held, const Shapes& in,
                                        const Shapes& out, const std::vector<ShardingSpec>& planned,
                                        const ir::LogicalMesh& mesh) {
  if (in.size() != 1 || out.size() != 1 || in[0].size() < 2 || out[0].size() < 2) return std::nullopt;
  const ShardingSpec& x = preferred(held, planned, 0);
  const std::size_t rx = in[0].size(), ry = out[0].size();
  const MeshAxes rows = x.dim(0);
  const MeshAxes columns = in[0].back() == out[0].back() ? x.dim(rx - 1) : MeshAxes::kNone;
  for (MeshAxes keep : {columns, MeshAxes::kNone}) {
    if (rows == MeshAxes::kNone && keep == MeshAxes::kNone) break;
    std::vector<MeshAxes> a(rx, MeshAxes::kNone), y(ry, MeshAxes::kNone);
    a[0] = y[0] = rows;
    a[rx - 1] = y[ry - 1] = keep;
    SpmdLayout l{{ShardingSpec::fromDims(a)}, {ShardingSpec::fromDims(y)}};
    if (layoutFits(l, in, out, mesh)) return l;
  }
  return std::nullopt;
}

// dy, like -> dx, dy summed over the dimensions `like` broadcasts: dy's splits
// of the dimensions kept stay, those of the dimensions summed make dx a
// partial sum over their axes. `like` is read for its shape only.
std::optional<SpmdLayout> reduceToShapeLayout(const std::vector<ShardingSpec>& held, const Shapes& in,
                                              const Shapes& out, const std::vector<ShardingSpec>& planned,
                                              const ir::LogicalMesh& mesh) {
  if (in.size() != 2 || out.size() != 1 || in[1].size() > in[0].size()) return std::nullopt;
  const ShardingSpec dy = withoutPartial(preferred(held, planned, 0));
  if (dy.isReplicated()) return std::nullopt;
  const std::size_t shift = in[0].size() - in[1].size();
  std::vector<MeshAxes> kept(in[1].size(), MeshAxes::kNone);
  MeshAxes summed = MeshAxes::kNone;
  for (std::size_t d = 0; d < in[0].size(); ++d) {
    const bool reduced = d < shift || (in[1][d - shift] == 1 && in[0][d] != 1);
    if (reduced)
      summed = summed | dy.dim(d);
    else
      kept[d - shift] = dy.dim(d);
  }
  SpmdLayout l{{dy, ShardingSpec::fromDims(kept)}, {ShardingSpec::fromDims(kept, summed)}};
  if (!layoutFits(l, in, out, mesh)) return std::nullopt;
  return l;
}

}  // namespace

ShardingSpec cutTarget(const std::vector<ShardingSpec>& held, const Shapes& inputShapes,
                       const std::vector<std::int64_t>& outputShape) {
  for (std::size_t i = 0; i < held.size(); ++i)
    if (inputShapes[i] == outputShape && held[i].partial() == MeshAxes::kNone && !held[i].isReplicated())
      return held[i];
  return ShardingSpec::replicated(outputShape.size());
}

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
    case OpKind::Reshape:
      layout = reshapeLayout(held, inputShapes, outputShapes, planned, mesh);
      break;
    case OpKind::ReduceToShape:
      layout = reduceToShapeLayout(held, inputShapes, outputShapes, planned, mesh);
      break;
    default:
      layout = rowsLayout(op, held, inputShapes, outputShapes, planned, mesh);
      break;
  }
  return layout ? *layout : whole(inputShapes, outputShapes);
}

}  // namespace meshflow::runtime
