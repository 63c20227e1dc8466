// The control messages of the controller and its workers (docs/distributed.md):
// msgpack-encoded JSON objects, {"command": NAME, ...} from the controller and
// {"ok": true, ...} or {"error": MESSAGE, "aborted": BOOL} back.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "runtime/parallel/ParallelTrainer.h"

namespace meshflow::runtime::distributed {

std::string encode(const nlohmann::json& message);
/// Throws JobFormatError for bytes that are no message.
nlohmann::json decode(std::string_view bytes);

/// A reply: done, or the error that stopped this rank (`aborted`: only
/// because another rank failed first).
nlohmann::json okReply(nlohmann::json fields = nlohmann::json::object());
nlohmann::json errorReply(const std::string& message, bool aborted);

/// What `device` did in a step (its share of the loss, times and memory), and
/// the controller's side: that device's entries of `result` filled in.
nlohmann::json stepReport(const ParallelStepResult& result, int device);
void addStepReport(ParallelStepResult& result, const nlohmann::json& report, int device);

}  // namespace meshflow::runtime::distributed
