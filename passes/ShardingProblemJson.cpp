#include "passes/ShardingProblemJson.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace meshflow::passes {

namespace {

using nlohmann::json;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw ShardingError(fmt::format("{}: {}", where, what));
}

// Unknown keys are errors: a misspelt "memory_budget" silently ignored would
// solve a different problem from the one the user meant.
void onlyKeys(const json& object, std::initializer_list<const char*> allowed,
              const std::string& where) {
  if (!object.is_object()) fail(where, "expected an object");
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) fail(where, fmt::format("unknown key \"{}\"", key));
  }
}

const json& member(const json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) fail(where, fmt::format("missing \"{}\"", key));
  return *it;
}

double cost(const json& value, const std::string& where) {
  if (!value.is_number()) fail(where, "expected a number");
  double v = value.get<double>();
  if (!std::isfinite(v) || v < 0) fail(where, "must be finite and non-negative");
  return v;
}

std::vector<double> costList(const json& value, const std::string& where) {
  if (!value.is_array()) fail(where, "expected an array of numbers");
  if (value.empty()) fail(where, "must not be empty");
  std::vector<double> out;
  for (size_t k = 0; k < value.size(); ++k)
    out.push_back(cost(value[k], fmt::format("{}[{}]", where, k)));
  return out;
}

ShardingNode parseNode(const json& value, size_t i) {
  std::string where = fmt::format("nodes[{}]", i);
  onlyKeys(value, {"name", "costs", "memory"}, where);
  const json& name = member(value, "name", where);
  if (!name.is_string()) fail(where + ".name", "expected a string");
  ShardingNode node{
      name.get<std::string>(), costList(member(value, "costs", where), where + ".costs"), {}};
  if (value.contains("memory")) {
    node.memory = costList(value["memory"], where + ".memory");
    if (node.memory.size() != node.costs.size()) {
      fail(where + ".memory", fmt::format("has {} entries but the node has {} strategies",
                                          node.memory.size(), node.costs.size()));
    }
  }
  return node;
}

int nodeIndex(const json& value, size_t nodeCount, const std::string& where) {
  if (!value.is_number_integer()) fail(where, "expected a node index");
  auto v = value.get<int64_t>();
  if (v < 0 || v >= static_cast<int64_t>(nodeCount)) {
    fail(where, fmt::format("node index {} is outside 0..{}", v, int64_t(nodeCount) - 1));
  }
  return static_cast<int>(v);
}

std::vector<double> edgeRow(const json& value, size_t cols, const std::string& where) {
  if (!value.is_array()) fail(where, "expected an array");
  if (value.size() != cols)
    fail(where, fmt::format("has {} entries, expected {}", value.size(), cols));
  std::vector<double> row;
  for (size_t c = 0; c < cols; ++c) {
    const json& v = value[c];
    row.push_back(v.is_null() ? kInfinity : cost(v, fmt::format("{}[{}]", where, c)));
  }
  return row;
}

ShardingEdge parseEdge(const json& value, size_t e, const std::vector<ShardingNode>& nodes) {
  std::string where = fmt::format("edges[{}]", e);
  onlyKeys(value, {"from", "to", "costs"}, where);
  ShardingEdge edge;
  edge.from = nodeIndex(member(value, "from", where), nodes.size(), where + ".from");
  edge.to = nodeIndex(member(value, "to", where), nodes.size(), where + ".to");
  where = fmt::format("edges[{}] ({} -> {}).costs", e, edge.from, edge.to);
  const json& matrix = member(value, "costs", where);
  size_t rows = nodes[edge.from].costs.size(), cols = nodes[edge.to].costs.size();
  if (!matrix.is_array()) fail(where, "expected an array of rows");
  if (matrix.size() != rows) {
    fail(where, fmt::format("has {} rows but node {} '{}' has {} strategies", matrix.size(),
                            edge.from, nodes[edge.from].name, rows));
  }
  for (size_t r = 0; r < rows; ++r) {
    edge.costs.push_back(edgeRow(matrix[r], cols, fmt::format("{}[{}]", where, r)));
  }
  return edge;
}

// Printing keeps keys in the documented order, so output diffs stay readable.
using ordered_json = nlohmann::ordered_json;

ordered_json costJson(double v) {
  return std::isfinite(v) ? ordered_json(v) : ordered_json(nullptr);
}

}  // namespace

ShardingProblem parseShardingProblem(std::string_view text) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    // Not only parse_error: a number too large for a double (1e400) is an out_of_range.
    // nlohmann's message starts with its own exception id, which means nothing to a user.
    std::string what = e.what();
    size_t idEnd = what.find("] ");
    throw ShardingError("malformed JSON: " +
                        what.substr(idEnd == std::string::npos ? 0 : idEnd + 2));
  }
  onlyKeys(root, {"nodes", "edges", "memory_budget"}, "problem");
  const json& nodes = member(root, "nodes", "problem");
  if (!nodes.is_array()) fail("nodes", "expected an array");
  ShardingProblem problem;
  for (size_t i = 0; i < nodes.size(); ++i) problem.nodes.push_back(parseNode(nodes[i], i));
  if (root.contains("edges")) {
    const json& edges = root["edges"];
    if (!edges.is_array()) fail("edges", "expected an array");
    for (size_t e = 0; e < edges.size(); ++e) {
      problem.edges.push_back(parseEdge(edges[e], e, problem.nodes));
    }
  }
  if (root.contains("memory_budget") && !root["memory_budget"].is_null()) {
    problem.memoryBudget = cost(root["memory_budget"], "memory_budget");
  }
  return problem;
}

std::string printShardingProblem(const ShardingProblem& problem) {
  ordered_json nodes = ordered_json::array();
  for (const ShardingNode& n : problem.nodes) {
    ordered_json node = {{"name", n.name}, {"costs", n.costs}};
    if (!n.memory.empty()) node["memory"] = n.memory;
    nodes.push_back(node);
  }
  ordered_json edges = ordered_json::array();
  for (const ShardingEdge& e : problem.edges) {
    ordered_json matrix = ordered_json::array();
    for (const auto& row : e.costs) {
      ordered_json r = ordered_json::array();
      for (double v : row) r.push_back(costJson(v));
      matrix.push_back(r);
    }
    edges.push_back({{"from", e.from}, {"to", e.to}, {"costs", matrix}});
  }
  ordered_json root = {{"nodes", nodes}, {"edges", edges}};
  if (problem.memoryBudget) root["memory_budget"] = *problem.memoryBudget;
  return root.dump();
}

std::string printShardingSolution(const ShardingSolution& solution) {
  ordered_json root = {{"objective", solution.objective},
                       {"choice", solution.choice},
                       {"optimal", solution.optimal},
                       {"bound", solution.lowerBound},
                       {"gap", solution.gap()}};
  return root.dump();
}

}  // namespace meshflow::passes
