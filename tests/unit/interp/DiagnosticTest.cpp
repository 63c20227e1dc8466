#include <catch2/catch.hpp>

#include "interp/SourceFile.h"

using namespace meshflow;

TEST_CASE("a diagnostic renders location, kind, source and caret", "[diagnostic]") {
  interp::SourceFile file("a.mesh", "let x = 1\n\tprint(y)\n");
  interp::SourceSpan span{&file, 1, 7, 1, 8};
  auto d = interp::makeDiagnostic(DiagnosticKind::UnknownName, "unknown name 'y'", span);
  d.notes.push_back(interp::makeDiagnostic(DiagnosticKind::UnknownName, "see here",
                                           {&file, 0, 4, 0, 5}, Severity::Note));
  CHECK(d.render() ==
        "a.mesh:2:8: error: unknown name 'y' [UnknownName]\n"
        "\tprint(y)\n"
        "\t      ^\n"
        "a.mesh:1:5: note: see here\n"
        "let x = 1\n"
        "    ^\n");
}

TEST_CASE("a long source line is shown as a window around the caret", "[diagnostic]") {
  std::string line = std::string(300, 'a') + "BAD" + std::string(300, 'b');
  interp::SourceFile file("long.mesh", line);
  auto d = interp::makeDiagnostic(DiagnosticKind::SyntaxError, "bad", {&file, 0, 300, 0, 303});
  std::string text = d.render();
  CHECK(text.find("long.mesh:1:301:") == 0);
  auto lines = text.substr(text.find('\n') + 1);
  auto source = lines.substr(0, lines.find('\n'));
  auto caret = lines.substr(lines.find('\n') + 1);
  CHECK(source.size() < 160);
  CHECK(source.substr(caret.find('^'), 3) == "BAD");
}

TEST_CASE("every kind has a name and a description", "[diagnostic]") {
  for (auto kind : allDiagnosticKinds()) {
    CHECK_FALSE(kindName(kind).empty());
    CHECK_FALSE(kindDescription(kind).empty());
  }
  CHECK(kindName(DiagnosticKind::UnitMismatch) == "UnitMismatch");
}
