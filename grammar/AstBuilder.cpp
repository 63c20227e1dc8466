#include "grammar/AstBuilder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "grammar/Parser.h"
#include "interp/Units.h"

namespace meshflow::grammar {

using namespace ast;

std::uint32_t codePoints(std::string_view text) {
  std::uint32_t count = 0;
  for (unsigned char c : text) count += (c & 0xC0) != 0x80;
  return count;
}

BinaryOp binaryOperator(std::string_view text) {
  static constexpr std::pair<std::string_view, BinaryOp> kOps[] = {
      {"+", BinaryOp::Add},   {"-", BinaryOp::Sub},       {"*", BinaryOp::Mul},
      {"/", BinaryOp::Div},   {"//", BinaryOp::FloorDiv}, {"%", BinaryOp::Mod},
      {"**", BinaryOp::Pow},  {"==", BinaryOp::Eq},       {"!=", BinaryOp::Ne},
      {"<", BinaryOp::Lt},    {"<=", BinaryOp::Le},       {">", BinaryOp::Gt},
      {">=", BinaryOp::Ge},   {"and", BinaryOp::And},     {"or", BinaryOp::Or},
      {"..", BinaryOp::Range}};
  for (const auto& [spelled, op] : kOps)
    if (spelled == text) return op;
  return BinaryOp::Add;
}

UnaryOp unaryOperator(std::string_view text) {
  return text == "not" ? UnaryOp::Not : text == "-" ? UnaryOp::Negate : UnaryOp::Plus;
}

std::optional<BinaryOp> assignmentOperator(std::string_view text) {
  if (text == "=") return std::nullopt;
  return binaryOperator(text.substr(0, text.size() - 1));
}

void AstBuilder::problem(DiagnosticKind kind, std::string message, const SourceSpan& where) {
  diagnostics_.push_back(interp::makeDiagnostic(kind, std::move(message), where));
}

ExprPtr AstBuilder::bounded(ExprPtr expr, std::uint32_t childHeight) {
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

ExprPtr AstBuilder::binary(BinaryOp op, ExprPtr lhs, ExprPtr rhs, const SourceSpan& opSpan) {
  SourceSpan s = SourceSpan::cover(lhs->span, rhs->span);
  auto node = std::make_unique<BinaryExpr>(s, op, std::move(lhs), std::move(rhs));
  node->opSpan = opSpan;
  std::uint32_t height = std::max(node->lhs->height, node->rhs->height);
  return bounded(std::move(node), height);
}

ExprPtr AstBuilder::unary(UnaryOp op, const SourceSpan& opSpan, ExprPtr operand) {
  SourceSpan s = SourceSpan::cover(opSpan, operand->span);
  std::uint32_t height = operand->height;
  return bounded(std::make_unique<UnaryExpr>(s, op, std::move(operand)), height);
}

namespace {

std::string withoutUnderscores(std::string_view text) {
  std::string digits;
  for (char c : text)
    if (c != '_') digits += c;
  return digits;
}

}  // namespace

ExprPtr AstBuilder::intLiteral(std::string_view text, const SourceSpan& s) {
  std::string digits = withoutUnderscores(text);
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size())
    problem(DiagnosticKind::InvalidLiteral,
            fmt::format("integer literal {} does not fit in 64 bits", text), s);
  return std::make_unique<IntLiteral>(s, value);
}

double AstBuilder::floatValue(std::string_view text, const SourceSpan& s) {
  std::string digits = withoutUnderscores(text);
  double value = std::strtod(digits.c_str(), nullptr);
  if (!std::isfinite(value))
    problem(DiagnosticKind::InvalidLiteral, fmt::format("number {} is out of range", text), s);
  return value;
}

ExprPtr AstBuilder::floatLiteral(std::string_view text, const SourceSpan& s) {
  return std::make_unique<FloatLiteral>(s, floatValue(text, s));
}

ExprPtr AstBuilder::quantityLiteral(std::string_view text, const SourceSpan& s) {
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
  std::string_view number = text.substr(0, i), unitText = text.substr(i);
  double value = floatValue(number, s);
  auto unit = interp::lookupUnit(std::string(unitText));
  if (!unit) {
    problem(DiagnosticKind::InvalidLiteral,
            fmt::format("'{}' is not a unit (only byte and bit units take '/s')", unitText), s);
    return std::make_unique<QuantityLiteral>(s, value, Dimension{});
  }
  return std::make_unique<QuantityLiteral>(s, value * unit->scale, unit->dimension);
}

std::string AstBuilder::stringValue(std::string_view text, const SourceSpan& tokenSpan) {
  std::string value;
  for (std::size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] != '\\') {
      value += text[i];
      continue;
    }
    char escaped = text[++i];
    switch (escaped) {
      case 'n':
        value += '\n';
        break;
      case 't':
        value += '\t';
        break;
      case 'r':
        value += '\r';
        break;
      case '"':
        value += '"';
        break;
      case '\\':
        value += '\\';
        break;
      default:
        problem(DiagnosticKind::InvalidLiteral,
                fmt::format("unknown escape '\\{}' (use \\n \\t \\r \\\" or \\\\)", escaped),
                tokenSpan);
    }
  }
  return value;
}

void AstBuilder::addField(RecordExpr& record, RecordField field) {
  for (const auto& earlier : record.fields)
    if (earlier.name == field.name)
      problem(DiagnosticKind::Redefinition,
              fmt::format("field '{}' appears twice in this record", field.name), field.nameSpan);
  record.fields.push_back(std::move(field));
}

void AstBuilder::checkAssignTarget(const Expr& target) {
  if (target.kind != ExprKind::Name && target.kind != ExprKind::Field &&
      target.kind != ExprKind::Index)
    problem(DiagnosticKind::InvalidAssignTarget,
            "only a name, a field (`r.x`) or an element (`xs[i]`) can be assigned to", target.span);
}

void AstBuilder::checkReturn(const SourceSpan& where) {
  if (functionDepth_ == 0)
    problem(DiagnosticKind::MisplacedStatement, "`return` outside a function", where);
}

void AstBuilder::checkLoopJump(const char* word, const SourceSpan& where) {
  if (loopDepth_ == 0)
    problem(DiagnosticKind::MisplacedStatement, fmt::format("`{}` outside a loop", word), where);
}

int AstBuilder::enterFunction() {
  int savedLoops = loopDepth_;
  loopDepth_ = 0;
  ++functionDepth_;
  return savedLoops;
}

void AstBuilder::leaveFunction(int savedLoops) {
  --functionDepth_;
  loopDepth_ = savedLoops;
}

}  // namespace meshflow::grammar
