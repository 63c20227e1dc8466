#include "grammar/DirectParser.h"

#include <algorithm>
#include <optional>

#include "grammar/AstBuilder.h"
#include "grammar/Scanner.h"
#include "grammar/TokenFilter.h"

namespace meshflow::grammar {
namespace {

using namespace ast;

// Thrown where the tokens leave Mesh.g4's language: the ANTLR front end takes over.
struct GiveUp {};

// The tokens the parser sees: the lexer's, filtered as for ANTLR, and an End.
std::optional<std::vector<Token>> parserTokens(const std::vector<Token>& tokens) {
  if (std::any_of(tokens.begin(), tokens.end(), isError)) return std::nullopt;
  FilteredTokens filtered = filterNewlines(filterView(tokens));
  if (filtered.problem) return std::nullopt;
  std::vector<Token> kept;
  kept.reserve(filtered.kept.size() + 1);
  for (std::size_t i : filtered.kept) kept.push_back(tokens[i]);
  kept.push_back(Token{TokenKind::End, Sym::None, {}, 0, 0, 0, 0});
  return kept;
}

// Each function is the Mesh.g4 rule of its name; the AST it builds is the one
// that Transformer builds from that rule's parse tree (same spans, heights and
// checks, through AstBuilder).
class DirectParser {
 public:
  DirectParser(const std::vector<Token>& tokens, const interp::SourceFile& file,
               std::vector<Diagnostic>& problems)
      : t_(tokens), file_(file), build_(problems) {}

  void program(Program& out) {
    statements(out.statements, TokenKind::End, Sym::None);
    // End is not consumed: it is never a span's last token.
  }

 private:
  // ---- tokens ----

  const Token& peek(std::size_t ahead = 0) const {
    return t_[std::min(pos_ + ahead, t_.size() - 1)];
  }
  static bool is(const Token& t, Sym symbol) { return t.symbol == symbol; }
  bool at(Sym symbol) const { return is(peek(), symbol); }
  static bool isName(const Token& t) {
    return t.kind == TokenKind::Ident || t.symbol == Sym::Model || t.symbol == Sym::Layer ||
           t.symbol == Sym::Cluster || t.symbol == Sym::Schedule;
  }
  void expect(Sym symbol) {
    if (!at(symbol)) throw GiveUp{};
    ++pos_;
  }
  // `name`: its token's index.
  std::size_t name() {
    if (!isName(peek())) throw GiveUp{};
    return pos_++;
  }
  bool atSep() const { return peek().kind == TokenKind::Newline || at(Sym::Semicolon); }

  SourceSpan span(std::size_t first, std::size_t last) const {
    if (last < first) last = first;
    const Token& a = t_[first];
    const Token& b = t_[last];
    return SourceSpan{&file_, a.line, a.column, b.line, b.column + std::max(1u, b.width)};
  }
  SourceSpan spanFrom(std::size_t first) const { return span(first, pos_ - 1); }
  SourceSpan spanOf(std::size_t token) const { return span(token, token); }
  std::string text(std::size_t token) const { return std::string(t_[token].text); }

  // ---- statements ----

  // sep* (statement (sep+ statement)*)? sep*, up to `end` (not consumed).
  void statements(std::vector<StmtPtr>& out, TokenKind endKind, Sym endSymbol) {
    auto atEnd = [&] {
      return endKind == TokenKind::End ? peek().kind == TokenKind::End : at(endSymbol);
    };
    while (atSep()) ++pos_;
    while (!atEnd()) {
      out.push_back(statement());
      if (atEnd()) break;
      if (!atSep()) throw GiveUp{};
      while (atSep()) ++pos_;
    }
  }

  Block block() {
    std::size_t start = pos_;
    expect(Sym::LeftBrace);
    Block b;
    statements(b.statements, TokenKind::Symbol, Sym::RightBrace);
    expect(Sym::RightBrace);
    b.span = spanFrom(start);
    return b;
  }

