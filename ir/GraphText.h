// The text form of an ir::Graph: printGraph writes it, parseGraph reads it back,
// and print(parse(print(g))) == print(g), so a pass is tested IR in, IR out.
//
//   graph outputs(%9)
//     %0 = input() {name = "x"} : f32[batch, 64] @fwd
//     %1 = parameter() {init = "normal", name = "w", std = 0.02} : f32[64, 64] @fwd scope="fc"
//     %2 = matmul(%0, %1) : f32[batch, 64] @fwd scope="fc" loc="net.mesh":3:7
//     %3, %4 = split(%2) {axis = 1, sizes = [32, 32]} : f32[batch, 32], f32[batch, 32] @fwd
//     ...
//     %7 = relu_grad(%5, %6) : f32[batch, 64] @bwd scope="fc" forward=#4 names=["dx"]
//
// - The header lists the graph's outputs; then one op per line, in order.
// - `%N` are values, numbered in order of definition (for a graph built by
//   Graph::addOp these are its ValueIds); `#N` is the op at index N.
// - An op line: results, `=`, the op name, its inputs, attributes in braces
//   (sorted by name; omitted when none), `:` the output types, `@fwd`, `@bwd` or
//   `@update`, then, when they are set, `scope="..."`, `loc="file":line:col`,
//   `forward=#N` (the forward op a backward or update op belongs to) and
//   `names=[...]` (the value names, one per result, written only when they
//   differ from the default: an input's or parameter's `name` attribute, else
//   no name).
// - Attribute values: an int `3`, a double always with a `.` or exponent (`1.0`,
//   `1e-05`, `inf`, `nan`), a string `"normal"` (C escapes), an int list `[1, 2]`.
// - Dims: `64`, `batch`, `batch*64`. An op with no results writes `()` for
//   them and for its types.
// - `//` starts a comment; spaces and line breaks between tokens are free.
// The parser checks syntax and that every value used is defined somewhere; it
// does not check types or SSA order — that is passes::verifyGraph's job — so a
// test can write a broken graph as text.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "ir/Graph.h"

namespace meshflow::ir {

/// Malformed graph text. line() and column() are 0-based; the message starts
/// with them 1-based: `3:14: expected ')'`.
class GraphParseError : public std::runtime_error {
 public:
  GraphParseError(std::size_t line, std::size_t column, const std::string& message);
  std::size_t line() const { return line_; }
  std::size_t column() const { return column_; }

 private:
  std::size_t line_;
  std::size_t column_;
};

/// The canonical text of `graph`; deterministic.
std::string printGraph(const Graph& graph);

/// One attribute value as the text form writes it (`3`, `1.0`, `"s"`, `[1, 2]`).
std::string attributeText(const Attribute& attr);

/// The graph `text` describes; throws GraphParseError.
Graph parseGraph(const std::string& text);

}  // namespace meshflow::ir
