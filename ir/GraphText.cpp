#include "ir/GraphText.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

namespace meshflow::ir {

GraphParseError::GraphParseError(std::size_t line, std::size_t column, const std::string& message)
    : std::runtime_error(fmt::format("{}:{}: {}", line + 1, column + 1, message)),
      line_(line),
      column_(column) {}

// ---------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

/// The shortest text that reads back as the same double, always with a `.`,
/// an exponent or a letter so that it never reads back as an int.
std::string doubleText(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

/// Inputs and parameters are named by their `name` attribute unless the text
/// says otherwise; other values are unnamed.
std::string defaultName(const Op& op, std::size_t output) {
  auto it = op.attrs.find("name");
  bool leaf = op.kind == OpKind::Input || op.kind == OpKind::Parameter;
  if (!leaf || output != 0 || it == op.attrs.end()) return "";
  const auto* name = std::get_if<std::string>(&it->second);
  return name ? *name : "";
}

/// Numbers values in order of definition; values no op defines (only in a
/// broken graph) are numbered after them, in order of first use.
class Numbering {
 public:
  explicit Numbering(const Graph& graph) {
    for (const Op& op : graph.ops())
      for (ValueId v : op.outputs) numbers_.try_emplace(v, next_++);
  }
  std::string operator()(ValueId v) {
    auto [it, added] = numbers_.try_emplace(v, next_);
    if (added) ++next_;
    return fmt::format("%{}", it->second);
  }

 private:
  std::map<ValueId, std::size_t> numbers_;
  std::size_t next_ = 0;
};

std::string valueList(const std::vector<ValueId>& values, Numbering& number) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + number(values[i]);
  return out;
}

std::string suffixText(const Graph& graph, const Op& op) {
  std::string out;
  if (!op.scope.empty()) out += " scope=" + quote(op.scope);
  const Location& loc = op.location;
  if (!loc.file.empty() || loc.line || loc.column)
    out += fmt::format(" loc={}:{}:{}", quote(loc.file), loc.line, loc.column);
  if (op.forwardOp) out += fmt::format(" forward=#{}", *op.forwardOp);
  bool named = false;
  for (std::size_t i = 0; i < op.outputs.size(); ++i)
    named = named || graph.value(op.outputs[i]).name != defaultName(op, i);
  if (named) {
    std::string names;
    for (std::size_t i = 0; i < op.outputs.size(); ++i)
      names += (i ? ", " : "") + quote(graph.value(op.outputs[i]).name);
    out += " names=[" + names + "]";
  }
  return out;
}

std::string opText(const Graph& graph, const Op& op, Numbering& number) {
  std::string results = op.outputs.empty() ? "()" : valueList(op.outputs, number);
  std::string out =
      fmt::format("  {} = {}({})", results, opName(op.kind), valueList(op.inputs, number));
  if (!op.attrs.empty()) {
    std::string attrs;
    for (const auto& [name, value] : op.attrs)
      attrs += (attrs.empty() ? "" : ", ") + name + " = " + attributeText(value);
    out += " {" + attrs + "}";
  }
  std::string types;
  for (ValueId v : op.outputs) types += (types.empty() ? "" : ", ") + graph.value(v).type.text();
  out += " : " + (op.outputs.empty() ? "()" : types);
  out += fmt::format(" @{}", phaseName(op.phase));
  return out + suffixText(graph, op) + "\n";
}

}  // namespace

std::string attributeText(const Attribute& attr) {
  struct Printer {
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return doubleText(v); }
    std::string operator()(const std::string& v) const { return quote(v); }
    std::string operator()(const std::vector<std::int64_t>& v) const {
      return fmt::format("[{}]", fmt::join(v, ", "));
    }
  };
  return std::visit(Printer{}, attr);
}