  StmtPtr statement() {
    const bool declares = isName(peek(1));
    switch (peek().symbol) {
      case Sym::Import:
        return importStmt();
      case Sym::Let:
      case Sym::Var:
        return letStmt();
      case Sym::Fn:
        return fnDecl();
      case Sym::Layer:
        return declares ? callableDecl(CallableKind::Layer) : assignOrExprStmt();
      case Sym::Model:
        return declares ? callableDecl(CallableKind::Model) : assignOrExprStmt();
      case Sym::Cluster:
        return declares ? callableDecl(CallableKind::Cluster) : assignOrExprStmt();
      case Sym::Schedule:
        return declares ? scheduleDecl() : assignOrExprStmt();
      case Sym::If:
        return ifStmt();
      case Sym::For:
        return forStmt();
      case Sym::While:
        return whileStmt();
      case Sym::Return:
        return returnStmt();
      case Sym::Break:
        return loopJump(true);
      case Sym::Continue:
        return loopJump(false);
      default:
        return assignOrExprStmt();
    }
  }

  StmtPtr importStmt() {
    std::size_t start = pos_++;
    auto s = std::make_unique<ImportStmt>(SourceSpan{});
    if (peek().kind == TokenKind::String) {
      s->isPath = true;
      s->target = build_.stringValue(peek().text, spanOf(pos_));
      ++pos_;
    } else {
      s->target = text(name());
      while (at(Sym::Dot)) {
        ++pos_;
        s->target += "." + text(name());
      }
    }
    if (at(Sym::As)) {
      ++pos_;
      s->alias = text(name());
    }
    s->span = spanFrom(start);
    return s;
  }

  StmtPtr letStmt() {
    std::size_t start = pos_++;
    bool isMutable = t_[start].symbol == Sym::Var;
    std::size_t nameToken = name();
    expect(Sym::Assign);
    ExprPtr value = expr();
    auto s =
        std::make_unique<LetStmt>(spanFrom(start), isMutable, text(nameToken), std::move(value));
    s->nameSpan = spanOf(nameToken);
    return s;
  }

  std::vector<Param> paramList() {
    std::vector<Param> params;
    while (!at(Sym::RightParen)) {
      std::size_t start = name();
      Param param{text(start), {}, nullptr};
      if (at(Sym::Assign)) {
        ++pos_;
        param.defaultValue = expr();
      }
      param.span = spanFrom(start);
      params.push_back(std::move(param));
      if (!at(Sym::Comma)) break;
      ++pos_;
    }
    return params;
  }

  // The keyword, the name and the parameters of a declaration.
  std::unique_ptr<FunctionDecl> declHeader(CallableKind kind, bool parensOptional) {
    std::size_t start = pos_++;
    std::size_t nameToken = name();
    auto decl = std::make_unique<FunctionDecl>(span(start, nameToken), kind);
    decl->name = text(nameToken);
    decl->nameSpan = spanOf(nameToken);
    if (parensOptional && !at(Sym::LeftParen)) return decl;
    expect(Sym::LeftParen);
    decl->params = paramList();
    expect(Sym::RightParen);
    return decl;
  }

  StmtPtr withBody(std::unique_ptr<FunctionDecl> decl) {
    int savedLoops = build_.enterFunction();
    decl->body = block();
    build_.leaveFunction(savedLoops);
    return decl;
  }

  StmtPtr fnDecl() {
    auto decl = declHeader(CallableKind::Function, false);
    if (!at(Sym::Assign)) return withBody(std::move(decl));
    ++pos_;
    build_.enterExpressionBody();
    decl->exprBody = expr();
    build_.leaveExpressionBody();
    decl->body.span = decl->exprBody->span;
    return decl;
  }

  StmtPtr callableDecl(CallableKind kind) {
    return withBody(declHeader(kind, kind == CallableKind::Cluster));
  }

  StmtPtr scheduleDecl() {
    std::size_t start = pos_++;
    std::size_t nameToken = name();
    auto s = std::make_unique<ScheduleDecl>(span(start, nameToken));
    s->name = text(nameToken);
    s->nameSpan = spanOf(nameToken);
    s->body = block();
    return s;
  }

