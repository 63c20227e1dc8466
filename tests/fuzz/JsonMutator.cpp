#include "tests/fuzz/JsonMutator.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t maxSize);

namespace meshflow::fuzz {
namespace {

using nlohmann::json;
using Random = std::minstd_rand;

// Numbers at the edges readers get wrong: signs, int32/int64/double limits,
// and sizes that would allocate terabytes.
const std::vector<json>& boundaryNumbers() {
  static const std::vector<json> numbers = {
      0, 1, -1, 2, 3, 7, 8, 64, 255, 256, 65536, std::numeric_limits<std::int32_t>::max(),
      std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1,
      std::numeric_limits<std::int32_t>::min(), std::int64_t{1} << 40,
      std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(),
      std::numeric_limits<std::uint64_t>::max(), 0.5, -0.5, 1e-300, 1e300, -1e300, 1.5e19,
      std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min()};
  return numbers;
}

void collect(json& node, std::vector<json*>& nodes) {
  nodes.push_back(&node);
  if (node.is_structured())
    for (auto& child : node) collect(child, nodes);
}

// n + step, wrapping at the int64 limits instead of overflowing.
json stepped(const json& number, std::int64_t step) {
  if (!number.is_number_integer()) return json(step);
  return json(static_cast<std::int64_t>(static_cast<std::uint64_t>(number.get<std::int64_t>()) +
                                        static_cast<std::uint64_t>(step)));
}

json mutatedNumber(const json& number, Random& random) {
  const auto& numbers = boundaryNumbers();
  switch (random() % 4) {
    case 0: return numbers[random() % numbers.size()];
    case 1: return stepped(number, 1);
    case 2: return stepped(number, -1);
    default: return number.is_number() ? json(number.get<double>() * 1024) : json(1024);
  }
}

json anotherType(Random& random) {
  static const std::vector<json> values = {nullptr, true,  false, 0, -1, "",
                                           "x",     json::array(), json::object()};
  return values[random() % values.size()];
}

void mutateStructure(json& node, const std::vector<json*>& nodes, Random& random) {
  if (node.is_array() && !node.empty()) {
    const std::size_t at = random() % node.size();
    switch (random() % 3) {
      case 0: node.erase(at); return;
      case 1: {
        json copy = node[at];  // a copy: inserting may move the element
        node.insert(node.begin() + static_cast<std::ptrdiff_t>(at), std::move(copy));
        return;
      }
      default: {
        json copy = *nodes[random() % nodes.size()];  // perhaps node itself
        node.push_back(std::move(copy));
        return;
      }
    }
  }
  if (node.is_object() && !node.empty()) {
    auto it = node.begin();
    std::advance(it, random() % node.size());
    if (random() % 2) {
      node.erase(it);
    } else {
      json copy = *nodes[random() % nodes.size()];
      it.value() = std::move(copy);
    }
  }
}

// One change to one node of the tree.
void mutateTree(json& root, Random& random) {
  std::vector<json*> nodes;
  collect(root, nodes);
  json& node = *nodes[random() % nodes.size()];
  switch (random() % 6) {
    case 0:
      if (node.is_number()) {
        node = mutatedNumber(node, random);
        return;
      }
      [[fallthrough]];
    case 1:
      if (node.is_string()) {
        node = mutateBytes(node.get<std::string>(), 64);
        return;
      }
      [[fallthrough]];
    case 2: mutateStructure(node, nodes, random); return;
    case 3: node = anotherType(random); return;
    case 4: node = json(*nodes[random() % nodes.size()]); return;  // a copy of any subtree
    default: node = mutatedNumber(node, random); return;
  }
}

}  // namespace

std::string mutateBytes(std::string text, std::size_t maxSize) {
  const std::size_t size = std::min(text.size(), maxSize);
  text.resize(maxSize);
  const std::size_t mutated =
      LLVMFuzzerMutate(reinterpret_cast<std::uint8_t*>(text.data()), size, maxSize);
  text.resize(mutated);
  return text;
}

std::string mutateJson(const std::string& text, std::size_t maxSize, unsigned seed) {
  Random random(seed);
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  // A tenth of the time, and whenever the input is not JSON, bytes: the readers'
  // handling of malformed text is fuzzed too.
  if (root.is_discarded() || random() % 10 == 0) return mutateBytes(text, maxSize);
  mutateTree(root, random);
  // Strings mutated as bytes may not be UTF-8: printed with replacement characters.
  std::string out = root.dump(random() % 2 ? -1 : 1, ' ', false, json::error_handler_t::replace);
  if (out.size() > maxSize) return mutateBytes(text, maxSize);
  return out;
}

}  // namespace meshflow::fuzz
