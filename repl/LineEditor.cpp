#include "repl/LineEditor.h"

#include <histedit.h>

#include <algorithm>
#include <clocale>
#include <cstdio>
#include <cstdlib>

namespace meshflow::cli {

struct LineEditor::Impl {
  ReplSession& session;
  std::string historyPath;
  EditLine* editLine = nullptr;
  History* history = nullptr;
  HistEvent event{};
  bool interrupted = false;

  Impl(ReplSession& s, std::string path) : session(s), historyPath(std::move(path)) {}
};

namespace {

LineEditor::Impl& implOf(EditLine* editLine) {
  void* data = nullptr;
  el_get(editLine, EL_CLIENTDATA, &data);
  return *static_cast<LineEditor::Impl*>(data);
}

char* promptOf(EditLine* editLine) {
  // libedit wants a char*, but only reads it.
  return const_cast<char*>(implOf(editLine).session.prompt());
}

std::size_t terminalWidth(EditLine* editLine) {
  int columns = 0;
  if (el_get(editLine, EL_GETTC, "co", &columns, nullptr) != 0 || columns <= 0) return 80;
  return static_cast<std::size_t>(columns);
}

// TAB: insert what all completions share; when that adds nothing and there is
// a choice, list the choices under the line.
unsigned char completeWord(EditLine* editLine, int) {
  auto& impl = implOf(editLine);
  const LineInfo* info = el_line(editLine);
  std::string_view line(info->buffer, static_cast<std::size_t>(info->lastchar - info->buffer));
  auto cursor = static_cast<std::size_t>(info->cursor - info->buffer);
  ReplCompletion completion = impl.session.complete(line, cursor);
  if (completion.candidates.empty()) return CC_ERROR;
  std::string insert = completion.commonPrefix.substr(completion.wordLength);
  if (!insert.empty()) return el_insertstr(editLine, insert.c_str()) == 0 ? CC_REFRESH : CC_ERROR;
  if (completion.candidates.size() == 1) return CC_REFRESH;
  FILE* out = nullptr;
  el_get(editLine, EL_GETFP, 1, &out);
  if (!out) out = stdout;
  std::string list = "\n" + formatColumns(completion.candidates, terminalWidth(editLine));
  std::fputs(list.c_str(), out);
  std::fflush(out);
  return CC_REDISPLAY;
}

// Ctrl-C while editing: the terminal delivers it as a character (isig is off
// in edit mode), so it ends the line here instead of killing the process.
unsigned char interrupt(EditLine* editLine, int) {
  implOf(editLine).interrupted = true;
  return CC_NEWLINE;
}

}  // namespace

LineEditor::LineEditor(ReplSession& session, std::string historyPath)
    : impl_(std::make_unique<Impl>(session, std::move(historyPath))) {
  // libedit decodes multibyte input with the locale's character type.
  std::setlocale(LC_CTYPE, "");
  impl_->history = history_init();
  history(impl_->history, &impl_->event, H_SETSIZE, 1000);
  history(impl_->history, &impl_->event, H_SETUNIQUE, 1);
  if (!impl_->historyPath.empty())
    history(impl_->history, &impl_->event, H_LOAD, impl_->historyPath.c_str());

  EditLine* el = impl_->editLine = el_init("meshflow", stdin, stdout, stderr);
  el_set(el, EL_CLIENTDATA, impl_.get());
  el_set(el, EL_EDITOR, "emacs");
  el_set(el, EL_PROMPT, promptOf);
  el_set(el, EL_HIST, history, impl_->history);
  el_set(el, EL_SETTY, "-d", "-isig", nullptr);
  el_set(el, EL_ADDFN, "meshflow-complete", "complete a name", completeWord);
  el_set(el, EL_BIND, "^I", "meshflow-complete", nullptr);
  el_set(el, EL_ADDFN, "meshflow-interrupt", "drop the input", interrupt);
  el_set(el, EL_BIND, "^C", "meshflow-interrupt", nullptr);
  el_source(el, nullptr);  // the user's ~/.editrc, if any
}

LineEditor::~LineEditor() {
  el_end(impl_->editLine);
  history_end(impl_->history);
}

std::optional<LineEditor::Line> LineEditor::read() {
  impl_->interrupted = false;
  // el_gets prints the prompt first and switches to raw mode only when it reads;
  // a key pressed in between would meet the cooked terminal (Ctrl-C a signal).
  el_set(impl_->editLine, EL_PREP_TERM, 1);
  int count = 0;
  const char* text = el_gets(impl_->editLine, &count);
  if (impl_->interrupted) {
    // Unlike Enter, a bound function ending the line does not move to the next.
    std::fputs("\n", stdout);
    std::fflush(stdout);
    return Line{"", true};
  }
  if (!text || count <= 0) return std::nullopt;
  Line line{std::string(text, static_cast<std::size_t>(count)), false};
  while (!line.text.empty() && (line.text.back() == '\n' || line.text.back() == '\r'))
    line.text.pop_back();
  if (line.text.find_first_not_of(" \t") != std::string::npos) {
    history(impl_->history, &impl_->event, H_ENTER, line.text.c_str());
    // Saved at once, so the history survives a session that is killed.
    if (!impl_->historyPath.empty())
      history(impl_->history, &impl_->event, H_SAVE, impl_->historyPath.c_str());
  }
  return line;
}

std::string LineEditor::defaultHistoryPath() {
  const char* home = std::getenv("HOME");
  if (!home || !*home) return "";
  std::string path = home;
  if (path.back() != '/') path += '/';
  return path + ".meshflow_history";
}

std::string formatColumns(const std::vector<std::string>& words, std::size_t width) {
  if (words.empty()) return "";
  std::size_t longest = 0;
  for (const auto& word : words) longest = std::max(longest, word.size());
  std::size_t columnWidth = longest + 2;
  std::size_t columns = std::max<std::size_t>(1, width / columnWidth);
  std::size_t rows = (words.size() + columns - 1) / columns;
  std::string text;
  // Down the columns first, as ls and shells list completions.
  for (std::size_t row = 0; row < rows; ++row) {
    std::string line;
    for (std::size_t column = 0; column < columns; ++column) {
      std::size_t i = column * rows + row;
      if (i >= words.size()) break;
      line += words[i];
      line.append(columnWidth - words[i].size(), ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    text += line + "\n";
  }
  return text;
}

}  // namespace meshflow::cli