  StmtPtr ifStmt() {
    std::size_t start = pos_++;
    auto s = std::make_unique<IfStmt>(SourceSpan{});
    s->condition = expr();
    s->span = spanFrom(start);
    s->thenBlock = block();
    if (at(Sym::Else)) {
      ++pos_;
      if (at(Sym::If)) {
        std::size_t elseStart = pos_;
        Block b;
        b.statements.push_back(ifStmt());
        b.span = spanFrom(elseStart);
        s->elseBlock = std::move(b);
      } else {
        s->elseBlock = block();
      }
    }
    return s;
  }

  StmtPtr forStmt() {
    std::size_t start = pos_++;
    auto s = std::make_unique<ForStmt>(SourceSpan{});
    std::size_t variable = name();
    s->variable = text(variable);
    s->variableSpan = spanOf(variable);
    expect(Sym::In);
    s->iterable = expr();
    s->span = spanFrom(start);
    build_.enterLoop();
    s->body = block();
    build_.leaveLoop();
    return s;
  }

  StmtPtr whileStmt() {
    std::size_t start = pos_++;
    auto s = std::make_unique<WhileStmt>(SourceSpan{});
    s->condition = expr();
    s->span = spanFrom(start);
    build_.enterLoop();
    s->body = block();
    build_.leaveLoop();
    return s;
  }

  StmtPtr returnStmt() {
    std::size_t start = pos_++;
    ExprPtr value = startsExpr(peek()) ? expr() : nullptr;
    SourceSpan s = spanFrom(start);
    build_.checkReturn(s);
    return std::make_unique<ReturnStmt>(s, std::move(value));
  }

  StmtPtr loopJump(bool isBreak) {
    SourceSpan s = spanOf(pos_++);
    build_.checkLoopJump(isBreak ? "break" : "continue", s);
    if (isBreak) return std::make_unique<BreakStmt>(s);
    return std::make_unique<ContinueStmt>(s);
  }

  // assignStmt or exprStmt: a postfixExpr followed by `=` (or `+=` …) is an
  // assignment; otherwise it is the first operand of an expression.
  StmtPtr assignOrExprStmt() {
    std::size_t start = pos_;
    ExprPtr first = startsPostfix(peek()) ? postfixExpr() : nullptr;
    static constexpr std::pair<Sym, std::optional<BinaryOp>> kAssignments[] = {
        {Sym::Assign, std::nullopt},
        {Sym::PlusAssign, BinaryOp::Add},
        {Sym::MinusAssign, BinaryOp::Sub},
        {Sym::StarAssign, BinaryOp::Mul},
        {Sym::SlashAssign, BinaryOp::Div}};
    for (const auto& [symbol, op] : kAssignments) {
      if (!first || !at(symbol)) continue;
      ++pos_;
      build_.checkAssignTarget(*first);
      ExprPtr value = expr();
      return std::make_unique<AssignStmt>(spanFrom(start), std::move(first), op, std::move(value));
    }
    ExprPtr e = expr(std::move(first));
    return std::make_unique<ExprStmt>(spanFrom(start), std::move(e));
  }

  // ---- expressions ----
  // `seed`, where given, is the expression's first postfixExpr, already parsed.

  static bool startsPostfix(const Token& t) {
    switch (t.kind) {
      case TokenKind::Int:
      case TokenKind::Float:
      case TokenKind::Quantity:
      case TokenKind::String:
      case TokenKind::Ident:
        return true;
      case TokenKind::Symbol:
        return isName(t) || is(t, Sym::True) || is(t, Sym::False) || is(t, Sym::NoneWord) ||
               is(t, Sym::Auto) || is(t, Sym::LeftParen) || is(t, Sym::LeftBracket) ||
               is(t, Sym::LeftBrace);
      default:
        return false;
    }
  }
  static bool startsExpr(const Token& t) {
    return startsPostfix(t) || is(t, Sym::Not) || is(t, Sym::Minus) || is(t, Sym::Plus);
  }

  ExprPtr expr(ExprPtr seed = nullptr) { return orExpr(std::move(seed)); }

