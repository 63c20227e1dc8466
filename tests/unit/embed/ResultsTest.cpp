// The typed results and callbacks of the embedding API (meshflow/Results.h):
// plans, simulations and training read as structs, plan methods called from
// C++, the per-step callback, a host's token loader, the planning time budget
// and progress.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "meshflow/meshflow.h"

namespace meshflow {
namespace {

constexpr const char* kModel = "gpt(layers = 2, hidden = 64, heads = 2, seq = 16, vocab = 64)";

std::string planSource() {
  return std::string("import std.models\nlet p = plan(") + kModel + ", cpu(devices = 4), batch = 8)";
}

TokenBatch ramp(std::int64_t batch, std::int64_t seq, std::int64_t step) {
  TokenBatch out;
  for (std::int64_t i = 0; i < batch * seq; ++i) {
    out.tokens.push_back(std::int32_t((i + step) % 64));
    out.labels.push_back(std::int32_t((i + step + 1) % 64));
  }
  return out;
}

TEST_CASE("a plan reads back as structs that match its value", "[embed][results]") {
  Interpreter interpreter;
  REQUIRE(interpreter.eval(planSource()).ok);
  Value p = *interpreter.global("p");
  std::optional<PlanResult> plan = interpreter.planResult(p);
  REQUIRE(plan);
  CHECK(plan->model == "gpt");
  REQUIRE(!plan->stages.empty());
  CHECK(plan->stages.front().firstLayer == 0);
  CHECK(plan->globalBatch == 8);
  CHECK(plan->stepSeconds > 0);
  CHECK(plan->json.find("\"stages\"") != std::string::npos);
  std::size_t devices = 0;
  for (const PlanStage& stage : plan->stages) {
    devices += stage.devices.size();
    CHECK(!stage.strategies.empty());
    CHECK(stage.peakMemoryBytes > 0);
  }
  CHECK(devices * std::size_t(plan->chunks) <= 4 * plan->stages.size());
  // The struct agrees with what the script sees.
  Status microbatches = interpreter.eval("p.microbatches");
  REQUIRE(microbatches.ok);
  CHECK(microbatches.value->asInt() == plan->microbatches);

  CHECK_FALSE(interpreter.planResult(Value::integer(3)));
  CHECK_FALSE(interpreter.simulationResult(Value::integer(3)));
  CHECK_FALSE(interpreter.trainResult(p));
}

TEST_CASE("plan methods are callable from C++", "[embed][results]") {
  Interpreter interpreter;
  REQUIRE(interpreter.eval(planSource()).ok);
  Value p = *interpreter.global("p");
  Status timeline = interpreter.callMethod(p, "timeline", {Value::integer(40)});
  INFO(renderAll(timeline.diagnostics));
  REQUIRE(timeline.ok);
  CHECK(timeline.value->asString().find("one step, simulated") != std::string::npos);
  Status wrong = interpreter.callMethod(p, "timelines", {});
  REQUIRE(!wrong.ok);
  CHECK(wrong.diagnostics.front().kind == DiagnosticKind::UnknownField);
  Status badArgument = interpreter.callMethod(p, "timeline", {Value::string("wide")});
  CHECK(!badArgument.ok);
}

TEST_CASE("simulate and train read back as structs", "[embed][results]") {
  Interpreter interpreter;
  REQUIRE(interpreter.eval(planSource()).ok);
  Status simulated = interpreter.eval("simulate(p)");
  REQUIRE(simulated.ok);
  std::optional<SimulationResult> step = interpreter.simulationResult(*simulated.value);
  REQUIRE(step);
  CHECK(step->stepSeconds > 0);
  CHECK(step->peakMemoryBytes.size() == 4);

  Status trained = interpreter.eval(std::string("train(") + kModel + ", batch = 4, steps = 2, log_every = 0)");
  REQUIRE(trained.ok);
  std::optional<TrainResult> run = interpreter.trainResult(*trained.value);
  REQUIRE(run);
  CHECK(run->steps == 2);
  CHECK(run->losses.size() == 2);
  CHECK(run->unit == "tokens/s");
}

TEST_CASE("onTrainStep sees every step; a host's loader feeds them", "[embed][results]") {
  std::vector<TrainStep> steps;
  std::vector<std::int64_t> asked;
  Config config;
  config.onTrainStep = [&](const TrainStep& s) { steps.push_back(s); };
  Interpreter interpreter(config);
  interpreter.defineTokenData("corpus", [&](std::int64_t batch, std::int64_t seq, std::int64_t step) {
    CHECK(batch == 4);
    CHECK(seq == 16);
    asked.push_back(step);
    return ramp(batch, seq, step);
  });
  Status trained = interpreter.eval(std::string("import std.models\ntrain(") + kModel +
                                    ", batch = 4, steps = 3, data = corpus, log_every = 0)");
  INFO(renderAll(trained.diagnostics));
  REQUIRE(trained.ok);
  CHECK(asked == std::vector<std::int64_t>{0, 1, 2});
  REQUIRE(steps.size() == 3);
  std::optional<TrainResult> run = interpreter.trainResult(*trained.value);
  REQUIRE(run);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(steps[k].step == std::int64_t(k) + 1);
    CHECK(steps[k].steps == 3);
    CHECK(steps[k].model == "gpt");
    CHECK(steps[k].loss == run->losses[k]);
    CHECK(steps[k].seconds >= 0);
  }
}

TEST_CASE("a loader's wrong batch or failure is a DataError naming it", "[embed][results]") {
  Interpreter interpreter;
  interpreter.defineTokenData("short", [](std::int64_t, std::int64_t, std::int64_t) {
    return TokenBatch{{1, 2, 3}, {2, 3, 4}};
  });
  interpreter.defineTokenData("broken", [](std::int64_t, std::int64_t, std::int64_t) -> TokenBatch {
    throw std::runtime_error("disk on fire");
  });
  REQUIRE(interpreter.eval("import std.models").ok);
  Status wrongSize =
      interpreter.eval(std::string("train(") + kModel + ", batch = 4, steps = 1, data = short, log_every = 0)");
  REQUIRE(!wrongSize.ok);
  CHECK(wrongSize.diagnostics.front().kind == DiagnosticKind::DataError);
  CHECK(wrongSize.diagnostics.front().message ==
        "the host's loader 'short' gave 3 ids for 'tokens'; the batch needs 4 x 16 = 64");
  Status failed =
      interpreter.eval(std::string("train(") + kModel + ", batch = 4, steps = 1, data = broken, log_every = 0)");
  REQUIRE(!failed.ok);
  CHECK(failed.diagnostics.front().message == "the host's loader 'broken' failed at step 1: disk on fire");
}

TEST_CASE("a planning past its time budget is a TimeBudget diagnostic", "[embed][budget]") {
  Config config;
  config.limits.timeBudgetSeconds = 0;
  Interpreter interpreter(config);
  Status status = interpreter.eval(planSource(), "budget.mesh");
  REQUIRE(!status.ok);
  const Diagnostic& d = status.diagnostics.front();
  CHECK(d.kind == DiagnosticKind::TimeBudget);
  CHECK(d.message ==
        "planning ran out of its time budget of 0 s, after 0 candidates (raise it with --time-budget)");
  CHECK(d.line == 1);  // at the plan(...) call
}

TEST_CASE("planProgress starts, counts up and finishes; pass times follow", "[embed][progress]") {
  std::vector<PlanProgress> seen;
  Config config;
  config.planProgress = [&](const PlanProgress& p) { seen.push_back(p); };
  Interpreter interpreter(config);
  CHECK(interpreter.lastPlanningTimes().empty());
  REQUIRE(interpreter.eval(planSource()).ok);
  REQUIRE(seen.size() >= 2);
  CHECK_FALSE(seen.front().finished);
  CHECK(seen.back().finished);
  CHECK(seen.back().candidates > 0);
  std::vector<std::string> passes;
  for (const PassTime& t : interpreter.lastPlanningTimes()) passes.push_back(t.pass);
  CHECK(passes == std::vector<std::string>{"layer clustering", "layer costs", "stage search",
                                           "placement and simulation"});
}

}  // namespace
}  // namespace meshflow