std::string printGraph(const Graph& graph) {
  Numbering number(graph);
  std::string body;
  for (const Op& op : graph.ops()) body += opText(graph, op, number);
  return fmt::format("graph outputs({})\n", valueList(graph.outputs, number)) + body;
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------
namespace {

enum class Tok { End, Value, OpRef, Ident, Int, Float, String, Punct };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier, punctuation, number or decoded string
  std::size_t line = 0;
  std::size_t column = 0;
};

bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(const std::string& text) : text_(text) {}

  Token next() {
    skipSpace();
    Token t;
    t.line = line_;
    t.column = column_;
    if (pos_ >= text_.size()) return t;
    char c = text_[pos_];
    if (c == '%' || c == '#') {
      advance();
      t.kind = c == '%' ? Tok::Value : Tok::OpRef;
      t.text = digits();
      if (t.text.empty()) fail(t, fmt::format("expected a number after '{}'", c));
    } else if (c == '"') {
      t.kind = Tok::String;
      t.text = stringBody(t);
    } else if (isDigit(c) || (c == '-' && pos_ + 1 < text_.size())) {
      number(t);
    } else if (isIdentStart(c)) {
      t.kind = Tok::Ident;
      while (pos_ < text_.size() && isIdentChar(text_[pos_])) t.text += advance();
    } else if (std::string("(){}[],=:@*").find(c) != std::string::npos) {
      t.kind = Tok::Punct;
      t.text = advance();
    } else {
      fail(t, fmt::format("unexpected character '{}'", c));
    }
    return t;
  }

  [[noreturn]] static void fail(const Token& at, const std::string& message) {
    throw GraphParseError(at.line, at.column, message);
  }

 private:
  char advance() {
    char c = text_[pos_++];
    if (c == '\n') {
      ++line_;
      column_ = 0;
    } else {
      ++column_;
    }
    return c;
  }

  void skipSpace() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (text_.compare(pos_, 2, "//") == 0) {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else {
        break;
      }
    }
  }

  std::string digits() {
    std::string s;
    while (pos_ < text_.size() && isDigit(text_[pos_])) s += advance();
    return s;
  }

  /// -?digits[.digits][e[+-]digits], or -?inf / -?nan.
  void number(Token& t) {
    if (text_[pos_] == '-') t.text += advance();
    if (pos_ < text_.size() && isIdentStart(text_[pos_])) {
      while (pos_ < text_.size() && isIdentChar(text_[pos_])) t.text += advance();
      if (t.text != "-inf" && t.text != "-nan") fail(t, "malformed number '" + t.text + "'");
      t.kind = Tok::Float;
      return;
    }
    t.text += digits();
    t.kind = Tok::Int;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      t.kind = Tok::Float;
      t.text += advance();
      t.text += digits();
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      t.kind = Tok::Float;
      t.text += advance();
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) t.text += advance();
      t.text += digits();
    }
    if (!isDigit(t.text.back()) || (pos_ < text_.size() && isIdentChar(text_[pos_])))
      fail(t, "malformed number '" + t.text + "'");
  }

  std::string stringBody(const Token& t) {
    advance();  // the opening quote
    std::string s;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail(t, "unterminated string");
      char c = advance();
      if (c == '"') return s;
      if (c != '\\') {
        s += c;
        continue;
      }
      if (pos_ >= text_.size()) fail(t, "unterminated string");
      s += escape(t, advance());
    }
  }

  char escape(const Token& t, char c) {
    switch (c) {
      case '"':
        return '"';
      case '\\':
        return '\\';
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case 'x': {
        std::string hex;
        for (int i = 0; i < 2 && pos_ < text_.size() && std::isxdigit(static_cast<unsigned char>(text_[pos_])); ++i)
          hex += advance();
        if (hex.size() != 2) fail(t, "malformed \\x escape in string");
        return static_cast<char>(std::stoi(hex, nullptr, 16));
      }
      default:
        fail(t, fmt::format("unknown escape '\\{}' in string", c));
    }
  }

  const std::string& text_;
  std::size_t pos_ = 0;
  std::size_t line_ = 0;
  std::size_t column_ = 0;
};

/// A use of a value, checked once every definition is known.
struct Use {
  std::uint32_t number;
  Token at;
};

class Parser {
 public:
  explicit Parser(const std::string& text) : lexer_(text) { tok_ = lexer_.next(); }

  Graph parse() {
    header();
    while (tok_.kind != Tok::End) op();
    for (const Use& use : uses_)
      if (use.number >= graph_.valueCount())
        Lexer::fail(use.at, fmt::format("use of undefined value %{}", use.number));
    return std::move(graph_);
  }

