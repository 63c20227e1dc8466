// The REPL's plan explorer and session commands without a terminal: :plan,
// :set, :alts, :compare, :explain, :timeline, :memory, :time, :load, :reload,
// :save, :reset, and redefinition at the prompt.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "repl/ReplSession.h"

namespace meshflow::cli {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  std::string printed;
  ReplSession session{[this] {
    Config config;
    config.write = [this](std::string_view text) { printed += text; };
    // As `meshflow repl --allow-read` would: :load's script may import its neighbours.
    config.files.readRoots.push_back(fs::temp_directory_path().string());
    return config;
  }()};

  Fixture() { REQUIRE(session.feed("import std.models").diagnostics.empty()); }
};

constexpr const char* kTinyPlan =
    ":plan gpt(layers = 2, hidden = 64, heads = 2, seq = 16, vocab = 64) on cpu(devices = 4) "
    "batch=8";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE(":plan plans, binds p and prints the plan", "[repl][plan]") {
  Fixture f;
  ReplReply reply = f.session.feed(std::string(kTinyPlan) + " microbatches=2 pipeline=gpipe");
  INFO(reply.diagnostics);
  CHECK(reply.diagnostics.empty());
  CHECK(contains(reply.output,
                 "p = plan(gpt(layers = 2, hidden = 64, heads = 2, seq = 16, "
                 "vocab = 64), cpu(devices = 4), batch = 8, __repl_hints)"));
  CHECK(contains(reply.output, "  microbatches = 2\n"));
  CHECK(contains(reply.output, "schedule gpipe, 2 microbatches"));
  CHECK(f.session.feed("p.microbatches").output == "2\n");
  CHECK(f.session.feed("p.schedule").output == "\"gpipe\"\n");
}

TEST_CASE(":plan without `on` or with a bad hint explains its form", "[repl][plan]") {
  Fixture f;
  CHECK(contains(f.session.feed(":plan gpt()").diagnostics, "usage: :plan MODEL on CLUSTER"));
  CHECK(contains(f.session.feed(":plan gpt() on").diagnostics, "usage: :plan MODEL on CLUSTER"));
  ReplReply unknown = f.session.feed(std::string(kTinyPlan) + " microbatch=2");
  CHECK(contains(unknown.diagnostics, "unknown schedule hint 'microbatch'"));
  CHECK_FALSE(f.session.interpreter().global("p"));
}

TEST_CASE(":set re-plans the last plan with changed hints and shows what changed", "[repl][plan]") {
  Fixture f;
  CHECK(contains(f.session.feed(":set microbatches=4").diagnostics, "there is none yet"));
  f.session.feed(std::string(kTinyPlan) + " microbatches=2");
  ReplReply reply = f.session.feed(":set microbatches=4");
  INFO(reply.diagnostics);
  CHECK(reply.diagnostics.empty());
  CHECK(contains(reply.output, "changed:\n"));
  CHECK(contains(reply.output, "  microbatches: 2 -> 4\n"));
  CHECK(f.session.feed("p.microbatches").output == "4\n");
  // A hint the planner refuses leaves the previous plan bound.
  ReplReply refused = f.session.feed(":set memory_per_device=1KB");
  CHECK(contains(refused.diagnostics, "cannot plan 'gpt'"));
  CHECK(contains(refused.diagnostics, "note: 'p' is still the previous plan"));
  CHECK(f.session.feed("p.microbatches").output == "4\n");
}

TEST_CASE(":set also re-plans a plan made with let ... = plan(...)", "[repl][plan]") {
  Fixture f;
  f.session.feed("schedule two { stages = 2\n microbatches = 2 }");
  ReplReply made = f.session.feed(
      "let q = plan(gpt(layers = 2, hidden = 64, heads = 2, seq = 16, vocab = 64), "
      "cpu(devices = 4), batch = 8, schedule = two)");
  INFO(made.diagnostics);
  REQUIRE(made.diagnostics.empty());
  // An input that only ends with a call is not a plan(...) to remember.
  f.session.feed(
      "let r = plan(gpt(layers = 2, hidden = 64, heads = 2, seq = 16, vocab = 64), "
      "cpu(devices = 4), batch = 8)\nprint(1)");
  ReplReply reply = f.session.feed(":set microbatches=4");
  INFO(reply.diagnostics);
  CHECK(reply.diagnostics.empty());
  CHECK(contains(reply.output, "q = plan("));
  CHECK(f.session.feed("q.microbatches").output == "4\n");
  // The block's other hint still holds.
  CHECK(f.session.feed("len(q.stages)").output == "2\n");
}

