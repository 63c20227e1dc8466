// The REPL's plan-explorer commands (:plan, :set, :alts, :compare, :explain,
// :timeline, :memory, :time). They build .mesh source and run it in the
// session's interpreter, so a plan made by a command is an ordinary value
// (`p`) that scripts and later commands can use (docs/repl.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshflow/meshflow.h"
#include "repl/ReplReply.h"
#include "repl/ScheduleSource.h"

namespace meshflow::cli {

class PlanExplorer {
 public:
  /// The commands this class runs, without their colon, in :help's order.
  static const std::vector<std::string>& commandNames();
  /// The hint names `:plan` and `:set` accept, for completion.
  static const std::vector<std::string>& hintNames();

  /// Runs `:name args`; nullopt when `name` is not a plan command.
  std::optional<ReplReply> run(Interpreter& interpreter, std::string_view name,
                               std::string_view args);

  /// Called with each input that ran without error at the prompt, how long
  /// it ran and the interpreter's last planning pass times: remembers
  /// `let NAME = plan(...)` as the last plan made, for :set and :time.
  void noteInput(std::string_view input, double seconds, std::vector<PassTime> passes);

  /// Forgets the last plan (:reset).
  void reset() { last_.reset(); }

 private:
  /// How the last plan made at the prompt was made, so :set can make it again.
  struct LastPlan {
    std::string name;  // the global it is bound to
    std::string model, cluster, batch;
    std::string schedule;  // a schedule expression, or empty
    std::string extra;     // further arguments of plan(...), verbatim
    HintSettings hints;    // set by :plan and :set
    double planningSeconds = 0;
    std::vector<PassTime> passes;  // the planner's passes, for :time
  };

  ReplReply planCommand(Interpreter& interpreter, std::string_view args);
  ReplReply setCommand(Interpreter& interpreter, std::string_view args);
  ReplReply altsCommand(Interpreter& interpreter, std::string_view args);
  ReplReply compareCommand(Interpreter& interpreter, std::string_view args);
  ReplReply evalCommand(Interpreter& interpreter, const std::string& source);
  ReplReply memoryCommand(Interpreter& interpreter);
  ReplReply timeCommand(Interpreter& interpreter);
  /// Plans `plan` again and binds it; `previous` is the plan it replaces, if any.
  ReplReply replan(Interpreter& interpreter, LastPlan plan);
  /// The name of the plan the commands act on: the last one made, else `p`.
  std::string currentName() const { return last_ ? last_->name : "p"; }

  std::optional<LastPlan> last_;
};

}  // namespace meshflow::cli
