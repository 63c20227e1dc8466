// What both front ends share once they know a construct's parts and spans:
// the AST nodes, the literals' values and every check that is not syntax
// (literals out of range, trees nested too deep, misplaced return/break,
// invalid assignment targets, repeated record fields). Internal to grammar/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "interp/Ast.h"

namespace meshflow::grammar {

/// Code points in UTF-8 text (columns count code points).
std::uint32_t codePoints(std::string_view text);

/// The binary operator spelled `text` (`+`, `//`, `and`, `..` …).
ast::BinaryOp binaryOperator(std::string_view text);
/// `not`, `-` or `+` in front of an operand.
ast::UnaryOp unaryOperator(std::string_view text);
/// The operator of a compound assignment (`+=` → Add); none for `=`.
std::optional<ast::BinaryOp> assignmentOperator(std::string_view text);

// It records problems instead of throwing so that one bad literal does not hide
// the next; a front end's parse succeeds only if none was recorded.
class AstBuilder {
 public:
  explicit AstBuilder(std::vector<Diagnostic>& diagnostics) : diagnostics_(diagnostics) {}

  void problem(DiagnosticKind kind, std::string message, const ast::SourceSpan& where);

  // Every composite expression goes through here, so no tree grows deeper
  // than kMaxExpressionDepth and the evaluator (and the destructors) never
  // recurse without bound.
  ast::ExprPtr bounded(ast::ExprPtr expr, std::uint32_t childHeight);
  ast::ExprPtr binary(ast::BinaryOp op, ast::ExprPtr lhs, ast::ExprPtr rhs,
                      const ast::SourceSpan& opSpan);
  ast::ExprPtr unary(ast::UnaryOp op, const ast::SourceSpan& opSpan, ast::ExprPtr operand);

  // Literals from their token's text.
  ast::ExprPtr intLiteral(std::string_view text, const ast::SourceSpan& s);
  ast::ExprPtr floatLiteral(std::string_view text, const ast::SourceSpan& s);
  ast::ExprPtr quantityLiteral(std::string_view text, const ast::SourceSpan& s);
  /// The value of a STRING token (quotes included in `text`), escapes resolved.
  std::string stringValue(std::string_view text, const ast::SourceSpan& tokenSpan);

  /// Appends `field`, reporting a name that the record already has.
  void addField(ast::RecordExpr& record, ast::RecordField field);
  void checkAssignTarget(const ast::Expr& target);

  // Where `return`, `break` and `continue` may stand.
  void checkReturn(const ast::SourceSpan& where);
  void checkLoopJump(const char* word, const ast::SourceSpan& where);
  /// Marks a callable's body: no enclosing loop counts inside it.
  int enterFunction();
  void leaveFunction(int savedLoops);
  void enterLoop() { ++loopDepth_; }
  void leaveLoop() { --loopDepth_; }
  /// For `fn f(x) = expr`: a function body whose loop depth stays as it is.
  void enterExpressionBody() { ++functionDepth_; }
  void leaveExpressionBody() { --functionDepth_; }

 private:
  double floatValue(std::string_view text, const ast::SourceSpan& s);

  std::vector<Diagnostic>& diagnostics_;
  int functionDepth_ = 0;
  int loopDepth_ = 0;
  bool reportedDepth_ = false;
};

}  // namespace meshflow::grammar
