// fuzz_make_seeds OUT: writes the seed corpora of the file-format fuzz targets
// into OUT/<target>/, each file written by meshflow's own writers, so the
// seeds stay valid as the formats change. ./dev.sh fuzz runs it before fuzzing.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/PlanFile.h"
#include "meshflow/meshflow.h"
#include "passes/ShardingProblemJson.h"
#include "passes/StageProblemJson.h"
#include "runtime/checkpoint/AtomicFile.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "tests/fuzz/CheckpointBundle.h"

namespace {

namespace fs = std::filesystem;
using namespace meshflow;

void writeFile(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// ---- solve-sharding problems ----

void shardingSeeds(const fs::path& out) {
  const double inf = std::numeric_limits<double>::infinity();
  passes::ShardingProblem chain;
  chain.nodes = {{"embed", {1, 2}, {}}, {"fc1", {3, 1, 2}, {}}, {"fc2", {2, 2}, {}}};
  chain.edges = {{0, 1, {{0, 1, 2}, {1, 0, 1}}}, {1, 2, {{0, 1}, {1, 0}, {2, inf}}}};
  writeFile(out / "chain.json", passes::printShardingProblem(chain));
  passes::ShardingProblem budget = chain;
  budget.nodes[0].memory = {4, 2};
  budget.nodes[1].memory = {6, 3, 2};
  budget.nodes[2].memory = {1, 1};
  budget.edges.push_back({0, 2, {{0, 5}, {5, 0}}});
  budget.memoryBudget = 8;
  writeFile(out / "triangle_budget.json", passes::printShardingProblem(budget));
  passes::ShardingProblem single;
  single.nodes = {{"only", {0.5}, {1}}};
  writeFile(out / "single.json", passes::printShardingProblem(single));
}

// ---- solve-stages problems ----

passes::StageProblem stageProblem(int layers, int microbatches, int devices, int configs) {
  std::vector<passes::SubmeshShape> shapes;
  for (int m = 1; m <= devices; m *= 2) shapes.push_back({1, m});
  auto p = passes::StageProblem::make(layers, microbatches, 1, devices, shapes, configs);
  for (int i = 0; i < layers; ++i)
    for (int j = i; j < layers; ++j)
      for (std::size_t s = 0; s < shapes.size(); ++s)
        for (int g = 0; g < configs; ++g)
          p.at(i, j, static_cast<int>(s), g) = (j - i + 1) * (1.0 + g) / shapes[s].devices();
  return p;
}

void stageSeeds(const fs::path& out) {
  writeFile(out / "three_layers.json", passes::stageProblemToJson(stageProblem(3, 4, 4, 2)).dump());
  auto limited = stageProblem(4, 8, 2, 1);
  limited.maxSuccStages.assign(limited.tableSize(), passes::StageProblem::kUnlimited);
  limited.maxSuccStages[0] = 1;
  limited.at(0, 3, 0, 0) = passes::StageProblem::kInfeasible;
  writeFile(out / "limited.json", passes::stageProblemToJson(limited).dump(1));
}

// ---- saved plans: the planner's own, saved by p.save ----

// A plan lists every op's alternatives and each of its alternatives is a whole
// plan, and each mutation parses and prints the whole file: the planner's
// 100-700 KB plan files fuzz at a few inputs a second. The seeds keep two
// alternatives, a few ops per stage and two alternatives per op, every key intact.
void trimStrategies(nlohmann::json& plan) {
  for (auto& stage : plan.at("stages")) {
    auto& strategies = stage.at("strategies");
    if (strategies.size() > 4) strategies.erase(strategies.begin() + 4, strategies.end());
    for (auto& strategy : strategies) {
      auto& alternatives = strategy.at("alternatives");
      if (alternatives.size() > 2) alternatives.erase(alternatives.begin() + 2, alternatives.end());
    }
  }
}

// A trimmed file is still one load_plan reads (planFileFromJson throws if not):
// seeds that the reader refuses at once would leave the fuzzer testing nothing
// behind its first check.
void trimPlanFile(const fs::path& path) {
  nlohmann::json file = nlohmann::json::parse(std::ifstream(path));
  nlohmann::json& plan = file.at("plan");
  trimStrategies(plan);
  auto& alternatives = plan.at("alternatives");
  if (alternatives.size() > 2) alternatives.erase(alternatives.begin() + 2, alternatives.end());
  for (auto& alternative : alternatives)
    if (alternative.contains("plan")) trimStrategies(alternative.at("plan"));
  ir::planFileFromJson(file);
  writeFile(path, file.dump(1));
}

void planSeeds(const fs::path& out) {
  fs::create_directories(out);
  Config config;
  config.write = [](std::string_view) {};
  config.files.writeRoots = {out.string()};
  Interpreter interpreter(config);
  const std::string script = fmt::format(R"(
import std.models
let tiny = gpt(layers = 3, hidden = 32, heads = 2, seq = 8, vocab = 32)
schedule interleaved {{
  pipeline = "interleaved"
  virtual_stages = 2
  stages = 2
  microbatches = 4
}}
schedule sharded {{
  max_tensor_parallel = 2
  recompute = "selective"
  shard_optimizer = true
}}
plan(tiny, cpu(devices = 2), batch = 4).save("{0}/default.json")
plan(tiny, cpu(devices = 2), batch = 4, schedule = interleaved).save("{0}/interleaved.json")
plan(tiny, cpu(devices = 2), batch = 4, schedule = sharded).save("{0}/sharded.json")
)",
                                         out.string());
  Status status = interpreter.eval(script, "<plan seeds>");
  if (!status) throw std::runtime_error("planning the seed plans: " + renderAll(status.diagnostics));
  for (const char* name : {"default.json", "interleaved.json", "sharded.json"}) trimPlanFile(out / name);
}

// ---- checkpoints ----

runtime::ShardPiece wholePiece(const std::string& name, const runtime::Tensor& tensor) {
  return {name, tensor.shape(), std::vector<std::int64_t>(tensor.rank(), 0), tensor};
}

// The rows [first, first + rows) of a matrix.
runtime::ShardPiece rows(const std::string& name, const runtime::Tensor& whole, std::int64_t first,
                         std::int64_t count) {
  const std::int64_t columns = whole.shape()[1];
  runtime::Tensor block(whole.dtype(), {count, columns});
  const auto size = static_cast<std::int64_t>(ir::dtypeBytes(whole.dtype()));
  std::copy_n(whole.raw().begin() + first * columns * size, count * columns * size,
              block.raw().begin());
  return {name, whole.shape(), {first, 0}, block};
}

// A flat run of a whole tensor's elements, as a sharded optimizer holds it.
runtime::ShardPiece flatRun(const std::string& name, const runtime::Tensor& whole,
                            std::int64_t begin, std::int64_t count) {
  runtime::Tensor run(whole.dtype(), {count});
  const auto size = static_cast<std::int64_t>(ir::dtypeBytes(whole.dtype()));
  std::copy_n(whole.raw().begin() + begin * size, count * size, run.raw().begin());
  return {name, whole.shape(), std::vector<std::int64_t>(whole.rank(), 0), run,
          runtime::FlatRange{whole.shape(), begin}};
}

std::string readBytes(const fs::path& file) {
  const auto bytes = runtime::checkpoint::readWholeFile(file);
  return std::string(bytes.begin(), bytes.end());
}

// The checkpoint `shards` make, written by writeCheckpoint and packed as a bundle.
std::string bundleOf(const std::vector<runtime::DeviceShard>& shards, const fs::path& scratch) {
  fs::remove_all(scratch);
  runtime::writeCheckpoint(scratch, 10, {{"seed", 1}, {"plan", "seed corpus"}}, shards);
  fuzz::CheckpointBundle bundle;
  bundle.latest = readBytes(scratch / "latest");
  const fs::path step = scratch / "step-00000010";
  bundle.meta = readBytes(step / "meta.json");
  for (std::size_t i = 0; fs::exists(step / fuzz::CheckpointBundle::shardName(i)); ++i)
    bundle.shards.push_back(readBytes(step / fuzz::CheckpointBundle::shardName(i)));
  fs::remove_all(scratch);
  return bundle.encode();
}

void checkpointSeeds(const fs::path& out) {
  const fs::path scratch = fs::temp_directory_path() / fmt::format("meshflow-seeds-{}", ::getpid());
  const runtime::Tensor w = runtime::randomNormal({4, 3}, 1);
  const runtime::Tensor bias = runtime::randomNormal({3}, 2);
  const runtime::Tensor position = runtime::randomInts({2}, 0, 100, 3);
  const runtime::Tensor half(ir::DType::F16, {2, 2});
  const runtime::Tensor bfloat(ir::DType::BF16, {3});
  writeFile(out / "one_device.bin",
            bundleOf({{0,
                       {wholePiece("w", w), wholePiece("b", bias), wholePiece("position", position),
                        wholePiece("half", half), wholePiece("bfloat", bfloat)}}},
                     scratch));
  writeFile(out / "two_devices_rows.bin",
            bundleOf({{0, {rows("w", w, 0, 2), wholePiece("b", bias)}},
                      {1, {rows("w", w, 2, 2), wholePiece("b", bias)}}},
                     scratch));
  writeFile(out / "two_devices_flat.bin",
            bundleOf({{0, {flatRun("w.adam_m", w, 0, 5)}}, {1, {flatRun("w.adam_m", w, 5, 7)}}},
                     scratch));
}

// ---- --set values: one word per line ----

void setSeeds(const fs::path& out) {
  const std::vector<std::pair<std::string, std::string>> seeds = {
      {"microbatches", "microbatches=8"},
      {"pipeline", "pipeline=1f1b\nmicrobatches=16"},
      {"interleaved", "pipeline=interleaved\nvirtual_stages=2\nstages=2"},
      {"memory", "memory_per_device=70GB"},
      {"parallel", "max_tensor_parallel=4\ndata_parallel=2"},
      {"recompute", "recompute=full\nshard_optimizer=true"},
      {"optimizer", "optimizer=sgd(momentum = 0.9)"},
      {"auto", "data_parallel=auto\npipeline=auto"},
      {"quoted", "pipeline=\"zbv\""}};
  for (const auto& [name, text] : seeds) writeFile(out / (name + ".txt"), text + "\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds OUT\n");
    return 2;
  }
  const fs::path out = argv[1];
  try {
    shardingSeeds(out / "sharding");
    stageSeeds(out / "stages");
    planSeeds(out / "plan");
    checkpointSeeds(out / "checkpoint");
    setSeeds(out / "set");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
