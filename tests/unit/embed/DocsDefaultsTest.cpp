// docs/embedding.md states Config's defaults; this keeps it true to the header.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <string>

#include "meshflow/meshflow.h"

namespace meshflow {
namespace {

// 100000000 -> "100 000 000", as the documentation writes large numbers.
std::string grouped(std::uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ' ';
    out += digits[i];
  }
  return out;
}

TEST_CASE("docs/embedding.md gives the header's default limits", "[embed][docs]") {
  std::ifstream in(std::string(MESHFLOW_SOURCE_DIR) + "/docs/embedding.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  Limits limits;
  REQUIRE(limits.maxMemoryBytes % (std::size_t{1} << 30) == 0);
  std::string row = grouped(limits.maxSteps) + ", " + std::to_string(limits.maxCallDepth) + ", " +
                    std::to_string(limits.maxMemoryBytes >> 30) + " GiB, " +
                    fmt::format("{:g}", limits.timeBudgetSeconds) + " |";
  CHECK(text.str().find(row) != std::string::npos);
}

}  // namespace
}  // namespace meshflow
