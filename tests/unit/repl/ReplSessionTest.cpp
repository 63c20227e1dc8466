// The REPL's behaviour without a terminal: values, persistence, continuation
// lines, errors, and its own commands.
#include <catch2/catch.hpp>
#include <string>

#include "repl/LineEditor.h"
#include "repl/ReplSession.h"
#include "repl/TerminalStyle.h"

namespace meshflow::cli {
namespace {

// A session whose script output (print) is collected in `printed`.
struct Fixture {
  std::string printed;
  ReplSession session{[this] {
    Config config;
    config.write = [this](std::string_view text) { printed += text; };
    return config;
  }()};
};

TEST_CASE("an expression prints its value with repr", "[repl]") {
  Fixture f;
  CHECK(f.session.feed("1 + 2").output == "3\n");
  CHECK(f.session.feed("\"a\\tb\"").output == "\"a\\tb\"\n");
  CHECK(f.session.feed("[1, \"x\", true]").output == "[1, \"x\", true]\n");
  ReplReply reply = f.session.feed("2 * 21");
  CHECK(reply.output == "42\n");
  CHECK(reply.diagnostics.empty());
  CHECK_FALSE(reply.quit);
}

TEST_CASE("statements and none print nothing; print goes to the output callback", "[repl]") {
  Fixture f;
  CHECK(f.session.feed("let x = 5").output.empty());
  CHECK(f.session.feed("none").output.empty());
  ReplReply reply = f.session.feed("print(\"x is\", x)");
  CHECK(reply.output.empty());  // print returns none
  CHECK(f.printed == "x is 5\n");
  CHECK(f.session.feed("").output.empty());
  CHECK(f.session.feed("   # only a comment").output.empty());
  CHECK_FALSE(f.session.continuing());
}

TEST_CASE("definitions persist across lines", "[repl]") {
  Fixture f;
  f.session.feed("let hidden = 1024");
  f.session.feed("var step = 0");
  f.session.feed("fn ffn(h) = 4 * h");
  f.session.feed("step = step + 1");
  CHECK(f.session.feed("ffn(hidden) + step").output == "4097\n");
  REQUIRE(f.session.interpreter().global("step"));
  CHECK(f.session.interpreter().global("step")->asInt() == 1);
}

TEST_CASE("an unfinished block asks for continuation lines", "[repl]") {
  Fixture f;
  CHECK(std::string(f.session.prompt()) == "mesh> ");
  ReplReply first = f.session.feed("fn f(x) {");
  CHECK(first.output.empty());
  CHECK(first.diagnostics.empty());
  CHECK(f.session.continuing());
  CHECK(std::string(f.session.prompt()) == "...> ");
  CHECK(f.session.feed("  let y = x * 2").diagnostics.empty());
  CHECK(f.session.feed("").diagnostics.empty());  // a blank line inside the block
  CHECK(f.session.continuing());
  ReplReply last = f.session.feed("  return y + 2 }");
  CHECK(last.diagnostics.empty());
  CHECK_FALSE(f.session.continuing());
  CHECK(std::string(f.session.prompt()) == "mesh> ");
  CHECK(f.session.feed("f(20)").output == "42\n");
}

TEST_CASE("open brackets and trailing operators continue", "[repl]") {
  Fixture f;
  f.session.feed("max(1,");
  CHECK(f.session.continuing());
  CHECK(f.session.feed("  7)").output == "7\n");
  f.session.feed("1 +");
  CHECK(f.session.continuing());
  CHECK(f.session.feed("2").output == "3\n");
  f.session.feed("let r = {name: \"fc1\",");
  CHECK(f.session.continuing());
  f.session.feed("  size: 4}");
  CHECK_FALSE(f.session.continuing());
  CHECK(f.session.feed("r.size").output == "4\n");
}

TEST_CASE("a syntax error that is not at the end does not wait for more", "[repl]") {
  Fixture f;
  ReplReply reply = f.session.feed("let = (");
  CHECK_FALSE(f.session.continuing());
  CHECK(reply.diagnostics.find("[SyntaxError]") != std::string::npos);
  CHECK(f.session.feed("1").output == "1\n");
}

TEST_CASE("errors are printed in full and do not end the session", "[repl]") {
  Fixture f;
  ReplReply reply = f.session.feed("let y = zzq + 1");
  CHECK(reply.output.empty());
  CHECK(reply.diagnostics ==
        "<repl>:1:9: error: unknown name 'zzq' [UnknownName]\n"
        "let y = zzq + 1\n"
        "        ^~~\n");
  CHECK_FALSE(reply.quit);
  CHECK(f.session.feed("1 // 0").diagnostics.find("[DivisionByZero]") != std::string::npos);
  CHECK(f.session.feed("let y = 3").diagnostics.empty());
  CHECK(f.session.feed("y").output == "3\n");
}

TEST_CASE("the pending input runs at the end of input and can be cancelled", "[repl]") {
  Fixture f;
  f.session.feed("fn g() {");
  ReplReply end = f.session.finish();
  CHECK(end.diagnostics.find("'{' opened here is never closed") != std::string::npos);
  CHECK_FALSE(f.session.continuing());
  CHECK(f.session.finish().diagnostics.empty());

  f.session.feed("[1, 2,");
  CHECK(f.session.continuing());
  f.session.cancel();
  CHECK_FALSE(f.session.continuing());
  CHECK(f.session.feed("5").output == "5\n");
}

TEST_CASE("diagnostics are coloured by severity for a terminal", "[repl]") {
  CHECK(coloured("<repl>:1:1: error: unknown name 'x' [UnknownName]\nx\n^\n") ==
        "<repl>:1:1: \x1b[1;31merror:\x1b[0m unknown name 'x' [UnknownName]\nx\n^\n");
  CHECK(coloured("error: unknown REPL command\n<repl>:2:1: note: here\n") ==
        "\x1b[1;31merror:\x1b[0m unknown REPL command\n<repl>:2:1: \x1b[1;36mnote:\x1b[0m here\n");
  // Only the severity: the same word inside a message or a source line stays.
  CHECK(coloured("a.mesh:1:1: error: print(\"error: x\")\n") ==
        "a.mesh:1:1: \x1b[1;31merror:\x1b[0m print(\"error: x\")\n");
}

TEST_CASE(":help lists the commands and examples", "[repl]") {
  Fixture f;
  ReplReply reply = f.session.feed(":help");
  CHECK(reply.output == ReplSession::helpText());
  CHECK(reply.output.find(":quit") != std::string::npos);
  CHECK(reply.output.find(":help") != std::string::npos);
  CHECK(reply.output.find("let hidden = 1024") != std::string::npos);
  CHECK_FALSE(reply.quit);
  CHECK(f.session.feed("  :h  ").output == ReplSession::helpText());
}

TEST_CASE(":quit and :q leave; unknown commands are an error", "[repl]") {
  Fixture f;
  CHECK(f.session.feed(":quit").quit);
  CHECK(f.session.feed(":q").quit);
  ReplReply unknown = f.session.feed(":frobnicate");
  CHECK_FALSE(unknown.quit);
  CHECK(unknown.diagnostics == "error: unknown REPL command ':frobnicate' (:help lists them)\n");
  // Commands work even in the middle of an unfinished input.
  f.session.feed("fn h() {");
  CHECK(f.session.feed(":q").quit);
}

TEST_CASE("REPL commands complete after a colon", "[repl][completion]") {
  Fixture f;
  ReplCompletion c = f.session.complete(":he", 3);
  CHECK(c.candidates == std::vector<std::string>{"help"});
  CHECK(c.wordLength == 2);
  CHECK(c.commonPrefix == "help");
  CHECK(f.session.complete(":", 1).candidates ==
        std::vector<std::string>{"alts", "compare", "explain", "help", "load", "memory", "plan",
                                 "quit", "reload", "reset", "save", "set", "time", "timeline"});
  CHECK(f.session.complete(":ti", 3).commonPrefix == "time");
}

TEST_CASE("the session's completion knows the word length and common prefix",
          "[repl][completion]") {
  Fixture f;
  f.session.feed("let learning_rate = 3e-4");
  f.session.feed("let learning_steps = 10");
  f.session.feed("let r = {name: \"fc1\", names: 2}");
  ReplCompletion c = f.session.complete("print(learn", 11);
  CHECK(c.candidates == std::vector<std::string>{"learning_rate", "learning_steps"});
  CHECK(c.wordLength == 5);
  CHECK(c.commonPrefix == "learning_");
  ReplCompletion member = f.session.complete("r.na", 4);
  CHECK(member.wordLength == 2);
  CHECK(member.commonPrefix == "name");
  CHECK(f.session.complete("zzz", 3).candidates.empty());
  CHECK(f.session.complete("zzz", 3).commonPrefix.empty());
}

TEST_CASE("completion lists are laid out in columns", "[repl][completion]") {
  CHECK(formatColumns({}, 80).empty());
  CHECK(formatColumns({"a", "bb", "ccc"}, 80) == "a    bb   ccc\n");
  CHECK(formatColumns({"a", "bb", "ccc"}, 10) == "a    ccc\nbb\n");
  CHECK(formatColumns({"longword"}, 3) == "longword\n");
}

}  // namespace
}  // namespace meshflow::cli
