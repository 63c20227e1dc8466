#include "tests/golden/GoldenFile.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace meshflow::golden {
namespace {

using Directive = GoldenFile::Directive;

struct Keyword {
  const char* word;
  Directive directive;
};

constexpr Keyword kKeywords[] = {{"expect-error", Directive::Error},
                                 {"expect", Directive::Output},
                                 {"exit", Directive::Exit},
                                 {"mode", Directive::Mode},
                                 {"limits", Directive::Limits}};

const char* keywordOf(Directive directive) {
  for (const auto& k : kKeywords)
    if (k.directive == directive) return k.word;
  return "";
}

std::string trimmed(const std::string& text) {
  auto begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

// A comment that looks like a directive but is none (`# expect-eror: ...`)
// would silently test nothing, so it is reported.
bool looksLikeDirective(const std::string& comment) {
  if (comment.rfind("expect", 0) != 0) return false;
  std::size_t i = 0;
  while (i < comment.size() && (std::isalpha(static_cast<unsigned char>(comment[i])) ||
                                comment[i] == '-'))
    ++i;
  return i < comment.size() && comment[i] == ':';
}

GoldenFile::Line parseLine(const std::string& raw) {
  GoldenFile::Line line;
  line.raw = raw;
  std::size_t hash = raw.find_first_not_of(" \t");
  if (hash == std::string::npos || raw[hash] != '#') return line;
  std::size_t word = raw.find_first_not_of(' ', hash + 1);
  if (word == std::string::npos) return line;
  std::string comment = raw.substr(word);
  for (const auto& k : kKeywords) {
    std::string prefix = std::string(k.word) + ":";
    if (comment.rfind(prefix, 0) != 0) continue;
    line.directive = k.directive;
    line.indent = raw.substr(0, hash);
    // Exactly one space separates the keyword from the text, so the text can
    // itself start with spaces (a caret line does).
    line.payload = comment.substr(prefix.size());
    if (!line.payload.empty() && line.payload[0] == ' ') line.payload.erase(0, 1);
    return line;
  }
  if (looksLikeDirective(comment)) line.directive = Directive::Malformed;
  return line;
}

template <typename Number>
bool parseNumber(const std::string& text, Number& out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

// `4096`, `64KB`, `2MiB`: the memory budget of a `# limits:` line.
bool parseBytes(const std::string& text, std::size_t& out) {
  static const std::pair<const char*, std::size_t> kSuffixes[] = {
      {"KiB", 1024}, {"MiB", 1024 * 1024}, {"GiB", std::size_t{1} << 30},
      {"KB", 1000},  {"MB", 1000 * 1000},  {"GB", 1000 * 1000 * 1000},
      {"B", 1}};
  for (const auto& [suffix, scale] : kSuffixes) {
    std::string s(suffix);
    if (text.size() <= s.size() || text.compare(text.size() - s.size(), s.size(), s) != 0) continue;
    if (!parseNumber(text.substr(0, text.size() - s.size()), out)) return false;
    out *= scale;
    return true;
  }
  return parseNumber(text, out);
}

void parseLimits(const std::string& text, Expectations& e) {
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    auto equals = word.find('=');
    std::string name = word.substr(0, equals);
    std::string value = equals == std::string::npos ? "" : word.substr(equals + 1);
    bool ok = (name == "steps" && parseNumber(value, e.limits.maxSteps)) ||
              (name == "calls" && parseNumber(value, e.limits.maxCallDepth)) ||
              (name == "memory" && parseBytes(value, e.limits.maxMemoryBytes)) ||
              (name == "time" && parseNumber(value, e.limits.timeBudgetSeconds));
    if (!ok) e.problems.push_back("bad limit '" + word + "' (steps=N calls=N memory=BYTES time=SECONDS)");
  }
}

}  // namespace

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::optional<GoldenFile> GoldenFile::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  GoldenFile file;
  std::string content = text.str();
  file.finalNewline_ = content.empty() || content.back() == '\n';
  for (const auto& raw : splitLines(content)) file.lines_.push_back(parseLine(raw));
  return file;
}

Expectations GoldenFile::expectations() const {
  Expectations e;
  for (std::size_t i = 0; i < lines_.size(); ++i) {
    const Line& line = lines_[i];
    std::string where = "line " + std::to_string(i + 1) + ": ";
    switch (line.directive) {
      case Directive::None: break;
      case Directive::Output: e.output.push_back(line.payload); break;
      case Directive::Error: e.errors.push_back(line.payload); break;
      case Directive::Exit: {
        int status = 0;
        if (parseNumber(trimmed(line.payload), status)) e.exitStatus = status;
        else e.problems.push_back(where + "`# exit:` needs a number");
        break;
      }
      case Directive::Mode: {
        std::string mode = trimmed(line.payload);
        if (mode == "check" || mode == "run") e.checkOnly = mode == "check";
        else e.problems.push_back(where + "`# mode:` is `run` or `check`");
        break;
      }
      case Directive::Limits: parseLimits(line.payload, e); break;
      case Directive::Malformed:
        e.problems.push_back(where + "unknown directive: " + trimmed(line.raw));
        break;
    }
  }
  return e;
}

// Expectations that keep their number are rewritten where they stand (so
// Wren-style `# expect:` lines stay beside their print); otherwise the old ones
// go and the new ones are appended at the end of the file.
void GoldenFile::replaceOrAppend(Directive directive, const std::vector<std::string>& payloads) {
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < lines_.size(); ++i)
    if (lines_[i].directive == directive) at.push_back(i);
  if (at.size() == payloads.size()) {
    for (std::size_t i = 0; i < at.size(); ++i) lines_[at[i]].payload = payloads[i];
    return;
  }
  std::erase_if(lines_, [&](const Line& line) { return line.directive == directive; });
  for (const auto& payload : payloads) lines_.push_back(Line{directive, "", payload, ""});
  finalNewline_ = true;
}

void GoldenFile::update(const Outcome& actual) {
  replaceOrAppend(Directive::Output, actual.output);
  replaceOrAppend(Directive::Error, actual.errors);
  int implied = actual.errors.empty() ? 0 : 1;
  bool hasExit = false;
  for (auto& line : lines_)
    if (line.directive == Directive::Exit) {
      line.payload = std::to_string(actual.exitStatus);
      hasExit = true;
    }
  if (!hasExit && actual.exitStatus != implied) {
    lines_.push_back(Line{Directive::Exit, "", std::to_string(actual.exitStatus), ""});
    finalNewline_ = true;
  }
}

std::string GoldenFile::text() const {
  std::string out;
  for (std::size_t i = 0; i < lines_.size(); ++i) {
    const Line& line = lines_[i];
    if (line.directive == Directive::None || line.directive == Directive::Malformed) {
      out += line.raw;
    } else {
      out += line.indent + "# " + keywordOf(line.directive) + ":";
      if (!line.payload.empty()) out += " " + line.payload;
    }
    if (i + 1 < lines_.size() || finalNewline_) out += '\n';
  }
  return out;
}

}  // namespace meshflow::golden
