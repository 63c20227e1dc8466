#include "interp/Ast.h"

namespace meshflow::ast {

const char* spelling(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::FloorDiv: return "//";
    case BinaryOp::Mod: return "%";
    case BinaryOp::Pow: return "**";
    case BinaryOp::Eq: return "==";
    case BinaryOp::Ne: return "!=";
    case BinaryOp::Lt: return "<";
    case BinaryOp::Le: return "<=";
    case BinaryOp::Gt: return ">";
    case BinaryOp::Ge: return ">=";
    case BinaryOp::And: return "and";
    case BinaryOp::Or: return "or";
    case BinaryOp::Range: return "..";
  }
  return "?";
}

const char* keyword(CallableKind kind) {
  switch (kind) {
    case CallableKind::Function: return "fn";
    case CallableKind::Layer: return "layer";
    case CallableKind::Model: return "model";
    case CallableKind::Cluster: return "cluster";
  }
  return "?";
}

}  // namespace meshflow::ast
