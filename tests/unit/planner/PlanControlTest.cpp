// The planning control hook (passes/PlanControl.h): pass times, safe points
// that cancel or stop at the deadline, progress, and the planner threaded
// through it.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "interp/Tracing.h"
#include "meshflow/meshflow.h"
#include "passes/PlanControl.h"
#include "passes/Planner.h"

using namespace meshflow;
using passes::PlanControl;
using passes::PlanInterrupted;

namespace {

ir::Graph tracedGpt() {
  Interpreter interpreter;
  auto status = interpreter.eval(
      "import std.models\ntrace(gpt(layers = 4, hidden = 256, heads = 4, seq = 64, vocab = 512))",
      "test.mesh");
  INFO(renderAll(status.diagnostics));
  REQUIRE(status.ok);
  return dynamic_cast<interp::GraphObject*>(status.value->object().get())->graph();
}

ir::Cluster twoNodes() {
  ir::Cluster c;
  c.nodes = 2;
  c.devicesPerNode = 4;
  c.device = {"test-gpu", 8e9, 100e12, 1e12};
  c.intraNode = {100e9, 2e-6};
  c.interNode = {20e9, 10e-6};
  return c;
}

passes::PlanRequest requestWith(PlanControl& control) {
  passes::PlanRequest r;
  r.globalBatch = 32;
  r.control = &control;
  return r;
}

PlanInterrupted::Reason reasonOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const PlanInterrupted& stopped) {
    return stopped.reason();
  }
  FAIL("the run was not interrupted");
  return {};
}

void spin(double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

}  // namespace

TEST_CASE("a nested pass's time is its own, not also its parent's", "[plancontrol]") {
  PlanControl control;
  control.begin();
  auto before = std::chrono::steady_clock::now();
  {
    PlanControl::Pass outer(&control, "outer");
    spin(0.02);
    {
      PlanControl::Pass inner(&control, "inner");
      spin(0.04);
    }
    spin(0.02);
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  control.end();
  auto times = control.passTimes();
  REQUIRE(times.size() == 2);
  CHECK(times[0].pass == "outer");
  CHECK(times[1].pass == "inner");
  CHECK(times[0].seconds >= 0.04);
  CHECK(times[1].seconds >= 0.04);
  // Counted once each: the outer pass's time leaves out the inner one's.
  CHECK(times[0].seconds + times[1].seconds <= wall);
}

TEST_CASE("a safe point throws when cancelled, watched or out of time", "[plancontrol]") {
  PlanControl control;
  control.begin();
  control.check(3);
  CHECK(control.candidates() == 3);

  control.cancel();
  CHECK(reasonOf([&] { control.check(); }) == PlanInterrupted::Reason::kCancelled);
  control.begin();  // a new run clears its own cancellation
  control.check();

  std::atomic<bool> flag{true};
  control.watch(&flag);
  CHECK(reasonOf([&] { control.check(); }) == PlanInterrupted::Reason::kCancelled);
  flag = false;

  control.setTimeBudget(0.0);
  control.begin();
  CHECK(reasonOf([&] { control.check(); }) == PlanInterrupted::Reason::kOutOfTime);
  control.setTimeBudget(std::nullopt);
  control.check();
}

TEST_CASE("the out-of-time message names the budget, the pass and the candidates", "[plancontrol]") {
  PlanControl control;
  control.setTimeBudget(0.0);
  control.begin();
  PlanControl::Pass pass(&control, "layer costs");
  try {
    control.check(1);
    FAIL("no throw");
  } catch (const PlanInterrupted& stopped) {
    CHECK(std::string(stopped.what()) ==
          "planning ran out of its time budget of 0 s in layer costs, after 1 candidate");
  }
}

TEST_CASE("the planner reports its passes, candidates and progress", "[plancontrol][planner]") {
  static const ir::Graph g = tracedGpt();
  PlanControl control;
  std::vector<passes::PlanProgress> seen;
  control.setProgress([&](const passes::PlanProgress& p) { seen.push_back(p); },
                      std::chrono::nanoseconds(0));
  ir::Plan plan = passes::planTraining(g, twoNodes(), requestWith(control));
  CHECK(!plan.stages.empty());
  CHECK(control.candidates() > 0);
  std::vector<std::string> passes;
  double total = 0;
  for (const passes::PassTime& t : control.passTimes()) {
    passes.push_back(t.pass);
    total += t.seconds;
  }
  CHECK(passes == std::vector<std::string>{"layer clustering", "layer costs", "stage search",
                                           "placement and simulation"});
  CHECK(total > 0);
  REQUIRE(seen.size() >= 2);
  CHECK(seen.back().finished);
  CHECK(seen.back().candidates == control.candidates());
  for (std::size_t k = 0; k + 1 < seen.size(); ++k) {
    CHECK_FALSE(seen[k].finished);
    CHECK(seen[k].candidates <= seen[k + 1].candidates);
  }
}

TEST_CASE("cancelling mid-plan stops the planner, its worker threads included",
          "[plancontrol][planner]") {
  static const ir::Graph g = tracedGpt();
  PlanControl control;
  // The first progress report (from whichever thread reaches a safe point)
  // cancels, as Ctrl-C would from the signal handler.
  int reports = 0;
  control.setProgress([&](const passes::PlanProgress& p) {
    if (!p.finished && ++reports == 1) control.cancel();
  }, std::chrono::nanoseconds(0));
  CHECK(reasonOf([&] { passes::planTraining(g, twoNodes(), requestWith(control)); }) ==
        PlanInterrupted::Reason::kCancelled);
  CHECK(reports >= 1);

  // The same control plans again once the cancellation is over.
  control.setProgress(nullptr);
  CHECK(!passes::planTraining(g, twoNodes(), requestWith(control)).stages.empty());
}

TEST_CASE("a cancel from another thread ends a planning run", "[plancontrol][planner]") {
  static const ir::Graph g = tracedGpt();
  PlanControl control;
  // The first report waits for the host thread's cancel; a later safe point
  // must then stop the run.
  std::atomic<bool> started{false};
  control.setProgress([&](const passes::PlanProgress& p) {
    if (p.finished || started.exchange(true)) return;
    while (!control.cancelled()) std::this_thread::yield();
  }, std::chrono::nanoseconds(0));
  std::thread host([&] {
    while (!started) std::this_thread::yield();
    control.cancel();
  });
  auto reason = reasonOf([&] { passes::planTraining(g, twoNodes(), requestWith(control)); });
  host.join();
  CHECK(reason == PlanInterrupted::Reason::kCancelled);
}

TEST_CASE("a spent time budget stops the planner with kOutOfTime", "[plancontrol][planner]") {
  static const ir::Graph g = tracedGpt();
  PlanControl control;
  control.setTimeBudget(0.0);
  CHECK(reasonOf([&] { passes::planTraining(g, twoNodes(), requestWith(control)); }) ==
        PlanInterrupted::Reason::kOutOfTime);
}
