#include "grammar/Transformer.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "grammar/Parser.h"
#include "interp/Units.h"

namespace meshflow::grammar {
namespace {

using namespace ast;
using P = meshflow_generated::MeshParser;

std::uint32_t codePoints(const std::string& text) {
  std::uint32_t count = 0;
  for (unsigned char c : text) count += (c & 0xC0) != 0x80;
  return count;
}

// One transformer per parse; it records problems instead of throwing so that
// one bad literal does not hide the next.
class Transformer {
 public:
  Transformer(std::shared_ptr<const interp::SourceFile> file, std::vector<Diagnostic>& diagnostics)
      : file_(std::move(file)), diagnostics_(diagnostics) {}

  std::shared_ptr<Program> program(P::ProgramContext* ctx) {
    auto program = std::make_shared<Program>();
    program->file = file_;
    for (auto* statement : ctx->statement()) program->statements.push_back(stmt(statement));
    return program;
  }

 private:
  // ---- spans and problems ----

  SourceSpan span(const antlr4::Token* start, const antlr4::Token* stop) const {
    SourceSpan s;
    s.file = file_.get();
    s.line = static_cast<std::uint32_t>(start->getLine() - 1);
    s.column = static_cast<std::uint32_t>(start->getCharPositionInLine());
    if (stop == nullptr || stop->getTokenIndex() < start->getTokenIndex()) stop = start;
    s.endLine = static_cast<std::uint32_t>(stop->getLine() - 1);
    s.endColumn = static_cast<std::uint32_t>(stop->getCharPositionInLine()) +
                  std::max(1u, codePoints(stop->getText()));
    return s;
  }
  SourceSpan span(antlr4::ParserRuleContext* ctx) const { return span(ctx->getStart(), ctx->getStop()); }
  SourceSpan span(antlr4::tree::TerminalNode* node) const {
    return span(node->getSymbol(), node->getSymbol());
  }

  void problem(DiagnosticKind kind, std::string message, const SourceSpan& where) {
    diagnostics_.push_back(interp::makeDiagnostic(kind, std::move(message), where));
  }

  // Every composite expression goes through here, so no tree grows deeper
  // than kMaxExpressionDepth and the evaluator (and the destructors) never
  // recurse without bound.
  ExprPtr bounded(ExprPtr expr, std::uint32_t childHeight) {
    expr->height = childHeight + 1;
    if (expr->height > static_cast<std::uint32_t>(kMaxExpressionDepth)) {
      if (!reportedDepth_)
        problem(DiagnosticKind::NestingTooDeep,
                fmt::format("expression nests deeper than {} operations; split it with `let`",
                            kMaxExpressionDepth),
                expr->span);
      reportedDepth_ = true;
      return std::make_unique<NoneLiteral>(expr->span);
    }
    return expr;
  }

  // ---- statements ----

  StmtPtr stmt(P::StatementContext* ctx) {
    if (auto* c = ctx->importStmt()) return importStmt(c);
    if (auto* c = ctx->letStmt()) return letStmt(c);
    if (auto* c = ctx->fnDecl()) return fnDecl(c);
    if (auto* c = ctx->layerDecl())
      return callableDecl(CallableKind::Layer, c, c->name(), c->paramList(), c->block());
    if (auto* c = ctx->modelDecl())
      return callableDecl(CallableKind::Model, c, c->name(), c->paramList(), c->block());
    if (auto* c = ctx->clusterDecl())
      return callableDecl(CallableKind::Cluster, c, c->name(), c->paramList(), c->block());
    if (auto* c = ctx->scheduleDecl()) return scheduleDecl(c);
    if (auto* c = ctx->ifStmt()) return ifStmt(c);
    if (auto* c = ctx->forStmt()) return forStmt(c);
    if (auto* c = ctx->whileStmt()) return whileStmt(c);
    if (auto* c = ctx->returnStmt()) return returnStmt(c);
    if (auto* c = ctx->breakStmt()) return loopJump<BreakStmt>(c, "break");
    if (auto* c = ctx->continueStmt()) return loopJump<ContinueStmt>(c, "continue");
    if (auto* c = ctx->assignStmt()) return assignStmt(c);
    return std::make_unique<ExprStmt>(span(ctx), expr(ctx->exprStmt()->expr()));
  }

