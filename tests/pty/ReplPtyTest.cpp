// Drives `meshflow repl` through a pseudo-terminal as a person would: waits for
// the prompt, types a line, reads what appears on the screen. Every wait has a
// deadline and the REPL is killed when one passes, so the test never hangs.
//
// usage: ReplPtyTest PATH/TO/meshflow
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(15);

int failures = 0;

void check(bool ok, const std::string& what, const std::string& screen = "") {
  std::cout << (ok ? "ok   " : "FAIL ") << what << "\n";
  if (!ok) {
    ++failures;
    if (!screen.empty())
      std::cout << "---- screen so far ----\n" << screen << "\n-----------------------\n";
  }
}

// One `meshflow repl` (or another command) on the slave side of a pseudo-terminal.
class PtySession {
 public:
  /// `colour`: leave NO_COLOR unset, so diagnostics come coloured. `args`: the
  /// command's arguments after `meshflow`.
  PtySession(const std::string& meshflow, const std::string& home, bool colour = false,
             std::vector<std::string> args = {"repl"}) {
    winsize size{24, 100, 0, 0};
    pid_ = forkpty(&master_, nullptr, nullptr, &size);
    if (pid_ == 0) {
      setenv("HOME", home.c_str(), 1);
      setenv("TERM", "vt100", 1);
      if (colour)
        unsetenv("NO_COLOR");
      else
        setenv("NO_COLOR", "1", 1);
      std::vector<char*> argv{const_cast<char*>(meshflow.c_str())};
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(meshflow.c_str(), argv.data());
      _exit(127);
    }
    if (pid_ < 0) {
      std::perror("forkpty");
      std::exit(1);
    }
  }