  // Operands joined by `word`, whose operator span is the right operand's first token.
  template <ExprPtr (DirectParser::*Operand)(ExprPtr)>
  ExprPtr chain(Sym word, BinaryOp op, ExprPtr seed) {
    ExprPtr result = (this->*Operand)(std::move(seed));
    while (at(word)) {
      ++pos_;
      std::size_t rightStart = pos_;
      ExprPtr rhs = (this->*Operand)(nullptr);
      result = build_.binary(op, std::move(result), std::move(rhs), spanOf(rightStart));
    }
    return result;
  }

  ExprPtr orExpr(ExprPtr seed) {
    return chain<&DirectParser::andExpr>(Sym::Or, BinaryOp::Or, std::move(seed));
  }
  ExprPtr andExpr(ExprPtr seed) {
    return chain<&DirectParser::notExpr>(Sym::And, BinaryOp::And, std::move(seed));
  }

  // Prefix operators (`not`, or signs) in front of an operand.
  template <ExprPtr (DirectParser::*Operand)(ExprPtr)>
  ExprPtr prefixed(Sym a, Sym b, ExprPtr seed) {
    if (seed) return (this->*Operand)(std::move(seed));
    std::size_t first = pos_;
    while (at(a) || at(b)) ++pos_;
    std::size_t end = pos_;
    ExprPtr operand = (this->*Operand)(nullptr);
    for (std::size_t i = end; i-- > first;)
      operand = build_.unary(t_[i].symbol == Sym::Not     ? UnaryOp::Not
                             : t_[i].symbol == Sym::Minus ? UnaryOp::Negate
                                                          : UnaryOp::Plus,
                             spanOf(i), std::move(operand));
    return operand;
  }

  ExprPtr notExpr(ExprPtr seed) {
    return prefixed<&DirectParser::compareExpr>(Sym::Not, Sym::Not, std::move(seed));
  }

  ExprPtr compareExpr(ExprPtr seed) {
    ExprPtr lhs = rangeExpr(std::move(seed));
    static constexpr std::pair<Sym, BinaryOp> kOps[] = {
        {Sym::Equal, BinaryOp::Eq},   {Sym::NotEqual, BinaryOp::Ne},
        {Sym::Less, BinaryOp::Lt},    {Sym::LessEqual, BinaryOp::Le},
        {Sym::Greater, BinaryOp::Gt}, {Sym::GreaterEqual, BinaryOp::Ge}};
    auto op = operatorAt(kOps);
    if (!op) return lhs;
    std::size_t opToken = pos_++;
    ExprPtr rhs = rangeExpr(nullptr);
    return build_.binary(*op, std::move(lhs), std::move(rhs), spanOf(opToken));
  }

  ExprPtr rangeExpr(ExprPtr seed) {
    ExprPtr lhs = addExpr(std::move(seed));
    if (!at(Sym::DotDot)) return lhs;
    std::size_t rightStart = ++pos_;
    ExprPtr rhs = addExpr(nullptr);
    return build_.binary(BinaryOp::Range, std::move(lhs), std::move(rhs), spanOf(rightStart));
  }

  // The operator of `ops` at the current token, if it is one.
  template <std::size_t N>
  std::optional<BinaryOp> operatorAt(const std::pair<Sym, BinaryOp> (&ops)[N]) const {
    for (const auto& [symbol, op] : ops)
      if (at(symbol)) return op;
    return std::nullopt;
  }

  // Operands joined left to right by the operators in `ops`, whose span is their own.
  template <ExprPtr (DirectParser::*Operand)(ExprPtr), std::size_t N>
  ExprPtr leftChain(const std::pair<Sym, BinaryOp> (&ops)[N], ExprPtr seed) {
    ExprPtr result = (this->*Operand)(std::move(seed));
    while (auto op = operatorAt(ops)) {
      std::size_t opToken = pos_++;
      ExprPtr rhs = (this->*Operand)(nullptr);
      result = build_.binary(*op, std::move(result), std::move(rhs), spanOf(opToken));
    }
    return result;
  }

