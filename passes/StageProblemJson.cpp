#include "passes/StageProblemJson.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <string>

namespace meshflow::passes {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw StageError(fmt::format("{}: {}", path, what));
}

std::string describe(const json& value) {
  std::string text = value.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

std::string indexed(const std::string& path, std::size_t k) {
  return fmt::format("{}[{}]", path, k);
}

int positiveInt(const json& value, const std::string& path) {
  if (!value.is_number_integer() || value.get<long long>() < 1 ||
      value.get<long long>() > (1 << 24))
    fail(path, "expected a positive integer, got " + describe(value));
  return value.get<int>();
}

const json& member(const json& root, const char* key) {
  if (!root.contains(key)) fail(key, "missing");
  return root.at(key);
}

void expectArray(const json& value, const std::string& path, std::size_t size, const char* what) {
  if (!value.is_array())
    fail(path, fmt::format("expected an array of {} {}, got {}", size, what, describe(value)));
  if (value.size() != size)
    fail(path, fmt::format("expected {} {}, got {}", size, what, value.size()));
}

void rejectUnknownKeys(const json& root) {
  static constexpr std::array<std::string_view, 6> kKeys = {
      "layers", "microbatches", "cluster", "submeshes", "cost", "max_n_succ_stages"};
  for (const auto& [key, value] : root.items())
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end())
      fail(key,
           "unknown key (expected layers, microbatches, cluster, submeshes, cost, "
           "max_n_succ_stages)");
}

std::vector<SubmeshShape> parseSubmeshes(const json& value) {
  if (!value.is_array() || value.empty())
    fail("submeshes", "expected a non-empty array of [n, m] shapes, got " + describe(value));
  std::vector<SubmeshShape> shapes;
  for (std::size_t s = 0; s < value.size(); ++s) {
    std::string path = indexed("submeshes", s);
    expectArray(value[s], path, 2, "integers [n, m]");
    shapes.push_back(
        {positiveInt(value[s][0], path + "[0]"), positiveInt(value[s][1], path + "[1]")});
  }
  return shapes;
}

// The number of configs G is whatever cost[0][0][0] holds; every other
// innermost array must agree with it.
int configCount(const json& cost) {
  const json* leaf = &cost;
  for (int depth = 0; depth < 3 && leaf->is_array() && !leaf->empty(); ++depth) leaf = &(*leaf)[0];
  if (!leaf->is_array() || leaf->empty())
    fail("cost[0][0][0]", "expected a non-empty array of config entries, got " + describe(*leaf));
  return static_cast<int>(leaf->size());
}

// Walks a [L][L][S][G] nested array, checking every level's length, and hands
// each leaf with its flat index to `readLeaf`.
template <typename ReadLeaf>
void walkTable(const json& table, const std::string& name, const StageProblem& p,
               ReadLeaf readLeaf) {
  expectArray(table, name, p.layers, "layer entries (i)");
  for (int i = 0; i < p.layers; ++i) {
    std::string pathI = indexed(name, i);
    expectArray(table[i], pathI, p.layers, "layer entries (j)");
    for (int j = 0; j < p.layers; ++j) {
      std::string pathJ = indexed(pathI, j);
      expectArray(table[i][j], pathJ, p.submeshes.size(), "submesh entries");
      for (std::size_t s = 0; s < p.submeshes.size(); ++s) {
        std::string pathS = indexed(pathJ, s);
        expectArray(table[i][j][s], pathS, p.configs, "config entries");
        for (int g = 0; g < p.configs; ++g)
          readLeaf(table[i][j][s][g], indexed(pathS, g), p.index(i, j, static_cast<int>(s), g));
      }
    }
  }
}

double parseCost(const json& value, const std::string& path) {
  if (value.is_null()) return StageProblem::kInfeasible;
  if (!value.is_number() || value.get<double>() < 0)
    fail(path, "expected a latency >= 0 or null, got " + describe(value));
  return value.get<double>();
}

int parseLimit(const json& value, const std::string& path) {
  if (value.is_null()) return StageProblem::kUnlimited;
  if (!value.is_number_integer())
    fail(path, "expected an integer or null (unlimited), got " + describe(value));
  long long k = value.get<long long>();
  // Anything at least L is as good as unlimited: a stage never has L successors.
  return static_cast<int>(std::clamp<long long>(k, -1, 1 << 24));
}