  Block block(P::BlockContext* ctx) {
    Block b;
    b.span = span(ctx);
    for (auto* statement : ctx->statement()) b.statements.push_back(stmt(statement));
    return b;
  }

  StmtPtr importStmt(P::ImportStmtContext* ctx) {
    auto s = std::make_unique<ImportStmt>(span(ctx));
    if (auto* dotted = ctx->dottedName()) {
      for (auto* part : dotted->name())
        s->target += (s->target.empty() ? "" : ".") + part->getText();
    } else {
      s->isPath = true;
      s->target = stringValue(ctx->STRING());
    }
    if (auto* alias = ctx->name()) s->alias = alias->getText();
    return s;
  }

  StmtPtr letStmt(P::LetStmtContext* ctx) {
    auto s = std::make_unique<LetStmt>(span(ctx), ctx->kw->getText() == "var",
                                       ctx->name()->getText(), expr(ctx->expr()));
    s->nameSpan = span(ctx->name());
    return s;
  }

  StmtPtr fnDecl(P::FnDeclContext* ctx) {
    if (ctx->block()) return callableDecl(CallableKind::Function, ctx, ctx->name(), ctx->paramList(), ctx->block());
    auto decl = declHeader(CallableKind::Function, ctx, ctx->name(), ctx->paramList());
    ++functionDepth_;
    decl->exprBody = expr(ctx->expr());
    --functionDepth_;
    decl->body.span = decl->exprBody->span;
    return decl;
  }

  std::unique_ptr<FunctionDecl> declHeader(CallableKind kind, antlr4::ParserRuleContext* ctx,
                                           P::NameContext* name, P::ParamListContext* params) {
    auto decl = std::make_unique<FunctionDecl>(span(ctx->getStart(), name->getStop()), kind);
    decl->name = name->getText();
    decl->nameSpan = span(name);
    if (params)
      for (auto* p : params->param()) {
        Param param{p->name()->getText(), span(p), nullptr};
        if (p->expr()) param.defaultValue = expr(p->expr());
        decl->params.push_back(std::move(param));
      }
    return decl;
  }

  StmtPtr callableDecl(CallableKind kind, antlr4::ParserRuleContext* ctx, P::NameContext* name,
                       P::ParamListContext* params, P::BlockContext* body) {
    auto decl = declHeader(kind, ctx, name, params);
    // A loop outside a function does not make `break` valid inside it.
    int savedLoops = loopDepth_;
    loopDepth_ = 0;
    ++functionDepth_;
    decl->body = block(body);
    --functionDepth_;
    loopDepth_ = savedLoops;
    return decl;
  }

  StmtPtr scheduleDecl(P::ScheduleDeclContext* ctx) {
    auto s = std::make_unique<ScheduleDecl>(span(ctx->getStart(), ctx->name()->getStop()));
    s->name = ctx->name()->getText();
    s->nameSpan = span(ctx->name());
    s->body = block(ctx->block());
    return s;
  }

  StmtPtr ifStmt(P::IfStmtContext* ctx) {
    auto s = std::make_unique<IfStmt>(span(ctx->getStart(), ctx->expr()->getStop()));
    s->condition = expr(ctx->expr());
    auto blocks = ctx->block();
    s->thenBlock = block(blocks[0]);
    if (auto* elseIf = ctx->ifStmt()) {
      Block b;
      b.span = span(elseIf);
      b.statements.push_back(ifStmt(elseIf));
      s->elseBlock = std::move(b);
    } else if (blocks.size() > 1) {
      s->elseBlock = block(blocks[1]);
    }
    return s;
  }

