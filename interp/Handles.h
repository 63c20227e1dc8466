// Handles that declarations evaluate to: model instances, clusters, schedules.
// Planning and training (later passes) read them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "interp/Callable.h"

namespace meshflow::interp {

using Fields = std::vector<std::pair<std::string, Value>>;

/// `gpt(layers = 2)`: a model declaration with its arguments bound.
class ModelObject final : public Object {
 public:
  ModelObject(std::shared_ptr<ScriptFunction> declaration, Fields args)
      : declaration_(std::move(declaration)), args_(std::move(args)) {}
  std::string typeName() const override { return "model"; }
  std::string repr(int depth) const override;
  std::optional<Value> field(const std::string& name) const override;
  std::vector<std::string> fieldNames() const override;
  void clearReferences() override { declaration_.reset(); args_.clear(); }
  bool holdsReferences() const override { return true; }

  const std::shared_ptr<ScriptFunction>& declaration() const { return declaration_; }
  const Fields& args() const { return args_; }

 private:
  std::shared_ptr<ScriptFunction> declaration_;
  Fields args_;
};

/// A validated cluster: nodes × devices_per_node devices with their links.
class ClusterObject final : public Object {
 public:
  ClusterObject(std::string name, Fields fields) : name_(std::move(name)), fields_(std::move(fields)) {}
  std::string typeName() const override { return "cluster"; }
  std::string repr(int depth) const override;
  std::optional<Value> field(const std::string& name) const override;
  std::vector<std::string> fieldNames() const override;
  void clearReferences() override { fields_.clear(); }
  bool holdsReferences() const override { return true; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Fields fields_;
};

/// One `name <= value` bound of a schedule block.
struct ScheduleBound {
  std::string name;
  Value limit;
};

/// Where a schedule block wrote each hint, bound, pin and exclusion, so that a
/// planning error about one of them can point at it.
struct ScheduleSpans {
  std::vector<std::pair<std::string, SourceSpan>> entries;  // hints and bounds by name
  std::vector<SourceSpan> pins;                             // in the order of pins()
  std::vector<SourceSpan> exclusions;                       // in the order of exclusions()
};

/// A schedule block: hints, bounds, pins and exclusions, validated.
class ScheduleObject final : public Object {
 public:
  ScheduleObject(std::string name, Fields hints, std::vector<ScheduleBound> bounds,
                 std::vector<Value> pins, ScheduleSpans spans = {},
                 std::vector<Value> exclusions = {})
      : name_(std::move(name)), hints_(std::move(hints)), bounds_(std::move(bounds)),
        pins_(std::move(pins)), exclusions_(std::move(exclusions)), spans_(std::move(spans)) {}
  std::string typeName() const override { return "schedule"; }
  std::string repr(int depth) const override;
  std::optional<Value> field(const std::string& name) const override;
  std::vector<std::string> fieldNames() const override;
  void clearReferences() override {
    hints_.clear();
    bounds_.clear();
    pins_.clear();
    exclusions_.clear();
  }
  bool holdsReferences() const override { return true; }

  const Fields& hints() const { return hints_; }
  const std::vector<ScheduleBound>& bounds() const { return bounds_; }
  const std::vector<Value>& pins() const { return pins_; }
  /// The exclude(...) records, in the order written.
  const std::vector<Value>& exclusions() const { return exclusions_; }
  const std::string& name() const { return name_; }
  /// Where the hint or bound `name` was written (an invalid span if nowhere).
  SourceSpan spanOf(const std::string& name) const;
  /// Where pin `index` was written.
  SourceSpan pinSpan(std::size_t index) const;
  /// Where exclusion `index` was written.
  SourceSpan exclusionSpan(std::size_t index) const;

 private:
  std::string name_;
  Fields hints_;
  std::vector<ScheduleBound> bounds_;
  std::vector<Value> pins_;
  std::vector<Value> exclusions_;
  ScheduleSpans spans_;
};

}  // namespace meshflow::interp