 private:
  // ---- tokens ----
  Token take() {
    Token t = tok_;
    tok_ = lexer_.next();
    return t;
  }
  bool isPunct(const char* p) const { return tok_.kind == Tok::Punct && tok_.text == p; }
  bool accept(const char* p) {
    if (!isPunct(p)) return false;
    take();
    return true;
  }
  [[noreturn]] void expected(const std::string& what) const {
    std::string found = tok_.kind == Tok::End      ? "end of input"
                        : tok_.kind == Tok::String ? "a string"
                                                   : "'" + tokenText(tok_) + "'";
    Lexer::fail(tok_, fmt::format("expected {}, found {}", what, found));
  }
  static std::string tokenText(const Token& t) {
    if (t.kind == Tok::Value) return "%" + t.text;
    if (t.kind == Tok::OpRef) return "#" + t.text;
    return t.text;
  }
  void expect(const char* p) {
    if (!accept(p)) expected(fmt::format("'{}'", p));
  }
  std::string ident(const char* what) {
    if (tok_.kind != Tok::Ident) expected(what);
    return take().text;
  }
  void keyword(const char* word) {
    if (tok_.kind != Tok::Ident || tok_.text != word) expected(fmt::format("'{}'", word));
    take();
  }
  std::string string(const char* what) {
    if (tok_.kind != Tok::String) expected(what);
    return take().text;
  }