  StmtPtr forStmt(P::ForStmtContext* ctx) {
    auto s = std::make_unique<ForStmt>(span(ctx->getStart(), ctx->expr()->getStop()));
    s->variable = ctx->name()->getText();
    s->variableSpan = span(ctx->name());
    s->iterable = expr(ctx->expr());
    ++loopDepth_;
    s->body = block(ctx->block());
    --loopDepth_;
    return s;
  }

  StmtPtr whileStmt(P::WhileStmtContext* ctx) {
    auto s = std::make_unique<WhileStmt>(span(ctx->getStart(), ctx->expr()->getStop()));
    s->condition = expr(ctx->expr());
    ++loopDepth_;
    s->body = block(ctx->block());
    --loopDepth_;
    return s;
  }

  StmtPtr returnStmt(P::ReturnStmtContext* ctx) {
    if (functionDepth_ == 0)
      problem(DiagnosticKind::MisplacedStatement, "`return` outside a function", span(ctx));
    return std::make_unique<ReturnStmt>(span(ctx), ctx->expr() ? expr(ctx->expr()) : nullptr);
  }

  template <typename Jump>
  StmtPtr loopJump(antlr4::ParserRuleContext* ctx, const char* word) {
    if (loopDepth_ == 0)
      problem(DiagnosticKind::MisplacedStatement, fmt::format("`{}` outside a loop", word),
              span(ctx));
    return std::make_unique<Jump>(span(ctx));
  }

  StmtPtr assignStmt(P::AssignStmtContext* ctx) {
    ExprPtr target = postfixExpr(ctx->postfixExpr());
    if (target->kind != ExprKind::Name && target->kind != ExprKind::Field &&
        target->kind != ExprKind::Index)
      problem(DiagnosticKind::InvalidAssignTarget,
              "only a name, a field (`r.x`) or an element (`xs[i]`) can be assigned to",
              target->span);
    std::optional<BinaryOp> op;
    std::string text = ctx->op->getText();
    if (text == "+=") op = BinaryOp::Add;
    if (text == "-=") op = BinaryOp::Sub;
    if (text == "*=") op = BinaryOp::Mul;
    if (text == "/=") op = BinaryOp::Div;
    return std::make_unique<AssignStmt>(span(ctx), std::move(target), op, expr(ctx->expr()));
  }

  // ---- expressions ----

  ExprPtr binary(BinaryOp op, ExprPtr lhs, ExprPtr rhs, const antlr4::Token* opToken) {
    SourceSpan s = SourceSpan::cover(lhs->span, rhs->span);
    auto node = std::make_unique<BinaryExpr>(s, op, std::move(lhs), std::move(rhs));
    node->opSpan = span(opToken, opToken);
    std::uint32_t height = std::max(node->lhs->height, node->rhs->height);
    return bounded(std::move(node), height);
  }

  template <typename Child>
  ExprPtr leftChain(const std::vector<Child*>& operands, const std::vector<antlr4::Token*>& ops,
                    BinaryOp (*toOp)(const std::string&), ExprPtr (Transformer::*sub)(Child*)) {
    ExprPtr result = (this->*sub)(operands[0]);
    for (std::size_t i = 1; i < operands.size(); ++i)
      result = binary(toOp(ops[i - 1]->getText()), std::move(result), (this->*sub)(operands[i]),
                      ops[i - 1]);
    return result;
  }

  ExprPtr expr(P::ExprContext* ctx) { return orExpr(ctx->orExpr()); }

  ExprPtr orExpr(P::OrExprContext* ctx) {
    auto operands = ctx->andExpr();
    ExprPtr result = andExpr(operands[0]);
    for (std::size_t i = 1; i < operands.size(); ++i)
      result = binary(BinaryOp::Or, std::move(result), andExpr(operands[i]),
                      operands[i]->getStart());
    return result;
  }