  ~PtySession() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }

  void type(std::string_view text) {
    while (!text.empty()) {
      ssize_t n = write(master_, text.data(), text.size());
      if (n <= 0) return;
      text.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  /// Reads until `text` appears after the mark; moves the mark past it.
  bool waitFor(std::string_view text) {
    auto end = Clock::now() + kDeadline;
    while (true) {
      auto found = screen_.find(text, mark_);
      if (found != std::string::npos) {
        mark_ = found + text.size();
        return true;
      }
      if (!readSome(end)) return false;
    }
  }

  /// Waits for the REPL to exit; its exit status, or -1 if it had to be killed.
  int waitExit() {
    auto end = Clock::now() + kDeadline;
    while (Clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        while (readSome(Clock::now() + std::chrono::milliseconds(50))) {
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      readSome(Clock::now() + std::chrono::milliseconds(50));
    }
    return -1;
  }

  /// Everything after the mark (for messages and negative checks).
  std::string rest() const { return screen_.substr(mark_); }
  const std::string& screen() const { return screen_; }

 private:
  bool readSome(Clock::time_point end) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left.count() <= 0) return false;
    pollfd fd{master_, POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) return false;
    char buffer[4096];
    ssize_t n = read(master_, buffer, sizeof buffer);
    if (n <= 0) return false;  // EIO once the REPL has exited
    screen_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int master_ = -1;
  bool exited_ = false;
  std::string screen_;
  std::size_t mark_ = 0;
};

// Types a line at the prompt, as a person would: only once the prompt shows.
bool enter(PtySession& repl, std::string_view line, std::string_view prompt = "mesh> ") {
  if (!repl.waitFor(prompt)) return false;
  repl.type(line);
  repl.type("\r");
  return true;
}

void aSessionAtTheTerminal(const std::string& meshflow, const std::filesystem::path& home) {
  PtySession repl(meshflow, home.string());
  check(repl.waitFor(":help for help"), "the banner shows", repl.screen());

  check(enter(repl, "let x = 20"), "prompt before the first line", repl.screen());
  check(enter(repl, "x * 2 + 2") && repl.waitFor("\n42"), "an expression prints its value",
        repl.screen());

  check(enter(repl, "fn add(a, b) {") && repl.waitFor("...> "),
        "an open block asks for a continuation line", repl.screen());
  repl.type("  return a + b\r");
  check(repl.waitFor("...> "), "and again after the block's first line", repl.screen());
  repl.type("}\r");
  check(enter(repl, "add(400, 11)") && repl.waitFor("411"),
        "the multi-line function is defined and callable", repl.screen());

  check(enter(repl, "let y = zzq * 2") &&
            repl.waitFor("<repl>:1:9: error: unknown name 'zzq' [UnknownName]") &&
            repl.waitFor("let y = zzq * 2") && repl.waitFor("^~~"),
        "an error prints the full diagnostic", repl.screen());
  check(enter(repl, "x + 1") && repl.waitFor("21"), "the session goes on after an error",
        repl.screen());

  check(enter(repl, "let learning_rate = 31337"), "a global to complete", repl.screen());
  check(repl.waitFor("mesh> "), "prompt before completing", repl.screen());
  repl.type("learn\t");
  // libedit redraws the line with cursor movements, so look for the added part.
  check(repl.waitFor("ing_rate"), "TAB completes a partly typed global", repl.screen());
  repl.type("\r");
  check(repl.waitFor("31337"), "the completed line runs", repl.screen());

  check(enter(repl, "let r = {name: \"fc1\", size: 4}"), "a record", repl.screen());
  check(repl.waitFor("mesh> "), "prompt before member completion", repl.screen());
  repl.type("r.na\t\r");
  check(repl.waitFor("me") && repl.waitFor("\"fc1\""), "TAB completes a member after a dot",
        repl.screen());

  check(enter(repl, "[1,") && repl.waitFor("...> "), "an open bracket continues", repl.screen());
  repl.type("\x03");  // Ctrl-C drops the pending input
  check(enter(repl, "7 * 6 + 1000") && repl.waitFor("1042"),
        "Ctrl-C drops an unfinished input and the session goes on", repl.screen());

  check(repl.waitFor("mesh> "), "prompt before history recall", repl.screen());
  repl.type("\x10\r");  // Ctrl-P: the previous line again
  check(repl.waitFor("1042"), "Ctrl-P recalls the previous line", repl.screen());

  check(enter(repl, ":help") && repl.waitFor(":quit"), ":help lists the commands", repl.screen());
  check(enter(repl, ":quit"), "prompt before :quit", repl.screen());
  check(repl.waitExit() == 0, ":quit leaves with exit status 0", repl.screen());

  std::ifstream history(home / ".meshflow_history");
  std::stringstream saved;
  saved << history.rdbuf();
  // libedit escapes spaces in its history file (vis(3)), so look for a word.
  check(saved.str().find("learning_rate") != std::string::npos,
        "the history is saved in $HOME/.meshflow_history", saved.str());
}

// The plan explorer as a person types it: commands, their completion, hint
// names, Ctrl-C while something runs and at an empty prompt.
void planExplorerAtTheTerminal(const std::string& meshflow, const std::filesystem::path& home) {
  PtySession repl(meshflow, home.string(), true);
  check(enter(repl, "import std.models"), "prompt before the plan commands", repl.screen());
  check(enter(repl, "nope") && repl.waitFor("\x1b[1;31merror:\x1b[0m unknown name 'nope'"),
        "on a terminal without NO_COLOR, errors are coloured", repl.screen());
  check(enter(repl,
              ":plan gpt(layers = 2, hidden = 64, heads = 2, seq = 16, vocab = 64) on "
              "cpu(devices = 4) batch=8 microbatches=2") &&
            repl.waitFor("2 microbatches"),
        ":plan prints the plan", repl.screen());
  check(repl.waitFor("mesh> "), "prompt before completing a hint", repl.screen());
  repl.type(":set micro\t");
  check(repl.waitFor("batches"), "TAB completes a hint name after :set", repl.screen());
  repl.type("=4\r");
  check(repl.waitFor("microbatches: 2 -> 4"), ":set shows what changed", repl.screen());
  check(repl.waitFor("mesh> "), "prompt before completing a command", repl.screen());
  repl.type(":comp\t");
  check(repl.waitFor("are"), "TAB completes a command after a colon", repl.screen());
  repl.type(" p p\r");
  check(repl.waitFor("the same estimated step time"), ":compare compares two plans", repl.screen());
  check(repl.waitFor("mesh> "), "prompt before completing a plan member", repl.screen());
  repl.type("p.timel\t");
  check(repl.waitFor("ine"), "TAB completes a plan's method", repl.screen());
  repl.type("()\r");
  check(repl.waitFor("one step, simulated"), "the completed method runs", repl.screen());

  check(enter(repl, "var n = 0") && enter(repl, "while true { n = n + 1 }"),
        "a loop that runs until stopped", repl.screen());
  usleep(300 * 1000);
  repl.type("\x03");
  check(repl.waitFor("[Interrupted]"), "Ctrl-C stops the running loop", repl.screen());
  check(enter(repl, "n > 0") && repl.waitFor("true"), "what the loop did is kept", repl.screen());
  check(repl.waitFor("mesh> "), "prompt before Ctrl-C at an empty prompt", repl.screen());
  repl.type("\x03");
  check(repl.waitFor(":quit or Ctrl-D leaves"), "Ctrl-C at an empty prompt says how to leave",
        repl.screen());
  check(enter(repl, "let n = 5") && repl.waitFor("replaces its earlier definition"),
        "a redefinition at the prompt replaces, with a note", repl.screen());
  check(enter(repl, ":quit"), "prompt before :quit", repl.screen());
  check(repl.waitExit() == 0, ":quit leaves after the plan commands", repl.screen());
}

// A planning long enough to show the progress line: about 3 s of CPU time on
// this project's 2-core machine (Alpa's full DP on 64 devices, 13 microbatch
// counts).
constexpr const char* kSlowModel = "gpt(layers = 96, hidden = 2048, heads = 16, seq = 2048, vocab = 50304)";
constexpr const char* kSlowCluster = "dgx_a100(nodes = 8)";
constexpr const char* kSlowBatch = "4096";

// Ctrl-C during a plan at the prompt: the progress line shows after about a
// second, Ctrl-C cancels the plan, and the session keeps what it defined.
void ctrlCDuringAPlan(const std::string& meshflow, const std::filesystem::path& home) {
  PtySession repl(meshflow, home.string());
  check(enter(repl, "import std.models") && enter(repl, "import std.clusters") &&
            enter(repl, "let kept = 42"),
        "definitions before a long plan", repl.screen());
  check(enter(repl, std::string(":plan ") + kSlowModel + " on " + kSlowCluster + " batch=" + kSlowBatch),
        "prompt before a long :plan", repl.screen());
  check(repl.waitFor("planning: ") && repl.waitFor(" candidates searched, ") &&
            repl.waitFor(" s (Ctrl-C cancels)"),
        "a long plan shows its progress line (pass, candidates, elapsed)", repl.screen());
  repl.type("\x03");
  check(repl.waitFor("interrupted (Ctrl-C): planning cancelled") && repl.waitFor("[Interrupted]"),
        "Ctrl-C cancels the plan with an Interrupted diagnostic", repl.screen());
  check(enter(repl, "kept + 1") && repl.waitFor("43"), "what was defined before the plan is kept",
        repl.screen());
  check(enter(repl, "p") && repl.waitFor("unknown name 'p'"), "the cancelled plan bound nothing",
        repl.screen());
  check(enter(repl, ":quit"), "prompt before :quit", repl.screen());
  check(repl.waitExit() == 0, ":quit leaves after a cancelled plan", repl.screen());
}

// `meshflow run` on a terminal: the same progress line, and Ctrl-C ends the
// run with the Interrupted error and exit status 1.
void ctrlCDuringARunsPlan(const std::string& meshflow, const std::filesystem::path& home) {
  std::filesystem::path script = home / "long_plan.mesh";
  std::ofstream(script) << "import std.models\nimport std.clusters\nlet p = plan(" << kSlowModel << ", "
                        << kSlowCluster << ", batch = " << kSlowBatch << ")\nprint(\"planned\")\n";
  PtySession run(meshflow, home.string(), false, {"run", script.string()});
  check(run.waitFor("planning: ") && run.waitFor(" candidates searched, "),
        "meshflow run shows the progress line on a terminal", run.screen());
  run.type("\x03");
  check(run.waitFor("long_plan.mesh:3:9: error: interrupted (Ctrl-C): planning cancelled") &&
            run.waitFor("[Interrupted]"),
        "Ctrl-C cancels the run's plan with a clear message", run.screen());
  check(run.waitExit() == 1, "a cancelled run exits with status 1", run.screen());
  check(run.screen().find("planned") == std::string::npos, "nothing after the plan ran",
        run.screen());
}

void ctrlDWithoutWritableHome(const std::string& meshflow) {
  PtySession repl(meshflow, "/nonexistent/meshflow-home");
  check(enter(repl, "1 + 1") && repl.waitFor("2"), "a session without a writable HOME works",
        repl.screen());
  check(repl.waitFor("mesh> "), "prompt before Ctrl-D", repl.screen());
  repl.type("\x04");
  check(repl.waitExit() == 0, "Ctrl-D leaves with exit status 0", repl.screen());
}

// Runs `meshflow ARGS` with `input` on a pipe as standard input and both
// outputs on another pipe; what it wrote, and its wait status in `status`.
std::string runPiped(const std::string& meshflow, std::vector<std::string> args,
                     const std::string& input, int& status) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) {
    check(false, "pipes");
    return {};
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    close(in[1]);
    close(out[0]);
    std::vector<char*> argv{const_cast<char*>(meshflow.c_str())};
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(meshflow.c_str(), argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  if (write(in[1], input.data(), input.size()) != static_cast<ssize_t>(input.size()))
    check(false, "writing to the piped command");
  close(in[1]);
  std::string output;
  auto end = Clock::now() + kDeadline;
  char buffer[4096];
  while (Clock::now() < end) {
    pollfd fd{out[0], POLLIN, 0};
    if (poll(&fd, 1, 100) <= 0) continue;
    ssize_t n = read(out[0], buffer, sizeof buffer);
    if (n <= 0) break;
    output.append(buffer, static_cast<std::size_t>(n));
  }
  close(out[0]);
  kill(pid, SIGKILL);  // a no-op unless it overran the deadline
  waitpid(pid, &status, 0);
  return output;
}

// Standard input from a pipe: no libedit, no prompts.
void pipedInput(const std::string& meshflow) {
  int status = 0;
  std::string output = runPiped(meshflow, {"repl"},
                                "let x = 20\nx * 2 + 2\nfn f(a) {\n  return a * 3\n}\nf(5)\nprint(\"hi\")\n",
                                status);
  check(output == "42\n15\nhi\n", "piped input runs without prompts", output);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "piped input exits with status 0");
}