  template <typename T>
  T integer(const Token& t) {
    T v{};
    auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || end != t.text.data() + t.text.size())
      Lexer::fail(t, fmt::format("number '{}' out of range", t.text));
    return v;
  }
  template <typename T>
  T integer(const char* what) {
    if (tok_.kind != Tok::Int) expected(what);
    return integer<T>(take());
  }
  std::uint32_t valueNumber(Tok kind, const char* what) {
    if (tok_.kind != kind) expected(what);
    return integer<std::uint32_t>(take());
  }

  // ---- grammar ----
  void header() {
    keyword("graph");
    keyword("outputs");
    expect("(");
    if (!isPunct(")")) graph_.outputs = uses();
    expect(")");
  }

  /// %a, %b, ... (at least one)
  std::vector<ValueId> uses() {
    std::vector<ValueId> values;
    do {
      Token at = tok_;
      values.push_back(valueNumber(Tok::Value, "a value"));
      uses_.push_back({values.back(), at});
    } while (accept(","));
    return values;
  }

  std::size_t results() {
    if (accept("(")) {
      expect(")");
      return 0;
    }
    std::size_t count = 0;
    do {
      std::size_t want = graph_.valueCount() + count;
      Token at = tok_;
      if (valueNumber(Tok::Value, "a result value") != want)
        Lexer::fail(at,
                    fmt::format("expected %{}: values are numbered in order of definition", want));
      ++count;
    } while (accept(","));
    return count;
  }

  void op() {
    Token start = tok_;
    std::size_t resultCount = results();
    expect("=");
    Token kindTok = tok_;
    auto kind = parseOpKind(ident("an op name"));
    if (!kind) Lexer::fail(kindTok, fmt::format("unknown op '{}'", kindTok.text));
    Op op;
    op.kind = *kind;
    expect("(");
    if (!isPunct(")")) op.inputs = uses();
    expect(")");
    if (isPunct("{")) op.attrs = attributes();
    expect(":");
    std::vector<TensorType> types = typeList();
    if (types.size() != resultCount)
      Lexer::fail(start, fmt::format("{} results but {} types", resultCount, types.size()));
    op.phase = phase();
    std::vector<std::string> names = suffixes(op);
    if (!names.empty() && names.size() != resultCount)
      Lexer::fail(start, fmt::format("{} results but {} names", resultCount, names.size()));
    OpId id = graph_.addOp(std::move(op), types);
    const Op& added = graph_.op(id);
    for (std::size_t i = 0; i < added.outputs.size(); ++i)
      graph_.value(added.outputs[i]).name = names.empty() ? defaultName(added, i) : names[i];
  }

  Attributes attributes() {
    expect("{");
    Attributes attrs;
    if (accept("}")) return attrs;
    do {
      Token at = tok_;
      std::string name = ident("an attribute name");
      expect("=");
      if (!attrs.emplace(name, attributeValue()).second)
        Lexer::fail(at, fmt::format("duplicate attribute '{}'", name));
    } while (accept(","));
    expect("}");
    return attrs;
  }

  Attribute attributeValue() {
    if (tok_.kind == Tok::Int) return integer<std::int64_t>(take());
    if (tok_.kind == Tok::Float || (tok_.kind == Tok::Ident && isSpecialDouble(tok_.text)))
      return parseDouble(take());
    if (tok_.kind == Tok::String) return take().text;
    if (!accept("[")) expected("an attribute value");
    std::vector<std::int64_t> list;
    if (!accept("]")) {
      do list.push_back(integer<std::int64_t>("an int"));
      while (accept(","));
      expect("]");
    }
    return list;
  }

  static bool isSpecialDouble(const std::string& s) { return s == "inf" || s == "nan"; }

  static double parseDouble(const Token& t) {
    bool negative = t.text[0] == '-';
    std::string body = negative ? t.text.substr(1) : t.text;
    double v;
    if (body == "inf") {
      v = std::numeric_limits<double>::infinity();
    } else if (body == "nan") {
      v = std::numeric_limits<double>::quiet_NaN();
    } else {
      auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
      if (ec != std::errc() || end != body.data() + body.size())
        Lexer::fail(t, fmt::format("number '{}' out of range", t.text));
    }
    return negative ? -v : v;
  }

  std::vector<TensorType> typeList() {
    std::vector<TensorType> types;
    if (accept("(")) {
      expect(")");
      return types;
    }
    do types.push_back(type());
    while (accept(","));
    return types;
  }

  TensorType type() {
    Token at = tok_;
    auto dtype = parseDType(ident("a type"));
    if (!dtype) Lexer::fail(at, fmt::format("unknown dtype '{}'", at.text));
    TensorType t{*dtype, {}};
    expect("[");
    if (!accept("]")) {
      do t.shape.push_back(dim());
      while (accept(","));
      expect("]");
    }
    return t;
  }

  Dim dim() {
    if (tok_.kind == Tok::Int) return Dim::constant(integer<std::int64_t>(take()));
    if (tok_.kind != Tok::Ident || tok_.text != "batch") expected("a dimension");
    take();
    if (!accept("*")) return Dim::batch();
    return Dim::batch(integer<std::int64_t>("a batch multiple"));
  }

  Phase phase() {
    expect("@");
    Token at = tok_;
    std::string name = ident("a phase");
    for (Phase p : {Phase::Forward, Phase::Backward, Phase::Update})
      if (name == phaseName(p)) return p;
    Lexer::fail(at, fmt::format("unknown phase '{}'", name));
  }

  /// scope=, loc=, forward=, names= in any order, each at most once, up to the
  /// next op (which starts with a value or `(`) or the end.
  std::vector<std::string> suffixes(Op& op) {
    std::vector<std::string> names;
    std::map<std::string, bool> seen;
    while (tok_.kind == Tok::Ident) {
      Token at = tok_;
      std::string key = take().text;
      if (seen[key]) Lexer::fail(at, fmt::format("duplicate '{}'", key));
      seen[key] = true;
      expect("=");
      if (key == "scope") {
        op.scope = string("a scope string");
      } else if (key == "loc") {
        op.location.file = string("a file name string");
        expect(":");
        op.location.line = integer<std::uint32_t>("a line number");
        expect(":");
        op.location.column = integer<std::uint32_t>("a column number");
      } else if (key == "forward") {
        op.forwardOp = valueNumber(Tok::OpRef, "an op reference #N");
      } else if (key == "names") {
        names = nameList();
      } else {
        Lexer::fail(at, fmt::format("unknown op field '{}'", key));
      }
    }
    return names;
  }

  std::vector<std::string> nameList() {
    std::vector<std::string> names;
    expect("[");
    do names.push_back(string("a name string"));
    while (accept(","));
    expect("]");
    return names;
  }

  Lexer lexer_;
  Token tok_;
  Graph graph_;
  std::vector<Use> uses_;
};

}  // namespace

Graph parseGraph(const std::string& text) { return Parser(text).parse(); }

}  // namespace meshflow::ir
