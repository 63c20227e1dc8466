// The graph a stdlib model call traces to (`import std.models`, then
// `trace(<call>)`), for the unit tests that plan or price real models.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "interp/Tracing.h"
#include "meshflow/meshflow.h"

namespace meshflow::test {

inline ir::Graph tracedModel(const std::string& call) {
  Interpreter interpreter;
  auto status = interpreter.eval("import std.models\ntrace(" + call + ")", "test.mesh");
  INFO(renderAll(status.diagnostics));
  REQUIRE(status.ok);
  return dynamic_cast<interp::GraphObject*>(status.value->object().get())->graph();
}

}  // namespace meshflow::test