  ExprPtr andExpr(P::AndExprContext* ctx) {
    auto operands = ctx->notExpr();
    ExprPtr result = notExpr(operands[0]);
    for (std::size_t i = 1; i < operands.size(); ++i)
      result = binary(BinaryOp::And, std::move(result), notExpr(operands[i]),
                      operands[i]->getStart());
    return result;
  }

  ExprPtr unaryChain(const std::vector<antlr4::Token*>& prefix, ExprPtr operand) {
    for (auto it = prefix.rbegin(); it != prefix.rend(); ++it) {
      std::string text = (*it)->getText();
      UnaryOp op = text == "not" ? UnaryOp::Not : text == "-" ? UnaryOp::Negate : UnaryOp::Plus;
      SourceSpan s = SourceSpan::cover(span(*it, *it), operand->span);
      auto node = std::make_unique<UnaryExpr>(s, op, std::move(operand));
      std::uint32_t height = node->operand->height;
      operand = bounded(std::move(node), height);
    }
    return operand;
  }

  ExprPtr notExpr(P::NotExprContext* ctx) {
    return unaryChain(ctx->nots, compareExpr(ctx->compareExpr()));
  }

  ExprPtr compareExpr(P::CompareExprContext* ctx) {
    auto operands = ctx->rangeExpr();
    ExprPtr lhs = rangeExpr(operands[0]);
    if (operands.size() == 1) return lhs;
    static const std::pair<const char*, BinaryOp> kOps[] = {
        {"==", BinaryOp::Eq}, {"!=", BinaryOp::Ne}, {"<", BinaryOp::Lt},
        {"<=", BinaryOp::Le}, {">", BinaryOp::Gt}, {">=", BinaryOp::Ge}};
    BinaryOp op = BinaryOp::Eq;
    for (const auto& [text, candidate] : kOps)
      if (ctx->op->getText() == text) op = candidate;
    return binary(op, std::move(lhs), rangeExpr(operands[1]), ctx->op);
  }

  ExprPtr rangeExpr(P::RangeExprContext* ctx) {
    auto operands = ctx->addExpr();
    ExprPtr lhs = addExpr(operands[0]);
    if (operands.size() == 1) return lhs;
    return binary(BinaryOp::Range, std::move(lhs), addExpr(operands[1]), operands[1]->getStart());
  }

  static BinaryOp additive(const std::string& text) {
    return text == "+" ? BinaryOp::Add : BinaryOp::Sub;
  }
  static BinaryOp multiplicative(const std::string& text) {
    if (text == "*") return BinaryOp::Mul;
    if (text == "/") return BinaryOp::Div;
    if (text == "//") return BinaryOp::FloorDiv;
    return BinaryOp::Mod;
  }

  ExprPtr addExpr(P::AddExprContext* ctx) {
    return leftChain(ctx->mulExpr(), ctx->ops, &additive, &Transformer::mulExpr);
  }

  ExprPtr mulExpr(P::MulExprContext* ctx) {
    return leftChain(ctx->unaryExpr(), ctx->ops, &multiplicative,
                                        &Transformer::unaryExpr);
  }

  ExprPtr unaryExpr(P::UnaryExprContext* ctx) {
    return unaryChain(ctx->signs, powerExpr(ctx->powerExpr()));
  }

  // `a ** b ** c` is `a ** (b ** c)`: fold from the right.
  ExprPtr powerExpr(P::PowerExprContext* ctx) {
    auto operands = ctx->powerOperand();
    if (operands.empty()) return postfixExpr(ctx->postfixExpr());
    ExprPtr result = powerOperand(operands.back());
    for (std::size_t i = operands.size() - 1; i-- > 0;)
      result = binary(BinaryOp::Pow, powerOperand(operands[i]), std::move(result),
                      operands[i + 1]->getStart());
    return binary(BinaryOp::Pow, postfixExpr(ctx->postfixExpr()), std::move(result),
                  operands[0]->getStart());
  }

