#include "interp/CallNotes.h"

namespace meshflow::interp {

void noteCall(ScriptError& error, const std::string& message, const SourceSpan& span) {
  if (!error.located() || !span.valid()) return;
  auto& notes = error.diagnostic().notes;
  Diagnostic note = makeDiagnostic(error.kind(), message, span, Severity::Note);
  bool repeated = !notes.empty() && notes.back().line == note.line &&
                  notes.back().column == note.column && notes.back().message == note.message;
  if (repeated) return;
  if (notes.size() < kMaxCallNotes)
    notes.push_back(std::move(note));
  else
    notes.back() = std::move(note);
}

}  // namespace meshflow::interp