// A planning longer than a second with its output piped: no progress line,
// and its time budget ends it with a TimeBudget error instead of a long wait.
void pipedPlanHasNoProgress(const std::string& meshflow, const std::filesystem::path& home) {
  int status = 0;
  std::string output = runPiped(
      meshflow, {"run", (home / "long_plan.mesh").string(), "--time-budget", "1.5"}, "", status);
  check(output.find("planning ran out of its time budget of 1.5 s") != std::string::npos &&
            output.find("[TimeBudget]") != std::string::npos,
        "a plan past --time-budget stops with a TimeBudget error", output);
  check(output.find("planning: ") == std::string::npos && output.find('\r') == std::string::npos,
        "piped output has no progress line", output);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 1, "the run exits with status 1", output);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: ReplPtyTest PATH/TO/meshflow\n";
    return 2;
  }
  std::string meshflow = argv[1];
  auto home =
      std::filesystem::temp_directory_path() / ("meshflow-pty-home-" + std::to_string(getpid()));
  std::filesystem::create_directories(home);
  aSessionAtTheTerminal(meshflow, home);
  planExplorerAtTheTerminal(meshflow, home);
  ctrlDWithoutWritableHome(meshflow);
  pipedInput(meshflow);
  ctrlCDuringAPlan(meshflow, home);
  ctrlCDuringARunsPlan(meshflow, home);
  pipedPlanHasNoProgress(meshflow, home);
  std::filesystem::remove_all(home);
  std::cout << (failures == 0 ? "all passed\n" : std::to_string(failures) + " failed\n");
  return failures == 0 ? 0 : 1;
}
