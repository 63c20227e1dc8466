// What each op of the graph IR means for types: the shape and dtype rules that
// tracing applies as it records an op, and that the verifier re-checks.
//
// Rules (docs/graph-ir.md has the table):
// - Two dims match only if they are equal: `batch` matches `batch`, not `batch*2`
//   nor `64`.
// - Elementwise binary ops broadcast NumPy-style over trailing dimensions: a pair
//   of dims broadcasts if they are equal or one is the constant 1, so a batch dim
//   broadcasts only against an equal dim or 1.
// - Floating ops take f32, f16 or bf16; token ids (embedding, cross_entropy
//   labels) are i32. Binary ops need equal dtypes.
// - Attributes are checked for presence, type and range; an attribute an op does
//   not know is an error, so a misspelt one never silently falls back to a default.
//   An attribute documented as a number accepts an int or a double; one
//   documented as an int needs an int.
// - Reshape's attribute `shape` is an int list of constant dims with at most one
//   -1, which is inferred from the element count. A target mentions the batch
//   only through the -1: reshape f32[batch, 64, 128] to [-1, 128] gives
//   f32[batch*64, 128], and f32[batch*64, 128] to [-1, 64, 128] gives
//   f32[batch, 64, 128].
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "ir/Graph.h"

namespace meshflow::ir {

/// A type rule failed: the message names the op and the shapes involved in
/// TensorType::text() form, e.g.
/// `matmul: inner dimensions differ: f32[batch, 64, 128] x f32[256, 512]`.
class ShapeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Input and Parameter ops are the leaves whose type is declared, not inferred.
bool isDeclaredLeaf(OpKind kind);

/// An attribute any op may carry: the indices of float outputs kept in f32
/// whatever the operands' precision (autodiff gives it to the ops that make a
/// half parameter's weight gradient, so it is never rounded to half).
inline constexpr const char* kF32Outputs = "f32_outputs";

/// The output types of an op of `kind` applied to `inputs` with `attrs`, or a
/// ShapeError. Covers every kind except the declared leaves (Input, Parameter),
/// for which it throws std::invalid_argument: use checkLeafType for those.
std::vector<TensorType> inferTypes(OpKind kind, const std::vector<TensorType>& inputs,
                                   const Attributes& attrs);

/// Checks the declared type and attributes of an Input or Parameter op: a name,
/// positive dims, and for a parameter a floating dtype, constant dims and an
/// initializer ("normal" with `std`, "zeros" or "ones"; `std` >= 0 may be
/// given with any). Throws ShapeError.
void checkLeafType(OpKind kind, const TensorType& type, const Attributes& attrs);

/// NumPy broadcasting of two shapes, or std::nullopt when they do not broadcast.
std::optional<std::vector<Dim>> broadcastShapes(const std::vector<Dim>& a,
                                                const std::vector<Dim>& b);

}  // namespace meshflow::ir
