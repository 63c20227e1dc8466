// The optimizer a training graph updates its parameters with. The fields are
// those of the `.mesh` builtins sgd(...), adam(...) and adamw(...)
// (interp/BuiltinsDeclarations.cpp), and the factories carry the same defaults,
// so a script that writes `adam()` and a C++ caller that writes
// `OptimizerConfig::adam()` train identically.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace meshflow::passes {

struct OptimizerConfig {
  enum class Kind : std::uint8_t { Sgd, Adam, AdamW };

  Kind kind = Kind::Adam;
  double lr = 1e-3;
  double momentum = 0;  // sgd only
  double beta1 = 0.9;   // adam, adamw
  double beta2 = 0.999;
  double eps = 1e-8;
  /// Coupled (added to the gradient) for sgd and adam; decoupled (applied to the
  /// weight directly, scaled by lr) for adamw.
  double weightDecay = 0;
  /// Clip the global gradient norm to this value; 0 turns clipping off.
  double clipNorm = 0;
  /// Dynamic loss scaling, for f16 training: the initial scale the loss's
  /// gradient is multiplied by (0 turns it off). An overflowed step is skipped
  /// and halves the scale; `lossScaleWindow` good steps in a row double it.
  double lossScale = 0;
  std::int64_t lossScaleWindow = 2000;

  static OptimizerConfig sgd(double lr = 1e-2, double momentum = 0, double weightDecay = 0) {
    OptimizerConfig c;
    c.kind = Kind::Sgd;
    c.lr = lr;
    c.momentum = momentum;
    c.weightDecay = weightDecay;
    return c;
  }
  static OptimizerConfig adam(double lr = 1e-3, double weightDecay = 0) {
    OptimizerConfig c;
    c.lr = lr;
    c.weightDecay = weightDecay;
    return c;
  }
  static OptimizerConfig adamw(double lr = 1e-3, double weightDecay = 0.01) {
    OptimizerConfig c = adam(lr, weightDecay);
    c.kind = Kind::AdamW;
    return c;
  }
};

/// "sgd", "adam", "adamw" — the names of the `.mesh` builtins (and of the
/// record field `kind` they return).
inline const char* optimizerKindName(OptimizerConfig::Kind kind) {
  switch (kind) {
    case OptimizerConfig::Kind::Sgd:
      return "sgd";
    case OptimizerConfig::Kind::Adam:
      return "adam";
    case OptimizerConfig::Kind::AdamW:
      return "adamw";
  }
  return "?";
}

inline std::optional<OptimizerConfig::Kind> parseOptimizerKind(const std::string& name) {
  for (auto kind :
       {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam, OptimizerConfig::Kind::AdamW})
    if (name == optimizerKindName(kind)) return kind;
  return std::nullopt;
}

}  // namespace meshflow::passes
