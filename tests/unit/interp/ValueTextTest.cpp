// The text of nested lists and records (interp/Object.cpp) equals a plain
// recursive printer's on random graphs of containers — shared items, items
// that hold their container, chains past the print depth — although it makes
// each container's text into one buffer and copies an item's text where the
// same object was printed just before beside it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "interp/Object.h"
#include "meshflow/Value.h"

namespace {

using meshflow::Value;
using meshflow::interp::kMaxReprDepth;
using meshflow::interp::ListObject;
using meshflow::interp::Object;
using meshflow::interp::RecordObject;

// The rules spelled out once more, item by item: a container met again
// inside itself, or deeper than kMaxReprDepth, prints as [...] / {...}.
std::string plainText(const Value& value, int depth, std::vector<const Object*>& around) {
  const Object* object = value.object().get();
  const auto* list = dynamic_cast<const ListObject*>(object);
  const auto* record = dynamic_cast<const RecordObject*>(object);
  if (!list && !record) return value.repr(depth);
  const bool inside = std::find(around.begin(), around.end(), object) != around.end();
  if (inside || depth > kMaxReprDepth) return list ? "[...]" : "{...}";
  around.push_back(object);
  std::string out = list ? "[" : "{";
  if (list)
    for (std::size_t i = 0; i < list->items.size(); ++i)
      out += (i ? ", " : "") + plainText(list->items[i], depth + 1, around);
  else
    for (std::size_t i = 0; i < record->fields.size(); ++i)
      out += (i ? ", " : "") + record->fields[i].first + ": " +
             plainText(record->fields[i].second, depth + 1, around);
  around.pop_back();
  return out + (list ? "]" : "}");
}

std::string plainText(const Value& value) {
  std::vector<const Object*> around;
  return plainText(value, 0, around);
}

// Containers whose items are numbers, strings or other containers of the
// set, chosen at random: shared, repeated side by side, cyclic.
struct Graph {
  std::vector<Value> nodes;
  ~Graph() {  // the cycles would otherwise keep them alive
    for (Value& node : nodes) node.object()->clearReferences();
  }
};

void fill(Graph& g, std::mt19937& rng) {
  std::uniform_int_distribution<int> nodes(1, 7), items(0, 5), pick(0, 9);
  const int n = nodes(rng);
  for (int i = 0; i < n; ++i)
    g.nodes.push_back(i % 3 == 2 ? Value::record({}) : Value::list({}));
  for (Value& node : g.nodes) {
    const int count = items(rng);
    for (int j = 0; j < count; ++j) {
      const int choice = pick(rng);
      Value item = choice < 2   ? Value::integer(choice)
                   : choice < 3 ? Value::string("s")
                                : g.nodes[static_cast<std::size_t>(choice) % g.nodes.size()];
      if (auto* list = dynamic_cast<ListObject*>(node.object().get()))
        list->items.push_back(item);
      else
        static_cast<RecordObject*>(node.object().get())->fields.emplace_back("f" + std::to_string(j), item);
    }
  }
}

}  // namespace

TEST_CASE("the text of random container graphs is the plain printer's", "[values][text]") {
  std::mt19937 rng(20261128);
  for (int round = 0; round < 400; ++round) {
    Graph g;
    fill(g, rng);
    for (const Value& node : g.nodes) REQUIRE(node.repr() == plainText(node));
  }
}

TEST_CASE("a list holding one list many times over, past the print depth", "[values][text]") {
  Value chain = Value::list({Value::integer(1)});
  for (int i = 0; i < 40; ++i) chain = Value::list({chain});  // cut at depth 32
  Value top = chain;
  for (int i = 0; i < 6; ++i) top = Value::list({top, top, Value::integer(2), top});
  const std::string text = top.repr();
  CHECK(text == plainText(top));
  CHECK(text.find("[...]") != std::string::npos);
}