  ExprPtr powerOperand(P::PowerOperandContext* ctx) {
    return unaryChain(ctx->signs, postfixExpr(ctx->postfixExpr()));
  }

  ExprPtr postfixExpr(P::PostfixExprContext* ctx) {
    ExprPtr result = primary(ctx->primary());
    for (auto* suffix : ctx->postfix()) {
      SourceSpan s = SourceSpan::cover(result->span, span(suffix));
      std::uint32_t height = result->height;
      if (auto* call = dynamic_cast<P::CallSuffixContext*>(suffix)) {
        auto node = std::make_unique<CallExpr>(s, std::move(result));
        if (auto* args = call->argList())
          for (auto* a : args->arg()) {
            Argument arg;
            if (a->name()) arg.name = a->name()->getText();
            arg.span = span(a);
            arg.value = expr(a->expr());
            height = std::max(height, arg.value->height);
            node->args.push_back(std::move(arg));
          }
        result = bounded(std::move(node), height);
      } else if (auto* index = dynamic_cast<P::IndexSuffixContext*>(suffix)) {
        auto node = std::make_unique<IndexExpr>(s, std::move(result));
        for (auto* e : index->expr()) {
          node->indices.push_back(expr(e));
          height = std::max(height, node->indices.back()->height);
        }
        result = bounded(std::move(node), height);
      } else {
        auto* field = static_cast<P::FieldSuffixContext*>(suffix);
        result = bounded(std::make_unique<FieldExpr>(s, std::move(result), field->name()->getText()),
                         height);
      }
    }
    return result;
  }

  ExprPtr primary(P::PrimaryContext* ctx) {
    SourceSpan s = span(ctx);
    if (auto* c = dynamic_cast<P::IntLiteralContext*>(ctx)) return intLiteral(c->INT(), s);
    if (auto* c = dynamic_cast<P::FloatLiteralContext*>(ctx))
      return std::make_unique<FloatLiteral>(s, floatValue(c->getText(), s));
    if (auto* c = dynamic_cast<P::QuantityLiteralContext*>(ctx)) return quantityLiteral(c->getText(), s);
    if (auto* c = dynamic_cast<P::StringLiteralContext*>(ctx))
      return std::make_unique<StringLiteral>(s, stringValue(c->STRING()));
    if (dynamic_cast<P::TrueLiteralContext*>(ctx)) return std::make_unique<BoolLiteral>(s, true);
    if (dynamic_cast<P::FalseLiteralContext*>(ctx)) return std::make_unique<BoolLiteral>(s, false);
    if (dynamic_cast<P::NoneLiteralContext*>(ctx)) return std::make_unique<NoneLiteral>(s);
    if (dynamic_cast<P::AutoLiteralContext*>(ctx)) return std::make_unique<AutoLiteral>(s);
    if (auto* c = dynamic_cast<P::NameRefContext*>(ctx))
      return std::make_unique<NameRef>(s, c->name()->getText());
    if (auto* c = dynamic_cast<P::ParenExprContext*>(ctx)) {
      ExprPtr inner = expr(c->expr());
      inner->span = s;
      return inner;
    }
    if (auto* c = dynamic_cast<P::ListLiteralContext*>(ctx)) return listLiteral(c, s);
    return recordLiteral(static_cast<P::RecordLiteralContext*>(ctx), s);
  }

  ExprPtr listLiteral(P::ListLiteralContext* ctx, SourceSpan s) {
    auto list = std::make_unique<ListExpr>(s);
    std::uint32_t height = 0;
    for (auto* e : ctx->expr()) {
      list->items.push_back(expr(e));
      height = std::max(height, list->items.back()->height);
    }
    return bounded(std::move(list), height);
  }

