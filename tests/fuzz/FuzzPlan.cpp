// libFuzzer target: a saved plan's JSON (what `p.save(path)` writes), read by
// ir::planFromJson, then shown and exported as a read plan would be. A PlanError
// is the expected outcome of a bad file; a crash, an escaped exception or a plan
// that does not save back to itself is a bug.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "ir/Plan.h"
#include "tests/fuzz/FuzzCheck.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace meshflow;
  nlohmann::json json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  ir::Plan plan;
  try {
    plan = ir::planFromJson(json);
  } catch (const ir::PlanError&) {
    return 0;
  }
  // Saved again and read back (through text, as a file is), the plan is the same.
  const nlohmann::json saved = ir::planToJson(plan);
  fuzz::require(ir::planFromJson(nlohmann::json::parse(saved.dump())) == plan,
                "a read plan saves and reads back the same");
  ir::planTable(plan);
  ir::megatronFlags(plan);
  ir::jaxPartitionSpecs(plan);
  ir::alpaSpecs(plan);
  return 0;
}