  ExprPtr addExpr(ExprPtr seed) {
    static constexpr std::pair<Sym, BinaryOp> kOps[] = {{Sym::Plus, BinaryOp::Add},
                                                        {Sym::Minus, BinaryOp::Sub}};
    return leftChain<&DirectParser::mulExpr>(kOps, std::move(seed));
  }
  ExprPtr mulExpr(ExprPtr seed) {
    static constexpr std::pair<Sym, BinaryOp> kOps[] = {{Sym::Star, BinaryOp::Mul},
                                                        {Sym::Slash, BinaryOp::Div},
                                                        {Sym::SlashSlash, BinaryOp::FloorDiv},
                                                        {Sym::Percent, BinaryOp::Mod}};
    return leftChain<&DirectParser::unaryExpr>(kOps, std::move(seed));
  }
  ExprPtr unaryExpr(ExprPtr seed) {
    return prefixed<&DirectParser::powerExpr>(Sym::Minus, Sym::Plus, std::move(seed));
  }
  ExprPtr powerOperand() {
    return prefixed<&DirectParser::postfixOrSeed>(Sym::Minus, Sym::Plus, nullptr);
  }
  ExprPtr postfixOrSeed(ExprPtr seed) { return seed ? std::move(seed) : postfixExpr(); }

  // `a ** b ** c` is `a ** (b ** c)`: fold from the right.
  ExprPtr powerExpr(ExprPtr seed) {
    ExprPtr base = postfixOrSeed(std::move(seed));
    std::vector<std::pair<std::size_t, ExprPtr>> operands;  // first token, operand
    while (at(Sym::StarStar)) {
      std::size_t start = ++pos_;
      operands.emplace_back(start, powerOperand());
    }
    if (operands.empty()) return base;
    ExprPtr result = std::move(operands.back().second);
    for (std::size_t i = operands.size() - 1; i-- > 0;)
      result = build_.binary(BinaryOp::Pow, std::move(operands[i].second), std::move(result),
                             spanOf(operands[i + 1].first));
    return build_.binary(BinaryOp::Pow, std::move(base), std::move(result),
                         spanOf(operands[0].first));
  }

  ExprPtr postfixExpr() {
    ExprPtr result = primary();
    for (;;) {
      std::size_t start = pos_;
      std::uint32_t height = result->height;
      if (at(Sym::LeftParen)) {
        ++pos_;
        std::vector<Argument> args = argList();
        expect(Sym::RightParen);
        auto node = std::make_unique<CallExpr>(SourceSpan::cover(result->span, spanFrom(start)),
                                               std::move(result));
        for (const Argument& a : args) height = std::max(height, a.value->height);
        node->args = std::move(args);
        result = build_.bounded(std::move(node), height);
      } else if (at(Sym::LeftBracket)) {
        ++pos_;
        std::vector<ExprPtr> indices = exprList(Sym::RightBracket);
        if (indices.empty()) throw GiveUp{};
        expect(Sym::RightBracket);
        auto node = std::make_unique<IndexExpr>(SourceSpan::cover(result->span, spanFrom(start)),
                                                std::move(result));
        for (const ExprPtr& e : indices) height = std::max(height, e->height);
        node->indices = std::move(indices);
        result = build_.bounded(std::move(node), height);
      } else if (at(Sym::Dot)) {
        ++pos_;
        std::size_t field = name();
        SourceSpan s = SourceSpan::cover(result->span, spanFrom(start));
        result =
            build_.bounded(std::make_unique<FieldExpr>(s, std::move(result), text(field)), height);
      } else {
        return result;
      }
    }
  }

  // (arg (',' arg)* ','?)? before `)`.
  std::vector<Argument> argList() {
    std::vector<Argument> args;
    while (!at(Sym::RightParen)) {
      std::size_t start = pos_;
      Argument arg;
      if (isName(peek()) && is(peek(1), Sym::Assign)) {
        arg.name = text(pos_);
        pos_ += 2;
      }
      arg.value = expr();
      arg.span = spanFrom(start);
      args.push_back(std::move(arg));
      if (!at(Sym::Comma)) break;
      ++pos_;
    }
    return args;
  }

