// `meshflow schedule`: the work lives in passes/schedules/ScheduleCli so it is
// tested without the interpreter.
#include "passes/schedules/ScheduleCli.h"
#include "repl/Commands.h"

namespace meshflow::cli {

int scheduleCommand(Args args, std::ostream& out, std::ostream& err) {
  return passes::runScheduleCli(args, out, err);
}

}  // namespace meshflow::cli