json tableToJson(const StageProblem& p, auto leaf) {
  json table = json::array();
  for (int i = 0; i < p.layers; ++i) {
    json row = json::array();
    for (int j = 0; j < p.layers; ++j) {
      json bySubmesh = json::array();
      for (std::size_t s = 0; s < p.submeshes.size(); ++s) {
        json byConfig = json::array();
        for (int g = 0; g < p.configs; ++g)
          byConfig.push_back(j < i ? json(nullptr) : leaf(p.index(i, j, static_cast<int>(s), g)));
        bySubmesh.push_back(std::move(byConfig));
      }
      row.push_back(std::move(bySubmesh));
    }
    table.push_back(std::move(row));
  }
  return table;
}

}  // namespace

StageProblem parseStageProblem(const json& root) {
  if (!root.is_object()) fail("(root)", "expected an object, got " + describe(root));
  rejectUnknownKeys(root);
  StageProblem p;
  p.layers = positiveInt(member(root, "layers"), "layers");
  p.microbatches = positiveInt(member(root, "microbatches"), "microbatches");
  const json& cluster = member(root, "cluster");
  expectArray(cluster, "cluster", 2, "integers [N, M]");
  p.nodes = positiveInt(cluster[0], "cluster[0]");
  p.devicesPerNode = positiveInt(cluster[1], "cluster[1]");
  p.submeshes = parseSubmeshes(member(root, "submeshes"));
  const json& cost = member(root, "cost");
  p.configs = configCount(cost);
  // The shape before the allocation: "layers": 65536 over a few entries would
  // otherwise ask for L·L·S·G doubles (hundreds of GB) before failing.
  walkTable(cost, "cost", p, [](const json&, const std::string&, std::size_t) {});
  p.cost.assign(p.tableSize(), StageProblem::kInfeasible);
  walkTable(cost, "cost", p, [&](const json& v, const std::string& path, std::size_t at) {
    p.cost[at] = parseCost(v, path);
  });
  if (root.contains("max_n_succ_stages") && !root.at("max_n_succ_stages").is_null()) {
    p.maxSuccStages.assign(p.tableSize(), StageProblem::kUnlimited);
    walkTable(root.at("max_n_succ_stages"), "max_n_succ_stages", p,
              [&](const json& v, const std::string& path, std::size_t at) {
                p.maxSuccStages[at] = parseLimit(v, path);
              });
  }
  validateStageProblem(p);
  return p;
}

StageProblem parseStageProblemText(std::string_view text) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    // json::exception, not only parse_error: a number too large for a double
    // (1e400) is an out_of_range.
    throw StageError(fmt::format("invalid JSON: {}", e.what()));
  }
  return parseStageProblem(root);
}

json stageProblemToJson(const StageProblem& p) {
  json out;
  out["layers"] = p.layers;
  out["microbatches"] = p.microbatches;
  out["cluster"] = {p.nodes, p.devicesPerNode};
  out["submeshes"] = json::array();
  for (SubmeshShape s : p.submeshes) out["submeshes"].push_back({s.nodes, s.devicesPerNode});
  out["cost"] = tableToJson(p, [&](std::size_t at) {
    return p.cost[at] == StageProblem::kInfeasible ? json(nullptr) : json(p.cost[at]);
  });
  if (!p.maxSuccStages.empty())
    out["max_n_succ_stages"] = tableToJson(p, [&](std::size_t at) {
      int k = p.maxSuccStages[at];
      return k == StageProblem::kUnlimited ? json(nullptr) : json(k);
    });
  return out;
}

json stageSolutionToJson(const StageSolution& solution) {
  json stages = json::array();
  for (const Stage& s : solution.stages)
    stages.push_back(
        {{"layers", {s.firstLayer, s.endLayer}}, {"submesh", s.submesh}, {"config", s.config}});
  return {{"cost", solution.cost}, {"stages", std::move(stages)}, {"optimal", solution.optimal}};
}

}  // namespace meshflow::passes
