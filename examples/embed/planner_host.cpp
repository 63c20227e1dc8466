// A host that plans, simulates and trains through meshflow's typed C++ API
// (docs/embedding.md, "Plans, simulations and training from C++"): the plan as
// structs and JSON, plan methods called from C++, the planner's passes, a
// simulated step, training fed by the host's own token loader with a callback
// per step, and a planning run cancelled from another thread.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>

#include "meshflow/meshflow.h"

namespace {

constexpr const char* kModel = "gpt(layers = 2, hidden = 64, heads = 2, seq = 16, vocab = 64)";

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

// The host's loader: token ids that count up from the step, the labels the
// next id. Any loader of the host's (files, a database, a queue) fits here.
meshflow::TokenBatch countingTokens(std::int64_t batch, std::int64_t seq, std::int64_t step) {
  meshflow::TokenBatch out;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < seq; ++t) {
      std::int64_t id = (step + b * 3 + t) % 64;
      out.tokens.push_back(static_cast<std::int32_t>(id));
      out.labels.push_back(static_cast<std::int32_t>((id + 1) % 64));
    }
  return out;
}

bool run(meshflow::Interpreter& interpreter, const std::string& source) {
  meshflow::Status status = interpreter.eval(source, "host.mesh");
  if (!status) std::cerr << meshflow::renderAll(status.diagnostics);
  return status.ok;
}

std::string counted(std::size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The strategy chosen for the first op of `scope`.
std::string strategyOf(const meshflow::PlanStage& stage, const std::string& scope) {
  for (const meshflow::OpSharding& op : stage.strategies)
    if (op.scope == scope) return op.kind + " " + op.strategy;
  return "(not in this stage)";
}

void showPlan(const meshflow::PlanResult& plan) {
  std::cout << "plan of " << plan.model << ": " << counted(plan.stages.size(), "stage", "stages")
            << ", schedule " << plan.schedule << ", "
            << counted(std::size_t(plan.microbatches), "microbatch", "microbatches") << ", step "
            << fixed(plan.stepSeconds * 1e3, 3) << " ms\n";
  for (const meshflow::PlanStage& stage : plan.stages) {
    std::cout << "  layers " << stage.firstLayer << ".." << stage.endLayer << " on mesh ("
              << stage.logicalMesh[0] << ", " << stage.logicalMesh[1] << "), devices";
    for (int d : stage.devices) std::cout << " " << d;
    std::cout << ", " << counted(stage.strategies.size(), "op", "ops") << "; block0.mlp.fc1: "
              << strategyOf(stage, "block0.mlp.fc1") << "\n";
  }
  std::cout << "  JSON " << (plan.json.find("\"stages\"") != std::string::npos ? "has" : "lacks")
            << " its stages; " << counted(plan.alternatives.size(), "alternative", "alternatives")
            << " weighed\n";
}

// Ctrl-C's counterpart for a host: Interpreter::interrupt from another thread.
// The first progress report waits for that thread's interrupt, so the run is
// stopped mid-search however fast this machine plans.
void cancelFromAnotherThread(meshflow::Config config) {
  std::atomic<bool> started{false}, interrupted{false};
  config.planProgress = [&](const meshflow::PlanProgress& progress) {
    if (progress.finished || started.exchange(true)) return;
    while (!interrupted) std::this_thread::yield();
  };
  meshflow::Interpreter interpreter(config);
  std::thread host([&] {
    while (!started) std::this_thread::yield();
    interpreter.interrupt();
    interrupted = true;
  });
  meshflow::Status status = interpreter.eval(
      std::string("import std.models\nlet q = plan(") + kModel + ", cpu(devices = 4), batch = 8)",
      "cancel.mesh");
  host.join();
  bool cancelled = !status.ok && status.diagnostics.front().kind == meshflow::DiagnosticKind::Interrupted;
  std::cout << "planning cancelled from another thread: " << (cancelled ? "yes" : "no")
            << "; q defined: " << (interpreter.global("q") ? "yes" : "no") << "\n";
}

}  // namespace

int main() {
  meshflow::Config config;
  config.write = [](std::string_view text) { std::cout << "script: " << text; };
  config.onTrainStep = [](const meshflow::TrainStep& step) {
    std::cout << "step " << step.step << "/" << step.steps << " loss " << fixed(step.loss, 3) << "\n";
  };
  meshflow::Interpreter interpreter(config);

  // 1. Plan, and read the plan as structs.
  if (!run(interpreter, std::string("import std.models\nlet c = cpu(devices = 4)\nlet p = plan(") +
                            kModel + ", c, batch = 8)"))
    return 1;
  meshflow::Value p = *interpreter.global("p");
  showPlan(*interpreter.planResult(p));
  std::cout << "passes:";
  for (const meshflow::PassTime& pass : interpreter.lastPlanningTimes()) std::cout << " [" << pass.pass << "]";
  std::cout << "\n";

  // 2. Plan methods, called from C++.
  meshflow::Status explained = interpreter.callMethod(p, "explain", {meshflow::Value::string("block0.mlp.fc1")});
  std::cout << "explain: " << (explained ? "ok" : meshflow::renderAll(explained.diagnostics)) << "\n";
  meshflow::Status flags = interpreter.callMethod(p, "megatron", {});
  std::cout << "megatron export: " << (flags ? "ok" : "refused") << "\n";
  meshflow::Status wrong = interpreter.callMethod(p, "no_such_method", {});
  bool unknownField = !wrong && wrong.diagnostics.front().kind == meshflow::DiagnosticKind::UnknownField;
  std::cout << "no_such_method: " << (unknownField ? "an UnknownField diagnostic" : "unexpected") << "\n";

  // 3. A simulated step.
  meshflow::Status simulated = interpreter.eval("simulate(p)", "host.mesh");
  meshflow::SimulationResult step = *interpreter.simulationResult(*simulated.value);
  std::cout << "simulated: " << step.peakMemoryBytes.size() << " devices, step time "
            << (step.stepSeconds > 0 ? "positive" : "zero") << "\n";

  // 4. Training fed by the host's loader, a callback per step.
  interpreter.defineTokenData("corpus", countingTokens);
  if (!run(interpreter, std::string("let run = train(") + kModel +
                            ", batch = 4, steps = 3, data = corpus, log_every = 0)"))
    return 1;
  meshflow::TrainResult trained = *interpreter.trainResult(*interpreter.global("run"));
  std::cout << "trained " << trained.steps << " steps, unit " << trained.unit << ", last loss "
            << fixed(trained.losses.back(), 3) << "\n";

  // 5. Cancelling a planning run from another thread.
  cancelFromAnotherThread(config);
  return 0;
}
