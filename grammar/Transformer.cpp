#include "grammar/Transformer.h"

#include <fmt/format.h>

#include "grammar/AstBuilder.h"

namespace meshflow::grammar {
namespace {

using namespace ast;
using P = meshflow_generated::MeshParser;

// One transformer per parse; it records problems (through AstBuilder) instead
// of throwing so that one bad literal does not hide the next.
class Transformer {
 public:
  Transformer(std::shared_ptr<const interp::SourceFile> file, std::vector<Diagnostic>& diagnostics)
      : file_(std::move(file)), build_(diagnostics) {}

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
    build_.enterExpressionBody();
    decl->exprBody = expr(ctx->expr());
    build_.leaveExpressionBody();
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
    int savedLoops = build_.enterFunction();
    decl->body = block(body);
    build_.leaveFunction(savedLoops);
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
    build_.enterLoop();
    s->body = block(ctx->block());
    build_.leaveLoop();
    return s;
  }

  StmtPtr whileStmt(P::WhileStmtContext* ctx) {
    auto s = std::make_unique<WhileStmt>(span(ctx->getStart(), ctx->expr()->getStop()));
    s->condition = expr(ctx->expr());
    build_.enterLoop();
    s->body = block(ctx->block());
    build_.leaveLoop();
    return s;
  }

  StmtPtr returnStmt(P::ReturnStmtContext* ctx) {
    build_.checkReturn(span(ctx));
    return std::make_unique<ReturnStmt>(span(ctx), ctx->expr() ? expr(ctx->expr()) : nullptr);
  }

  template <typename Jump>
  StmtPtr loopJump(antlr4::ParserRuleContext* ctx, const char* word) {
    build_.checkLoopJump(word, span(ctx));
    return std::make_unique<Jump>(span(ctx));
  }

  StmtPtr assignStmt(P::AssignStmtContext* ctx) {
    ExprPtr target = postfixExpr(ctx->postfixExpr());
    build_.checkAssignTarget(*target);
    return std::make_unique<AssignStmt>(span(ctx), std::move(target),
                                        assignmentOperator(ctx->op->getText()), expr(ctx->expr()));
  }

  // ---- expressions ----

  ExprPtr binary(BinaryOp op, ExprPtr lhs, ExprPtr rhs, const antlr4::Token* opToken) {
    return build_.binary(op, std::move(lhs), std::move(rhs), span(opToken, opToken));
  }

  template <typename Child>
  ExprPtr leftChain(const std::vector<Child*>& operands, const std::vector<antlr4::Token*>& ops,
                    ExprPtr (Transformer::*sub)(Child*)) {
    ExprPtr result = (this->*sub)(operands[0]);
    for (std::size_t i = 1; i < operands.size(); ++i)
      result = binary(binaryOperator(ops[i - 1]->getText()), std::move(result),
                      (this->*sub)(operands[i]), ops[i - 1]);
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
    for (auto it = prefix.rbegin(); it != prefix.rend(); ++it)
      operand = build_.unary(unaryOperator((*it)->getText()), span(*it, *it), std::move(operand));
    return operand;
  }

  ExprPtr notExpr(P::NotExprContext* ctx) {
    return unaryChain(ctx->nots, compareExpr(ctx->compareExpr()));
  }

  ExprPtr compareExpr(P::CompareExprContext* ctx) {
    auto operands = ctx->rangeExpr();
    ExprPtr lhs = rangeExpr(operands[0]);
    if (operands.size() == 1) return lhs;
    return binary(binaryOperator(ctx->op->getText()), std::move(lhs), rangeExpr(operands[1]),
                  ctx->op);
  }

  ExprPtr rangeExpr(P::RangeExprContext* ctx) {
    auto operands = ctx->addExpr();
    ExprPtr lhs = addExpr(operands[0]);
    if (operands.size() == 1) return lhs;
    return binary(BinaryOp::Range, std::move(lhs), addExpr(operands[1]), operands[1]->getStart());
  }

  ExprPtr addExpr(P::AddExprContext* ctx) {
    return leftChain(ctx->mulExpr(), ctx->ops, &Transformer::mulExpr);
  }

  ExprPtr mulExpr(P::MulExprContext* ctx) {
    return leftChain(ctx->unaryExpr(), ctx->ops, &Transformer::unaryExpr);
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
        result = build_.bounded(std::move(node), height);
      } else if (auto* index = dynamic_cast<P::IndexSuffixContext*>(suffix)) {
        auto node = std::make_unique<IndexExpr>(s, std::move(result));
        for (auto* e : index->expr()) {
          node->indices.push_back(expr(e));
          height = std::max(height, node->indices.back()->height);
        }
        result = build_.bounded(std::move(node), height);
      } else {
        auto* field = static_cast<P::FieldSuffixContext*>(suffix);
        result = build_.bounded(std::make_unique<FieldExpr>(s, std::move(result), field->name()->getText()),
                         height);
      }
    }
    return result;
  }

  ExprPtr primary(P::PrimaryContext* ctx) {
    SourceSpan s = span(ctx);
    if (auto* c = dynamic_cast<P::IntLiteralContext*>(ctx)) return build_.intLiteral(c->getText(), s);
    if (auto* c = dynamic_cast<P::FloatLiteralContext*>(ctx))
      return build_.floatLiteral(c->getText(), s);
    if (auto* c = dynamic_cast<P::QuantityLiteralContext*>(ctx))
      return build_.quantityLiteral(c->getText(), s);
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
    return build_.bounded(std::move(list), height);
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
      build_.addField(*record, std::move(field));
    }
    return build_.bounded(std::move(record), height);
  }

  std::string stringValue(antlr4::tree::TerminalNode* node) {
    return build_.stringValue(node->getText(), span(node));
  }

  std::shared_ptr<const interp::SourceFile> file_;
  AstBuilder build_;
};

}  // namespace

std::shared_ptr<ast::Program> transform(meshflow_generated::MeshParser::ProgramContext* tree,
                                        std::shared_ptr<const interp::SourceFile> file,
                                        std::vector<Diagnostic>& diagnostics) {
  return Transformer(std::move(file), diagnostics).program(tree);
}

}  // namespace meshflow::grammar