TEST_CASE(":alts lists the alternatives and :alts N plans with one", "[repl][plan]") {
  Fixture f;
  f.session.feed(kTinyPlan);
  ReplReply list = f.session.feed(":alts");
  CHECK(contains(list.output, "weighed for p"));
  CHECK(contains(list.output, "  [0] "));
  const std::string description = f.session.feed("p.alternatives[1].description").output;
  ReplReply chosen = f.session.feed(":alts 1");
  INFO(chosen.diagnostics);
  CHECK(chosen.diagnostics.empty());
  CHECK(contains(chosen.output, "p = p.alternatives[1]: "));
  CHECK(contains(chosen.output, "  pipeline = "));
  // The alternative itself became p, not a plan made again.
  CHECK(f.session.feed("p.description").output == description);
  CHECK(contains(f.session.feed(":alts 999").diagnostics, "usage: :alts [N]"));
}

TEST_CASE(":compare, :explain, :timeline, :memory and :time", "[repl][plan]") {
  Fixture f;
  f.session.feed(std::string(kTinyPlan) + " stages=1");
  f.session.feed("let one = p");
  f.session.feed(std::string(kTinyPlan) + " stages=2");
  ReplReply compared = f.session.feed(":compare one p");
  INFO(compared.diagnostics);
  CHECK(contains(compared.output, "step, estimated"));
  CHECK(contains(compared.output, "* stages            1 on 1 rank "));
  CHECK(contains(compared.output, "they differ in: stages"));
  CHECK(contains(compared.output, "faster estimated"));
  // The same text as compare(one, p) in a script.
  f.printed.clear();
  CHECK(f.session.feed("compare(one, p)").diagnostics.empty());
  CHECK(f.printed == compared.output);
  CHECK(contains(f.session.feed(":compare one 3").diagnostics, "'3' is an int, not a plan"));

  f.printed.clear();
  CHECK(f.session.feed(":explain block0.mlp").diagnostics.empty());
  CHECK(contains(f.printed, "block0.mlp.fc1"));
  CHECK(contains(f.session.feed(":explain nothing_like_this").diagnostics, "no op of the plan"));
  f.printed.clear();
  CHECK(f.session.feed(":timeline").diagnostics.empty());
  CHECK(contains(f.printed, "one step, simulated"));
  f.printed.clear();
  CHECK(f.session.feed(":timeline 20").diagnostics.empty());
  REQUIRE(contains(f.printed, "| busy "));
  std::string firstRow = f.printed.substr(f.printed.find('|'));
  CHECK(firstRow.find('|', 1) == 21);  // 20 columns between the bars
  CHECK(contains(f.session.feed(":timeline wide").diagnostics, "usage: :timeline [WIDTH]"));
  CHECK(contains(f.session.feed(":timeline 3").diagnostics, "width must be between 8 and 1000"));
  CHECK(contains(f.session.feed(":memory").output, "memory per device     weights  gradients"));
  CHECK(contains(f.session.feed(":memory").output, "\nstage 1 "));
  std::string times = f.session.feed(":time").output;
  CHECK(contains(times, "planning p took "));
  for (const char* pass : {"\n  layer clustering ", "\n  layer costs ", "\n  stage search ",
                           "\n  placement and simulation ", "\n  tracing the model, the rest "})
    CHECK(contains(times, pass));
}

TEST_CASE(":time covers a plan made by `let p = plan(...)` too", "[repl][plan]") {
  Fixture f;
  f.session.feed("let c = cpu(devices = 2)");
  ReplReply made = f.session.feed(
      "let q = plan(gpt(layers = 2, hidden = 64, heads = 2, seq = 16, vocab = 64), c, batch = 8)");
  INFO(made.diagnostics);
  std::string times = f.session.feed(":time").output;
  CHECK(contains(times, "planning q took "));
  CHECK(contains(times, "\n  layer costs "));
}

