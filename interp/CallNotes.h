// The "in 'f' called here" notes an error gathers on its way out of calls:
// innermost first, and always ending at the outermost call, so that an error
// deep inside the standard library still points at the user's line.
#pragma once

#include <string>

#include "interp/SourceFile.h"
#include "meshflow/Error.h"

namespace meshflow::interp {

/// At most this many call notes: the innermost ones and the outermost.
inline constexpr std::size_t kMaxCallNotes = 4;

/// Adds a note `message` at `span` to a located `error` leaving a call. A
/// recursive call repeating the last note is noted once; past kMaxCallNotes
/// the newest note replaces the last one, so the outermost call stays.
void noteCall(ScriptError& error, const std::string& message, const SourceSpan& span);

}  // namespace meshflow::interp