  // (expr (',' expr)* ','?)? before `close`.
  std::vector<ExprPtr> exprList(Sym close) {
    std::vector<ExprPtr> items;
    while (!at(close)) {
      items.push_back(expr());
      if (!at(Sym::Comma)) break;
      ++pos_;
    }
    return items;
  }

  ExprPtr primary() {
    const std::size_t start = pos_;
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::Int:
        ++pos_;
        return build_.intLiteral(t.text, spanOf(start));
      case TokenKind::Float:
        ++pos_;
        return build_.floatLiteral(t.text, spanOf(start));
      case TokenKind::Quantity:
        ++pos_;
        return build_.quantityLiteral(t.text, spanOf(start));
      case TokenKind::String: {
        ++pos_;
        SourceSpan s = spanOf(start);
        return std::make_unique<StringLiteral>(s, build_.stringValue(t.text, s));
      }
      case TokenKind::Ident:
        ++pos_;
        return std::make_unique<NameRef>(spanOf(start), text(start));
      case TokenKind::Symbol:
        break;
      default:
        throw GiveUp{};
    }
    if (isName(t)) {
      ++pos_;
      return std::make_unique<NameRef>(spanOf(start), text(start));
    }
    if (at(Sym::True) || at(Sym::False)) {
      ++pos_;
      return std::make_unique<BoolLiteral>(spanOf(start), t.symbol == Sym::True);
    }
    if (at(Sym::NoneWord)) return std::make_unique<NoneLiteral>(spanOf(pos_++));
    if (at(Sym::Auto)) return std::make_unique<AutoLiteral>(spanOf(pos_++));
    if (at(Sym::LeftParen)) {
      ++pos_;
      ExprPtr inner = expr();
      expect(Sym::RightParen);
      inner->span = spanFrom(start);
      return inner;
    }
    if (at(Sym::LeftBracket)) {
      ++pos_;
      std::vector<ExprPtr> items = exprList(Sym::RightBracket);
      expect(Sym::RightBracket);
      auto list = std::make_unique<ListExpr>(spanFrom(start));
      std::uint32_t height = 0;
      for (const ExprPtr& e : items) height = std::max(height, e->height);
      list->items = std::move(items);
      return build_.bounded(std::move(list), height);
    }
    if (at(Sym::LeftBrace)) return recordLiteral();
    throw GiveUp{};
  }

  ExprPtr recordLiteral() {
    std::size_t start = pos_++;
    std::vector<RecordField> fields;
    while (!at(Sym::RightBrace)) {
      RecordField field;
      std::size_t key = pos_;
      if (peek().kind == TokenKind::String) {
        ++pos_;
        field.nameSpan = spanOf(key);
        field.name = build_.stringValue(t_[key].text, field.nameSpan);
      } else {
        name();
        field.nameSpan = spanOf(key);
        field.name = text(key);
      }
      expect(Sym::Colon);
      field.value = expr();
      fields.push_back(std::move(field));
      if (!at(Sym::Comma)) break;
      ++pos_;
    }
    expect(Sym::RightBrace);
    auto record = std::make_unique<RecordExpr>(spanFrom(start));
    std::uint32_t height = 0;
    for (RecordField& field : fields) {
      height = std::max(height, field.value->height);
      build_.addField(*record, std::move(field));
    }
    return build_.bounded(std::move(record), height);
  }

  const std::vector<Token>& t_;
  const interp::SourceFile& file_;
  AstBuilder build_;
  std::size_t pos_ = 0;
};

}  // namespace

std::shared_ptr<Program> parseDirect(std::shared_ptr<const interp::SourceFile> file) {
  return parseDirect(file, scan(file->text()));
}

std::shared_ptr<Program> parseDirect(const std::shared_ptr<const interp::SourceFile>& file,
                                     const std::vector<Token>& scanned) {
  auto tokens = parserTokens(scanned);
  if (!tokens) return nullptr;
  std::vector<Diagnostic> problems;
  auto program = std::make_shared<Program>();
  program->file = file;
  try {
    DirectParser(*tokens, *file, problems).program(*program);
  } catch (const GiveUp&) {
    return nullptr;
  }
  return problems.empty() ? program : nullptr;
}

}  // namespace meshflow::grammar
