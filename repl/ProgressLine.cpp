#include "repl/ProgressLine.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string_view>

namespace meshflow::cli {
namespace {

constexpr std::string_view kEraseLine = "\r\x1b[K";

bool isTerminal(int fd) {
  const char* term = std::getenv("TERM");
  return isatty(fd) != 0 && term != nullptr && std::string_view(term) != "dumb";
}

// write(2) directly: the planner's threads call this, one at a time, while
// the REPL's streams are not writing.
void writeAll(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

std::string progressText(const PlanProgress& progress) {
  return fmt::format("planning: {}, {} candidate{} searched, {:.1f} s (Ctrl-C cancels)",
                     progress.pass.empty() ? "starting" : progress.pass, progress.candidates,
                     progress.candidates == 1 ? "" : "s", progress.elapsedSeconds);
}

std::function<void(const PlanProgress&)> progressLineFor(int fd) {
  if (!isTerminal(fd)) return {};
  auto shown = std::make_shared<bool>(false);
  return [fd, shown](const PlanProgress& progress) {
    if (progress.finished) {
      if (*shown) writeAll(fd, kEraseLine);
      *shown = false;
      return;
    }
    if (progress.elapsedSeconds < kProgressDelaySeconds) return;
    writeAll(fd, std::string(kEraseLine) + progressText(progress));
    *shown = true;
  };
}

}  // namespace meshflow::cli
