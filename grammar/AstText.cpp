#include "grammar/AstText.h"

#include <fmt/format.h>

namespace meshflow::grammar {
namespace {

using namespace ast;

class Writer {
 public:
  std::string out;

  void program(const Program& p) {
    for (const auto& s : p.statements) stmt(*s, 0);
  }

 private:
  void line(int depth, const std::string& text) {
    out.append(static_cast<std::size_t>(depth) * 2, ' ');
    out += text;
    out += '\n';
  }
  static std::string at(const SourceSpan& s) {
    return fmt::format("@{}:{}-{}:{}{}", s.line, s.column, s.endLine, s.endColumn,
                       s.valid() ? "" : "(no file)");
  }

  void block(const Block& b, int depth) {
    line(depth, "block " + at(b.span));
    for (const auto& s : b.statements) stmt(*s, depth + 1);
  }

  void optionalExpr(const ExprPtr& e, int depth) {
    if (e)
      expr(*e, depth);
    else
      line(depth, "null");
  }

  void stmt(const Stmt& s, int depth) {
    std::string head = fmt::format("stmt {} {}", static_cast<int>(s.kind), at(s.span));
    switch (s.kind) {
      case StmtKind::Import: {
        const auto& i = static_cast<const ImportStmt&>(s);
        line(depth, fmt::format("{} import path={} target={} alias={}", head, i.isPath, i.target,
                                i.alias.value_or("-")));
        return;
      }
      case StmtKind::Let: {
        const auto& l = static_cast<const LetStmt&>(s);
        line(depth,
             fmt::format("{} let mutable={} {} {}", head, l.isMutable, l.name, at(l.nameSpan)));
        return expr(*l.value, depth + 1);
      }
      case StmtKind::Function: {
        const auto& f = static_cast<const FunctionDecl&>(s);
        line(depth, fmt::format("{} callable{} {} {}", head, static_cast<int>(f.callable), f.name,
                                at(f.nameSpan)));
        for (const auto& p : f.params) {
          line(depth + 1, fmt::format("param {} {}", p.name, at(p.span)));
          optionalExpr(p.defaultValue, depth + 2);
        }
        optionalExpr(f.exprBody, depth + 1);
        return block(f.body, depth + 1);
      }
      case StmtKind::Schedule: {
        const auto& d = static_cast<const ScheduleDecl&>(s);
        line(depth, fmt::format("{} schedule {} {}", head, d.name, at(d.nameSpan)));
        return block(d.body, depth + 1);
      }
      case StmtKind::If: {
        const auto& i = static_cast<const IfStmt&>(s);
        line(depth, head + " if");
        expr(*i.condition, depth + 1);
        block(i.thenBlock, depth + 1);
        if (i.elseBlock) block(*i.elseBlock, depth + 1);
        return;
      }
      case StmtKind::For: {
        const auto& f = static_cast<const ForStmt&>(s);
        line(depth, fmt::format("{} for {} {}", head, f.variable, at(f.variableSpan)));
        expr(*f.iterable, depth + 1);
        return block(f.body, depth + 1);
      }
      case StmtKind::While: {
        const auto& w = static_cast<const WhileStmt&>(s);
        line(depth, head + " while");
        expr(*w.condition, depth + 1);
        return block(w.body, depth + 1);
      }
      case StmtKind::Return:
        line(depth, head + " return");
        return optionalExpr(static_cast<const ReturnStmt&>(s).value, depth + 1);
      case StmtKind::Assign: {
        const auto& a = static_cast<const AssignStmt&>(s);
        line(depth, fmt::format("{} assign {}", head, a.op ? static_cast<int>(*a.op) : -1));
        expr(*a.target, depth + 1);
        return expr(*a.value, depth + 1);
      }
      case StmtKind::Expr:
        line(depth, head);
        return expr(*static_cast<const ExprStmt&>(s).expr, depth + 1);
      case StmtKind::Break:
      case StmtKind::Continue:
        return line(depth, head);
    }
  }

  void expr(const Expr& e, int depth) {
    std::string head =
        fmt::format("expr {} {} h{}", static_cast<int>(e.kind), at(e.span), e.height);
    switch (e.kind) {
      case ExprKind::Int:
        return line(depth, fmt::format("{} {}", head, static_cast<const IntLiteral&>(e).value));
      case ExprKind::Float:
        return line(depth, fmt::format("{} {}", head, static_cast<const FloatLiteral&>(e).value));
      case ExprKind::Quantity: {
        const auto& q = static_cast<const QuantityLiteral&>(e);
        return line(depth, fmt::format("{} {} B{} s{} F{}", head, q.value, q.dimension.bytes,
                                       q.dimension.seconds, q.dimension.flops));
      }
      case ExprKind::String:
        return line(depth,
                    fmt::format("{} {:?}", head, static_cast<const StringLiteral&>(e).value));
      case ExprKind::Bool:
        return line(depth, fmt::format("{} {}", head, static_cast<const BoolLiteral&>(e).value));
      case ExprKind::None:
      case ExprKind::Auto:
        return line(depth, head);
      case ExprKind::Name:
        return line(depth, fmt::format("{} {}", head, static_cast<const NameRef&>(e).name));
      case ExprKind::List:
        line(depth, head);
        for (const auto& item : static_cast<const ListExpr&>(e).items) expr(*item, depth + 1);
        return;
      case ExprKind::Record:
        line(depth, head);
        for (const auto& f : static_cast<const RecordExpr&>(e).fields) {
          line(depth + 1, fmt::format("field {} {}", f.name, at(f.nameSpan)));
          expr(*f.value, depth + 2);
        }
        return;
      case ExprKind::Unary: {
        const auto& u = static_cast<const UnaryExpr&>(e);
        line(depth, fmt::format("{} unary {}", head, static_cast<int>(u.op)));
        return expr(*u.operand, depth + 1);
      }
      case ExprKind::Binary: {
        const auto& b = static_cast<const BinaryExpr&>(e);
        line(depth, fmt::format("{} op{} {}", head, static_cast<int>(b.op), at(b.opSpan)));
        expr(*b.lhs, depth + 1);
        return expr(*b.rhs, depth + 1);
      }
      case ExprKind::Call: {
        const auto& c = static_cast<const CallExpr&>(e);
        line(depth, head + " call");
        expr(*c.callee, depth + 1);
        for (const auto& a : c.args) {
          line(depth + 1, fmt::format("arg {} {}", a.name.value_or("-"), at(a.span)));
          expr(*a.value, depth + 2);
        }
        return;
      }
      case ExprKind::Index: {
        const auto& i = static_cast<const IndexExpr&>(e);
        line(depth, head + " index");
        expr(*i.object, depth + 1);
        for (const auto& index : i.indices) expr(*index, depth + 1);
        return;
      }
      case ExprKind::Field: {
        const auto& f = static_cast<const FieldExpr&>(e);
        line(depth, fmt::format("{} field {}", head, f.name));
        return expr(*f.object, depth + 1);
      }
    }
  }
};

}  // namespace

std::string astText(const Program& program) {
  Writer writer;
  writer.program(program);
  return writer.out;
}

}  // namespace meshflow::grammar
