#include "passes/ShardingCbc.h"

#include <coin/Cbc_C_Interface.h>
#include <fmt/format.h>

#include <memory>
#include <string>

namespace meshflow::passes::sharding {

namespace {

using Model = std::unique_ptr<Cbc_Model, decltype(&Cbc_deleteModel)>;

void setLimits(Cbc_Model* model, const MilpLimits& limits) {
  Cbc_setParameter(model, "log", "0");
  Cbc_setParameter(model, "slog", "0");
  Cbc_setParameter(model, "threads", "0");
  Cbc_setParameter(model, "timeMode", "elapsed");
  Cbc_setParameter(model, "seconds", fmt::format("{:.3f}", limits.seconds).c_str());
  if (limits.nodes > 0) Cbc_setParameter(model, "maxNodes", std::to_string(limits.nodes).c_str());
}

}  // namespace

int Milp::addRow(double lower, double upper) {
  rowLower_.push_back(lower);
  rowUpper_.push_back(upper);
  return static_cast<int>(rowLower_.size()) - 1;
}

int Milp::addColumn(double objective, double upper, bool integer,
                    const std::vector<std::pair<int, double>>& entries) {
  objective_.push_back(objective);
  columnUpper_.push_back(upper);
  integer_.push_back(integer);
  for (auto [row, coefficient] : entries) {
    index_.push_back(row);
    value_.push_back(coefficient);
  }
  start_.push_back(static_cast<int>(index_.size()));
  return columns() - 1;
}

MilpResult Milp::solve(const MilpLimits& limits) const {
  Model model(Cbc_newModel(), Cbc_deleteModel);
  std::vector<double> columnLower(objective_.size(), 0.0);
  Cbc_loadProblem(model.get(), columns(), static_cast<int>(rowLower_.size()), start_.data(),
                  index_.data(), value_.data(), columnLower.data(), columnUpper_.data(),
                  objective_.data(), rowLower_.data(), rowUpper_.data());
  for (int c = 0; c < columns(); ++c) {
    if (integer_[c]) Cbc_setInteger(model.get(), c);
  }
  setLimits(model.get(), limits);
  Cbc_solve(model.get());
  MilpResult r;
  r.optimal = Cbc_isProvenOptimal(model.get()) != 0;
  // Stopped by a limit, CBC may report "infeasible" for "found nothing yet".
  bool stopped = Cbc_isSecondsLimitReached(model.get()) || Cbc_isNodeLimitReached(model.get()) ||
                 Cbc_status(model.get()) != 0;
  r.infeasible = !stopped && Cbc_isProvenInfeasible(model.get()) != 0;
  r.bound = Cbc_getBestPossibleObjValue(model.get());
  if (const double* best = Cbc_bestSolution(model.get())) {
    r.values = std::vector<double>(best, best + columns());
  }
  if (r.optimal && r.values) r.bound = Cbc_getObjValue(model.get());
  return r;
}

}  // namespace meshflow::passes::sharding
