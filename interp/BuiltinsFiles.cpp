// read_text and write_text: the only file access a script has besides imports,
// confined to the folders the host allows.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "interp/Builtins.h"
#include "interp/Evaluator.h"
#include "interp/FileAccess.h"

namespace meshflow::interp {
namespace {

std::filesystem::path allowed(Evaluator& ev, const BoundArgs& a, bool write) {
  const std::string& path = stringArg(a, 0, "the path");
  try {
    return write ? checkWrite(ev.state().config, path) : checkRead(ev.state().config, path);
  } catch (ScriptError& denied) {
    argumentError(a, 0, DiagnosticKind::AccessDenied, denied.diagnostic().message);
  }
}

Value readText(Evaluator& ev, BoundArgs& a) {
  auto path = allowed(ev, a, false);
  std::error_code error;
  auto size = std::filesystem::file_size(path, error);
  std::ifstream in(path, std::ios::binary);
  if (error || !in)
    argumentError(a, 0, DiagnosticKind::InvalidValue, fmt::format("cannot read '{}'", path.string()));
  ev.ensureRoom(size);
  std::ostringstream text;
  text << in.rdbuf();
  return ev.makeString(text.str());
}

Value writeText(Evaluator& ev, BoundArgs& a) {
  auto path = allowed(ev, a, true);
  const std::string& text = stringArg(a, 1, "the text");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out)
    argumentError(a, 0, DiagnosticKind::InvalidValue,
                  fmt::format("cannot write '{}': {}", path.string(), whyCannotWrite(path)));
  return Value();
}

}  // namespace

void installFileBuiltins(Environment& env) {
  defineBuiltin(env, "read_text", {{"path", {}}}, readText);
  defineBuiltin(env, "write_text", {{"path", {}}, {"text", {}}}, writeText);
}

}  // namespace meshflow::interp