  ExprPtr recordLiteral(P::RecordLiteralContext* ctx, SourceSpan s) {
    auto record = std::make_unique<RecordExpr>(s);
    std::uint32_t height = 0;
    for (auto* f : ctx->recordField()) {
      RecordField field;
      field.name = f->name() ? f->name()->getText() : stringValue(f->STRING());
      field.nameSpan = f->name() ? span(f->name()) : span(f->STRING());
      field.value = expr(f->expr());
      height = std::max(height, field.value->height);
      for (const auto& earlier : record->fields)
        if (earlier.name == field.name)
          problem(DiagnosticKind::Redefinition,
                  fmt::format("field '{}' appears twice in this record", field.name),
                  field.nameSpan);
      record->fields.push_back(std::move(field));
    }
    return bounded(std::move(record), height);
  }

  // ---- literals ----

  static std::string withoutUnderscores(const std::string& text) {
    std::string digits;
    for (char c : text)
      if (c != '_') digits += c;
    return digits;
  }

  ExprPtr intLiteral(antlr4::tree::TerminalNode* node, SourceSpan s) {
    std::string digits = withoutUnderscores(node->getText());
    std::int64_t value = 0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error != std::errc() || end != digits.data() + digits.size())
      problem(DiagnosticKind::InvalidLiteral,
              fmt::format("integer literal {} does not fit in 64 bits", node->getText()), s);
    return std::make_unique<IntLiteral>(s, value);
  }

  double floatValue(const std::string& text, const SourceSpan& s) {
    std::string digits = withoutUnderscores(text);
    double value = std::strtod(digits.c_str(), nullptr);
    if (!std::isfinite(value))
      problem(DiagnosticKind::InvalidLiteral, fmt::format("number {} is out of range", text), s);
    return value;
  }

  ExprPtr quantityLiteral(const std::string& text, SourceSpan s) {
    // The number ends where the unit's first letter starts (an `e` followed by
    // a digit or sign is an exponent, not a unit).
    std::size_t i = 0;
    while (i < text.size()) {
      char c = text[i];
      bool exponent = (c == 'e' || c == 'E') && i + 1 < text.size() &&
                      (std::isdigit(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == '-' ||
                       text[i + 1] == '+');
      if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.' || exponent ||
            ((c == '-' || c == '+') && i > 0 && (text[i - 1] == 'e' || text[i - 1] == 'E'))))
        break;
      ++i;
    }
    std::string number = text.substr(0, i), unitText = text.substr(i);
    double value = floatValue(number, s);
    auto unit = interp::lookupUnit(unitText);
    if (!unit) {
      problem(DiagnosticKind::InvalidLiteral,
              fmt::format("'{}' is not a unit (only byte and bit units take '/s')", unitText), s);
      return std::make_unique<QuantityLiteral>(s, value, Dimension{});
    }
    return std::make_unique<QuantityLiteral>(s, value * unit->scale, unit->dimension);
  }

  std::string stringValue(antlr4::tree::TerminalNode* node) {
    std::string text = node->getText();
    std::string value;
    for (std::size_t i = 1; i + 1 < text.size(); ++i) {
      if (text[i] != '\\') {
        value += text[i];
        continue;
      }
      char escaped = text[++i];
      switch (escaped) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '"': value += '"'; break;
        case '\\': value += '\\'; break;
        default:
          problem(DiagnosticKind::InvalidLiteral,
                  fmt::format("unknown escape '\\{}' (use \\n \\t \\r \\\" or \\\\)", escaped),
                  span(node));
      }
    }
    return value;
  }

  std::shared_ptr<const interp::SourceFile> file_;
  std::vector<Diagnostic>& diagnostics_;
  int functionDepth_ = 0;
  int loopDepth_ = 0;
  bool reportedDepth_ = false;
};

}  // namespace

std::shared_ptr<ast::Program> transform(meshflow_generated::MeshParser::ProgramContext* tree,
                                        std::shared_ptr<const interp::SourceFile> file,
                                        std::vector<Diagnostic>& diagnostics) {
  return Transformer(std::move(file), diagnostics).program(tree);
}

}  // namespace meshflow::grammar
