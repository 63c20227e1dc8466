// Checks every training graph must pass, and small queries the tests share.
#pragma once

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "passes/Autodiff.h"
#include "passes/Verify.h"

namespace meshflow::autodiff_test {

/// Everything of a graph a pass could depend on, one line per op, so two
/// graphs are identical exactly when their dumps are.
inline std::string dump(const ir::Graph& graph) {
  std::string out;
  auto attrText = [](const ir::Attribute& a) {
    if (auto* i = std::get_if<std::int64_t>(&a)) return std::to_string(*i);
    if (auto* d = std::get_if<double>(&a)) return fmt::format("{}", *d);
    if (auto* s = std::get_if<std::string>(&a)) return "\"" + *s + "\"";
    return fmt::format("[{}]", fmt::join(std::get<std::vector<std::int64_t>>(a), ","));
  };
  for (ir::OpId id = 0; id < graph.ops().size(); ++id) {
    const ir::Op& op = graph.op(id);
    std::vector<std::string> outs, attrs;
    for (ir::ValueId v : op.outputs)
      outs.push_back(fmt::format("%{}:{}{}", v, graph.value(v).type.text(),
                                 graph.value(v).name.empty() ? "" : "@" + graph.value(v).name));
    for (const auto& [name, value] : op.attrs) attrs.push_back(name + "=" + attrText(value));
    out += fmt::format("{} = {}({}) {{{}}} {} scope={} fwd={} loc={}:{}\n", fmt::join(outs, ", "),
                       ir::opName(op.kind), fmt::join(op.inputs, ","), fmt::join(attrs, " "),
                       ir::phaseName(op.phase), op.scope,
                       op.forwardOp ? std::to_string(*op.forwardOp) : "-", op.location.file,
                       op.location.line);
  }
  out += fmt::format("outputs {}\n", fmt::join(graph.outputs, ","));
  return out;
}

inline bool isStateLeaf(const ir::Op& op) {
  return op.kind == ir::OpKind::Parameter && op.phase == ir::Phase::Update;
}

inline bool isUpdateStep(ir::OpKind kind) {
  return kind == ir::OpKind::SgdUpdate || kind == ir::OpKind::AdamUpdate;
}

/// The ops of `graph` in `phase` made for forward op `forwardOp`.
inline std::vector<ir::OpId> madeFor(const ir::Graph& graph, ir::OpId forwardOp, ir::Phase phase) {
  std::vector<ir::OpId> ids;
  for (ir::OpId id = 0; id < graph.ops().size(); ++id)
    if (graph.op(id).phase == phase && graph.op(id).forwardOp == forwardOp) ids.push_back(id);
  return ids;
}

inline std::vector<ir::OpKind> kindsOf(const ir::Graph& graph, const std::vector<ir::OpId>& ids) {
  std::vector<ir::OpKind> kinds;
  for (ir::OpId id : ids) kinds.push_back(graph.op(id).kind);
  return kinds;
}

inline int count(const ir::Graph& graph, ir::OpKind kind, ir::Phase phase) {
  int n = 0;
  for (const auto& op : graph.ops()) n += op.kind == kind && op.phase == phase;
  return n;
}

/// The invariants of any training graph built from `forward`.
inline void checkTrainingGraph(const ir::Graph& forward, const passes::TrainingGraph& training) {
  const ir::Graph& g = training.graph;
  const std::size_t forwardOps = forward.ops().size();
  REQUIRE(g.ops().size() > forwardOps);
  // SSA, and every op's recorded types are what the IR's type rules infer.
  REQUIRE_NOTHROW(passes::verifyGraph(forward));
  REQUIRE_NOTHROW(passes::verifyGraph(g));

  // The forward ops are kept unchanged, with the same ids.
  ir::Graph prefix = g;
  prefix.ops().resize(forwardOps);
  prefix.outputs = forward.outputs;
  CHECK(dump(prefix) == dump(forward));

  // Phases run fwd, then bwd, then update; every value is produced before it is read.
  for (ir::OpId id = 0; id < g.ops().size(); ++id) {
    const ir::Op& op = g.op(id);
    INFO("op " << id << " " << ir::opName(op.kind));
    CHECK((op.phase == ir::Phase::Forward) == (id < forwardOps));
    if (id > 0) CHECK(static_cast<int>(g.op(id - 1).phase) <= static_cast<int>(op.phase));
    for (ir::ValueId v : op.inputs) CHECK(g.value(v).producer < id);
    for (ir::ValueId v : op.outputs) CHECK(g.value(v).producer == id);
    if (op.phase == ir::Phase::Forward) continue;
    // Backward ops belong to a forward op, carry its scope, and never produce integers.
    bool global = op.phase == ir::Phase::Update && !op.forwardOp;
    if (global) {
      CHECK(op.scope.empty());
      CHECK((op.kind == ir::OpKind::GlobalNorm || op.kind == ir::OpKind::ClipScale ||
             op.kind == ir::OpKind::Constant));
      continue;
    }
    REQUIRE(op.forwardOp);
    REQUIRE(*op.forwardOp < forwardOps);
    CHECK(op.scope == g.op(*op.forwardOp).scope);
    for (ir::ValueId v : op.outputs) CHECK(g.value(v).type.dtype == ir::DType::F32);
    if (op.phase == ir::Phase::Update) CHECK(g.op(*op.forwardOp).kind == ir::OpKind::Parameter);
    if (op.kind == ir::OpKind::DropoutGrad)
      CHECK(std::get<std::int64_t>(op.attrs.at("forward_op")) == *op.forwardOp);
  }

  // Every model parameter has exactly one update op, reading its gradient.
  std::vector<ir::ValueId> params = forward.parameters();
  std::vector<ir::OpId> updates;
  for (ir::OpId id = 0; id < g.ops().size(); ++id)
    if (isUpdateStep(g.op(id).kind)) updates.push_back(id);
  REQUIRE(updates.size() == params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ir::Op& update = g.op(updates[i]);
    CHECK(update.inputs.at(0) == params[i]);
    CHECK(update.forwardOp == g.value(params[i]).producer);
    CHECK(g.value(update.inputs.at(1)).type == g.value(params[i]).type);
    for (ir::ValueId v : update.outputs) CHECK(g.value(v).type == g.value(params[i]).type);
  }

  // outputs = [loss, updated parameters, updated state]; write-backs name their leaves.
  REQUIRE(g.outputs.size() == 1 + training.writeBacks.size());
  CHECK(g.outputs[0] == forward.outputs[0]);
  for (std::size_t i = 0; i < training.writeBacks.size(); ++i) {
    const auto& wb = training.writeBacks[i];
    CHECK(g.outputs[i + 1] == wb.updated);
    CHECK(g.value(wb.updated).type == g.value(wb.target).type);
    const ir::Op& leaf = g.op(g.value(wb.target).producer);
    CHECK(leaf.kind == ir::OpKind::Parameter);
    if (i < params.size())
      CHECK(wb.target == params[i]);
    else
      CHECK(isStateLeaf(leaf));
  }
}

}  // namespace meshflow::autodiff_test
