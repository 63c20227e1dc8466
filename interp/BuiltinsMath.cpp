// Math functions, also gathered in the `math` record (math.sqrt, math.pi).
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "interp/Builtins.h"
#include "interp/Evaluator.h"

namespace meshflow::interp {
namespace {

using Unary = double (*)(double);

struct MathFunction {
  const char* name;
  Unary fn;
  bool (*inDomain)(double);
  const char* domain;
};

bool anyReal(double) { return true; }
bool nonNegative(double x) { return x >= 0; }
bool positive(double x) { return x > 0; }

constexpr MathFunction kFunctions[] = {
    {"sqrt", [](double x) { return std::sqrt(x); }, nonNegative, "x >= 0"},
    {"exp", [](double x) { return std::exp(x); }, anyReal, ""},
    {"log", [](double x) { return std::log(x); }, positive, "x > 0"},
    {"log2", [](double x) { return std::log2(x); }, positive, "x > 0"},
    {"log10", [](double x) { return std::log10(x); }, positive, "x > 0"},
    {"sin", [](double x) { return std::sin(x); }, anyReal, ""},
    {"cos", [](double x) { return std::cos(x); }, anyReal, ""},
    {"tanh", [](double x) { return std::tanh(x); }, anyReal, ""},
};

Builtin::Body unaryBody(const MathFunction& f) {
  return [f](Evaluator&, BoundArgs& a) {
    double x = numberArg(a, 0, "the argument");
    if (!f.inDomain(x))
      argumentError(a, 0, DiagnosticKind::InvalidValue,
                    fmt::format("{}({}) is undefined: it needs {}", f.name, a[0].repr(), f.domain));
    return Value::number(f.fn(x));
  };
}

// floor, ceil and round return ints, as a script usually wants a count.
Builtin::Body roundingBody(double (*fn)(double), const char* name) {
  return [fn, name](Evaluator&, BoundArgs& a) {
    if (a[0].isInt()) return a[0];
    double x = fn(numberArg(a, 0, "the argument"));
    if (!(x >= -9.2233720368547758e18 && x < 9.2233720368547758e18))
      argumentError(a, 0, DiagnosticKind::IntegerOverflow,
                    fmt::format("{}({}) does not fit in a 64-bit int", name, a[0].repr()));
    return Value::integer(static_cast<std::int64_t>(x));
  };
}

}  // namespace

void installMathBuiltins(Environment& env) {
  std::vector<std::pair<std::string, Value>> math = {
      {"pi", Value::number(std::numbers::pi)},
      {"e", Value::number(std::numbers::e)},
      {"inf", Value::number(INFINITY)},
  };
  auto add = [&](const std::string& name, std::vector<ParamSpec> params, Builtin::Body body) {
    defineBuiltin(env, name, params, body);
    math.emplace_back(name, env.findLocal(name)->value);
  };
  for (const auto& f : kFunctions) add(f.name, {{"x", {}}}, unaryBody(f));
  add("floor", {{"x", {}}}, roundingBody([](double x) { return std::floor(x); }, "floor"));
  add("ceil", {{"x", {}}}, roundingBody([](double x) { return std::ceil(x); }, "ceil"));
  add("round", {{"x", {}}}, roundingBody([](double x) { return std::nearbyint(x); }, "round"));
  env.define("math", Binding{Value::record(std::move(math)), false, {}});
}

}  // namespace meshflow::interp
