// The exception that carries a user error to the nearest diagnostic.
#pragma once

#include <stdexcept>
#include <string>

#include "meshflow/Diagnostic.h"

namespace meshflow {

/// Thrown by the interpreter, and by host functions, for an error that the
/// script caused. The interpreter adds the source location of the expression
/// being evaluated if the error does not have one yet, and reports it as a
/// diagnostic; it never escapes Interpreter::eval.
class ScriptError : public std::exception {
 public:
  ScriptError(DiagnosticKind kind, std::string message) {
    diagnostic_.kind = kind;
    diagnostic_.message = std::move(message);
  }
  explicit ScriptError(Diagnostic diagnostic)
      : diagnostic_(std::move(diagnostic)), located_(diagnostic_.hasLocation()) {}

  const char* what() const noexcept override { return diagnostic_.message.c_str(); }
  DiagnosticKind kind() const { return diagnostic_.kind; }
  const Diagnostic& diagnostic() const { return diagnostic_; }
  Diagnostic& diagnostic() { return diagnostic_; }
  bool located() const { return located_; }
  /// Gives the error its location (once; the innermost location wins).
  void locate(Diagnostic located) {
    located.notes = std::move(diagnostic_.notes);
    diagnostic_ = std::move(located);
    located_ = true;
  }

 private:
  Diagnostic diagnostic_;
  bool located_ = false;
};

}  // namespace meshflow
