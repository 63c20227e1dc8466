// Private to the OpRules*.cpp files: the helper every type rule is written with,
// and the rule functions of each op family (one function per op or per group of
// ops with the same rule). inferTypes in OpRules.cpp dispatches to them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "ir/OpRules.h"

namespace meshflow::ir::rules {

using Types = std::vector<TensorType>;

/// One application of a rule: the op kind, its input types and attributes, with
/// checks that throw a ShapeError prefixed by the op's name.
class Rule {
 public:
  Rule(OpKind kind, const Types& inputs, const Attributes& attrs)
      : kind_(kind), inputs_(inputs), attrs_(attrs) {}

  OpKind kind() const { return kind_; }
  const char* name() const { return opName(kind_); }
  const Types& inputs() const { return inputs_; }
  const TensorType& in(std::size_t i) const { return inputs_.at(i); }

  [[noreturn]] void fail(const std::string& message) const;

  // ---- inputs ----
  void expectInputs(std::size_t count) const;
  void expectAtLeastInputs(std::size_t count) const;
  /// Input `i` has a floating dtype; `role` names it in the message ("gamma").
  void expectFloat(std::size_t i) const;
  void expectI32(std::size_t i, const char* role) const;
  void expectRankAtLeast(std::size_t i, std::size_t rank) const;
  void expectScalar(std::size_t i, const char* role) const;
  /// Inputs `i` and `j` have the same dtype and shape.
  void expectSameType(std::size_t i, std::size_t j) const;
  void expectSameShape(std::size_t i, std::size_t j) const;

  // ---- attributes ----
  /// Every attribute present is one of `known`.
  void allowAttrs(std::initializer_list<const char*> known) const;
  std::int64_t intAttr(const char* name) const;
  std::optional<std::int64_t> optIntAttr(const char* name) const;
  double numberAttr(const char* name) const;
  std::optional<double> optNumberAttr(const char* name) const;
  std::string stringAttr(const char* name) const;
  std::vector<std::int64_t> intsAttr(const char* name) const;
  /// An int attribute with lo <= value <= hi.
  std::int64_t intAttrIn(const char* name, std::int64_t lo, std::int64_t hi) const;
  /// A 0|1 flag, absent = 0.
  bool flagAttr(const char* name) const;
  /// An axis attribute valid for a tensor of `type`.
  std::size_t axisAttr(const char* name, const TensorType& type) const;

 private:
  const Attribute* find(const char* name) const;
  [[noreturn]] void badType(const char* name, const char* expected) const;

  OpKind kind_;
  const Types& inputs_;
  const Attributes& attrs_;
};

bool isFloat(DType dtype);
/// "[2, -1, 4]": an int list as written in attributes and messages.
std::string intsText(const std::vector<std::int64_t>& values);
/// `shape` with dims at the (distinct, in range) `axes` removed.
std::vector<Dim> removeAxes(const std::vector<Dim>& shape, const std::vector<std::int64_t>& axes);
/// Axes distinct and within [0, rank), else a ShapeError naming `type`.
void checkAxes(const Rule& rule, const std::vector<std::int64_t>& axes, const TensorType& type);

// ---- OpRulesElementwise.cpp ----
Types constantRule(const Rule& r);
Types binaryRule(const Rule& r);  // add, sub, mul, div
Types unaryRule(const Rule& r);   // neg, relu, gelu, tanh, sigmoid, exp
Types scaleRule(const Rule& r);
Types rsqrtRule(const Rule& r);   // 1 / sqrt(x + eps)
Types lossScaleUpdateRule(const Rule& r);
Types castRule(const Rule& r);
Types dropoutRule(const Rule& r);
Types dropoutGradRule(const Rule& r);
Types causalMaskRule(const Rule& r);  // and causal_mask_grad
Types unaryGradRule(const Rule& r);   // relu_grad, gelu_grad, tanh_grad, sigmoid_grad

// ---- OpRulesNN.cpp ----
Types matmulRule(const Rule& r);
Types softmaxRule(const Rule& r);
Types softmaxGradRule(const Rule& r);
Types layerNormRule(const Rule& r);
Types layerNormGradRule(const Rule& r);
Types embeddingRule(const Rule& r);
Types embeddingGradRule(const Rule& r);
Types crossEntropyRule(const Rule& r);
Types crossEntropyGradRule(const Rule& r);
Types topKGateRule(const Rule& r);
Types topKGateGradRule(const Rule& r);
// [OpRulesMoe]
Types moeDispatchRule(const Rule& r);
Types moeCombineRule(const Rule& r);
Types moeDroppedRule(const Rule& r);
Types moeDispatchGradRule(const Rule& r);
Types moeCombineGradRule(const Rule& r);

// ---- OpRulesShape.cpp ----
Types reshapeRule(const Rule& r);
Types transposeRule(const Rule& r);
Types concatRule(const Rule& r);
Types splitRule(const Rule& r);
Types reduceRule(const Rule& r);  // sum, mean
Types splitHeadsRule(const Rule& r);
Types mergeHeadsRule(const Rule& r);
Types selectRule(const Rule& r);
Types selectGradRule(const Rule& r);
Types reduceToShapeRule(const Rule& r);
Types broadcastToRule(const Rule& r);

// ---- OpRulesUpdate.cpp ----
Types globalNormRule(const Rule& r);
Types clipScaleRule(const Rule& r);
Types sgdUpdateRule(const Rule& r);
Types adamUpdateRule(const Rule& r);

}  // namespace meshflow::ir::rules
