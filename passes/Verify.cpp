#include "passes/Verify.h"

#include <fmt/format.h>

#include "ir/OpRules.h"

namespace meshflow::passes {
namespace {

using ir::Graph;
using ir::Op;
using ir::OpId;
using ir::TensorType;
using ir::ValueId;

class Verifier {
 public:
  explicit Verifier(const Graph& graph)
      : graph_(graph), definedBy_(graph.valueCount(), kUndefined) {}

  void run() {
    for (OpId id = 0; id < graph_.ops().size(); ++id) {
      checkInputs(id);
      checkOutputs(id);
      checkForwardOp(id);
      checkTypes(id);
    }
    checkGraphOutputs();
  }

 private:
  static constexpr OpId kUndefined = ~OpId{0};

  [[noreturn]] void fail(OpId id, const std::string& message) const {
    const Op& op = graph_.op(id);
    std::string where = op.scope.empty()
                            ? ir::opName(op.kind)
                            : fmt::format("{} in \"{}\"", ir::opName(op.kind), op.scope);
    throw VerifyError(id, fmt::format("op #{} ({}): {}", id, where, message));
  }

  /// The op that defines `v` anywhere in the graph, for a helpful message.
  std::optional<OpId> definerAnywhere(ValueId v) const {
    for (OpId id = 0; id < graph_.ops().size(); ++id)
      for (ValueId out : graph_.op(id).outputs)
        if (out == v) return id;
    return std::nullopt;
  }

  void checkInputs(OpId id) const {
    for (ValueId v : graph_.op(id).inputs) {
      if (v >= graph_.valueCount()) fail(id, fmt::format("input %{} does not exist", v));
      if (definedBy_[v] != kUndefined) continue;
      auto later = definerAnywhere(v);
      if (later) fail(id, fmt::format("uses %{} before its definition (op #{})", v, *later));
      fail(id, fmt::format("uses %{}, which no op defines", v));
    }
  }

  void checkOutputs(OpId id) {
    for (ValueId v : graph_.op(id).outputs) {
      if (v >= graph_.valueCount()) fail(id, fmt::format("output %{} does not exist", v));
      if (definedBy_[v] != kUndefined)
        fail(id, fmt::format("defines %{}, already defined by op #{}", v, definedBy_[v]));
      if (graph_.value(v).producer != id)
        fail(id, fmt::format("defines %{}, whose producer is recorded as op #{}", v,
                             graph_.value(v).producer));
      definedBy_[v] = id;
    }
  }

  void checkForwardOp(OpId id) const {
    const auto& forward = graph_.op(id).forwardOp;
    if (forward && *forward >= id)
      fail(id, fmt::format("forward op #{} is not an earlier op", *forward));
  }

  void checkTypes(OpId id) const {
    const Op& op = graph_.op(id);
    std::vector<TensorType> recorded;
    for (ValueId v : op.outputs) recorded.push_back(graph_.value(v).type);
    try {
      if (ir::isDeclaredLeaf(op.kind)) return checkLeaf(id, recorded);
      std::vector<TensorType> inputs;
      for (ValueId v : op.inputs) inputs.push_back(graph_.value(v).type);
      compare(id, recorded, ir::inferTypes(op.kind, inputs, op.attrs));
    } catch (const ir::ShapeError& e) {
      fail(id, e.what());
    }
  }

  void checkLeaf(OpId id, const std::vector<TensorType>& recorded) const {
    const Op& op = graph_.op(id);
    if (!op.inputs.empty())
      fail(id, fmt::format("a leaf takes no inputs, got {}", op.inputs.size()));
    if (recorded.size() != 1)
      fail(id, fmt::format("a leaf defines 1 value, got {}", recorded.size()));
    ir::checkLeafType(op.kind, recorded[0], op.attrs);
  }

  void compare(OpId id, const std::vector<TensorType>& recorded,
               const std::vector<TensorType>& inferred) const {
    if (recorded.size() != inferred.size())
      fail(id,
           fmt::format("defines {} values, its rule gives {}", recorded.size(), inferred.size()));
    for (std::size_t i = 0; i < recorded.size(); ++i)
      if (recorded[i] != inferred[i])
        fail(id, fmt::format("output {} is recorded as {} but its rule gives {}", i,
                             recorded[i].text(), inferred[i].text()));
  }

  void checkGraphOutputs() const {
    for (ValueId v : graph_.outputs)
      if (v >= graph_.valueCount() || definedBy_[v] == kUndefined)
        throw VerifyError(std::nullopt,
                          fmt::format("graph output %{} is not defined by any op", v));
  }

  const Graph& graph_;
  std::vector<OpId> definedBy_;
};

}  // namespace

void verifyGraph(const ir::Graph& graph) { Verifier(graph).run(); }

}  // namespace meshflow::passes