TEST_CASE("at the prompt a definition replaces an earlier one, with a note", "[repl]") {
  Fixture f;
  f.session.feed("let width = 4");
  ReplReply again = f.session.feed("let width = 8");
  CHECK(contains(again.diagnostics, "<repl>:1:5: note: 'width' replaces its earlier definition\n"));
  CHECK(f.session.feed("width").output == "8\n");
  f.session.feed("fn f(x) = x + 1");
  f.session.feed("fn f(x) = x * 10");
  CHECK(f.session.feed("f(2)").output == "20\n");
  f.session.feed("model m() {\n  return 1\n}");
  CHECK(contains(f.session.feed("model m() {\n  return 2\n}").diagnostics, "'m' replaces"));
}

TEST_CASE(":save writes the inputs, :load and :reload run a script, :reset forgets",
          "[repl][session]") {
  fs::path folder = fs::temp_directory_path() / "meshflow-repl-session-test";
  fs::remove_all(folder);
  fs::create_directories(folder);
  Fixture f;
  f.session.feed("let a = 40");
  f.session.feed("let broken = zzz");  // not saved: it failed
  f.session.feed("fn plus2(x) = x + 2");
  std::string saved = (folder / "session.mesh").string();
  CHECK(f.session.feed(":save " + saved).output == "saved 3 inputs to " + saved + "\n");
  std::ifstream in(saved);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "import std.models\nlet a = 40\nfn plus2(x) = x + 2\n");
  CHECK(contains(f.session.feed(":save " + (folder / "missing" / "x.mesh").string()).diagnostics,
                 "does not exist"));

  std::string module = (folder / "_width.mesh").string();
  std::string script = (folder / "script.mesh").string();
  std::ofstream(module) << "let width = 3\n";
  std::ofstream(script) << "import \"_width.mesh\"\nlet area = width * width\n";
  CHECK(f.session.feed(":load " + script).output == "loaded " + script + "\n");
  CHECK(f.session.feed("area").output == "9\n");
  std::ofstream(module) << "let width = 5\n";
  ReplReply reloaded = f.session.feed(":reload");
  INFO(reloaded.diagnostics);
  CHECK(reloaded.output == "reloaded " + script + "\n");
  CHECK(f.session.feed("area").output == "25\n");

  CHECK(contains(f.session.feed(":reset").output, "a fresh session"));
  CHECK(contains(f.session.feed("a").diagnostics, "unknown name 'a'"));
  CHECK(contains(f.session.feed(":reload").diagnostics, "there is none"));
  fs::remove_all(folder);
}

TEST_CASE("hint names complete after :set and after :plan's cluster", "[repl][completion]") {
  Fixture f;
  CHECK(f.session.complete(":set micro", 10).candidates ==
        std::vector<std::string>{"microbatches"});
  std::string line = ":plan gpt() on cpu(devices = 4) pipe";
  CHECK(f.session.complete(line, line.size()).candidates == std::vector<std::string>{"pipeline"});
  f.session.feed(kTinyPlan);
  CHECK(f.session.complete("p.expl", 6).candidates == std::vector<std::string>{"explain"});
}

TEST_CASE("interrupt stops a long loop and keeps what was defined", "[repl][interrupt]") {
  Fixture f;
  f.session.feed("var count = 0");
  // The host's Ctrl-C handler, from inside the run as a signal would arrive.
  f.session.interpreter().defineFunction("press_ctrl_c", {}, [&f](HostCall&) {
    f.session.interrupt();
    return Value();
  });
  ReplReply reply =
      f.session.feed("while true { count = count + 1\n if count == 1000 { press_ctrl_c() } }");
  CHECK(contains(reply.diagnostics, "interrupted (Ctrl-C) [Interrupted]"));
  CHECK(f.session.feed("count").output == "1000\n");
  CHECK(f.session.feed("1 + 1").output == "2\n");
}

}  // namespace
}  // namespace meshflow::cli
