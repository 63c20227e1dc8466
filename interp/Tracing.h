// Tracing: evaluating a model body with tensor values records ops into an
// ir::Graph. Shapes are checked as each op is recorded, so a mismatch is a
// diagnostic at the .mesh call that made it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "interp/Handles.h"
#include "interp/Object.h"
#include "interp/SourceFile.h"
#include "ir/Graph.h"

namespace meshflow::interp {

class Evaluator;

/// The graph being recorded and where in the model the evaluator is.
class Tracer {
 public:
  ir::Graph graph;

  /// Records an op; its output types come from the IR's shape rules. A shape
  /// or dtype mismatch is a ShapeMismatch ScriptError naming the shapes.
  std::vector<ir::ValueId> record(ir::OpKind kind, const std::vector<ir::ValueId>& inputs,
                                  ir::Attributes attrs, const SourceSpan& where,
                                  const std::string& name = "");
  /// A model input named `name` (not qualified by the scope).
  ir::ValueId input(const std::string& name, ir::TensorType type, const SourceSpan& where);
  /// A new parameter under the current scope: `<scope>.<name>`.
  ir::ValueId parameter(const std::string& name, ir::TensorType type, const std::string& init,
                        double stddev, const SourceSpan& where);

  /// The scope path of the current layer call, `block3.mlp`.
  std::string scope() const;
  /// Enters a layer call named `name` (numbered if the name repeats in this scope).
  void enter(const std::string& name);
  void leave();
  /// `scope.name`, unique in the graph.
  std::string qualified(const std::string& name);

 private:
  ir::ValueId leaf(ir::OpKind kind, const std::string& name, ir::Attributes attrs,
                   ir::TensorType type, const SourceSpan& where);

  /// Names handed out in one namespace: `base`, then `base_1`, `base_2` …,
  /// the first one not yet used. Each base remembers how far it has counted,
  /// so a name repeated n times costs O(n log n) in all, not O(n²).
  class UniqueNames {
   public:
    std::string take(const std::string& base);

   private:
    std::set<std::string> used_;
    std::map<std::string, int> counted_;
  };

  struct Frame {
    std::string name;
    UniqueNames childNames;  // names used by calls inside this frame
  };
  std::vector<Frame> frames_ = {Frame{}};
  UniqueNames valueNames_;
};

/// A tensor of the graph being traced.
class TensorObject final : public Object {
 public:
  TensorObject(std::shared_ptr<Tracer> tracer, ir::ValueId id)
      : tracer_(std::move(tracer)), id_(id) {}
  std::string typeName() const override { return "tensor"; }
  std::string repr(int depth) const override;
  std::optional<Value> field(const std::string& name) const override;
  std::vector<std::string> fieldNames() const override { return {"dtype", "shape", "name"}; }

  const std::shared_ptr<Tracer>& tracer() const { return tracer_; }
  ir::ValueId id() const { return id_; }
  const ir::TensorType& type() const { return tracer_->graph.value(id_).type; }

 private:
  std::shared_ptr<Tracer> tracer_;
  ir::ValueId id_;
};

/// `f32`, `i32` …: indexing one with dims makes a tensor type (`f32[batch, 1024]`).
class DTypeObject final : public Object {
 public:
  explicit DTypeObject(ir::DType dtype) : dtype(dtype) {}
  std::string typeName() const override { return "dtype"; }
  std::string repr(int) const override { return ir::dtypeName(dtype); }
  ir::DType dtype;
};

class TensorTypeObject final : public Object {
 public:
  explicit TensorTypeObject(ir::TensorType type) : type(std::move(type)) {}
  std::string typeName() const override { return "tensor type"; }
  std::string repr(int) const override { return type.text(); }
  ir::TensorType type;
};

/// A dimension that is a multiple of the symbolic batch size (`batch`, `batch * 64`).
class DimObject final : public Object {
 public:
  explicit DimObject(ir::Dim dim) : dim(dim) {}
  std::string typeName() const override { return "dim"; }
  std::string repr(int) const override { return ir::dimText(dim); }
  ir::Dim dim;
};

/// What tracing a model produced.
struct TracedModel {
  std::shared_ptr<Tracer> tracer;  // tracer->graph.outputs = {loss}
  std::string name;
};

/// `trace(model)`: the graph a model traced to, as a script value.
class GraphObject final : public Object {
 public:
  explicit GraphObject(TracedModel traced) : traced_(std::move(traced)) {}
  std::string typeName() const override { return "graph"; }
  std::string repr(int depth) const override;
  std::optional<Value> field(const std::string& name) const override;
  std::vector<std::string> fieldNames() const override { return {"inputs", "name", "ops", "parameters"}; }
  const ir::Graph& graph() const { return traced_.tracer->graph; }
  const std::string& name() const { return traced_.name; }

 private:
  TracedModel traced_;
};

/// The model a value stands for: a model handle, or a model declaration or a
/// function without required arguments that returns one (called with defaults).
std::shared_ptr<ModelObject> modelOf(Evaluator& evaluator, const Value& value,
                                     const SourceSpan& where);

/// Runs the model's body with its bound arguments and `batch` symbolic, and
/// returns the recorded graph. The body must return an f32 scalar loss.
TracedModel traceModel(Evaluator& evaluator, const ModelObject& model, const SourceSpan& where);

/// A dim from a script value: an int or a `batch` multiple.
std::optional<ir::Dim> dimOf(const Value& value);
Value dimValue(const ir::Dim& dim);

/// The tensor a value holds, or nullptr.
TensorObject* asTensor(const Value& value);

}  // namespace meshflow::interp
