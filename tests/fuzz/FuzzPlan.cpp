// libFuzzer target: a saved plan file (what `p.save(path)` writes and
// `load_plan(path)` reads), read by ir::planFileFromJson, then shown, its
// memory tabled and exported as a loaded plan would be. A PlanError is the
// expected outcome of a bad file; a crash, an escaped exception or a file that
// does not save back to itself is a bug.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "ir/PlanFile.h"
#include "ir/PlanMemory.h"
#include "tests/fuzz/FuzzCheck.h"

namespace {

using namespace meshflow;

// What a script can do with a loaded plan without simulating or training it.
void useLoadedPlan(const ir::Plan& plan) {
  ir::planTable(plan);
  ir::memoryTable(plan);
  ir::megatronFlags(plan);
  ir::deepspeedConfig(plan);
  ir::pytorchPipeline(plan);
  ir::jaxPartitionSpecs(plan);
  ir::alpaSpecs(plan);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  ir::PlanFile file;
  try {
    file = ir::planFileFromJson(json);
  } catch (const ir::PlanError&) {
    return 0;
  }
  // Saved again and read back (through text, as a file is), the file is the same.
  const nlohmann::json saved = ir::planFileToJson(file);
  const ir::PlanFile back = ir::planFileFromJson(nlohmann::json::parse(saved.dump()));
  fuzz::require(back.plan == file.plan && ir::planFileToJson(back) == saved,
                "a read plan file saves and reads back the same");
  useLoadedPlan(file.plan);
  return 0;
}
