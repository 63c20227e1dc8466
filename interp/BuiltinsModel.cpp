// Builtins that work on whole models: trace(model).
#include <fmt/format.h>

#include "interp/Builtins.h"
#include "interp/Evaluator.h"
#include "interp/Tracing.h"

namespace meshflow::interp {
namespace {

Value trace(Evaluator& ev, BoundArgs& a) {
  auto model = modelOf(ev, a[0], a.spans[0]);
  auto graph = std::make_shared<GraphObject>(traceModel(ev, *model, a.callSpan));
  ev.heap().adopt(graph, kObjectOverhead);
  return Value::object(ValueKind::Object, std::move(graph));
}

}  // namespace

void installModelBuiltins(Environment& env) {
  defineBuiltin(env, "trace", {{"model", {}}}, trace);
}

}  // namespace meshflow::interp
