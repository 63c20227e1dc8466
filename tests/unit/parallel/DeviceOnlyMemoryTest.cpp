// Tensors in memory the host cannot address (the cuda backend's device memory,
// MESHFLOW_CUDA_MEMORY=device), proven on the CPU: a memory whose blocks claim
// to be device-only and poison whichever copy goes stale, and kernels that
// work on the blocks themselves (Tensor::DeviceViewScope), as a GPU's do. The
// executor's host-side code (gradient sums, reshards, the communicator,
// optimizer bookkeeping, checkpoints of state) then reads and writes the
// host's copies; a training step must give the cpu backend's bits.
#include <atomic>

#include "ParallelModels.h"
#include "runtime/KernelBackend.h"
#include "runtime/cpu/LocalCluster.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

// Heap blocks that say the host cannot address them: copies counted, stale copies poisoned.
class DeviceOnlyBlocks final : public runtime::BlockSource {
 public:
  void* allocate(std::size_t bytes) override { return ::operator new(bytes, std::align_val_t{64}, std::nothrow); }
  void free(void* data, std::size_t) override { ::operator delete(data, std::align_val_t{64}); }
  std::string name() const override { return "device-only test memory"; }
  bool hostVisible() const override { return false; }
  int place() const override { return 0; }
  bool poisonsStaleCopies() const override { return true; }
  void copyToHost(void* host, const void* block, std::size_t bytes) override {
    ++toHost;
    toHostBytes += static_cast<std::int64_t>(bytes);
    runtime::BlockSource::copyToHost(host, block, bytes);
  }
  void copyFromHost(void* block, const void* host, std::size_t bytes) override {
    ++fromHost;
    fromHostBytes += bytes;
    runtime::BlockSource::copyFromHost(block, host, bytes);
  }
  void copyBlocks(void* to, const void* from, std::size_t bytes) override {
    ++betweenBlocks;
    betweenBytes += bytes;
    runtime::BlockSource::copyBlocks(to, from, bytes);
  }
  static inline std::atomic<int> toHost{0}, fromHost{0}, betweenBlocks{0};
  static inline std::atomic<std::int64_t> toHostBytes{0}, fromHostBytes{0}, betweenBytes{0};
};

std::shared_ptr<runtime::DeviceMemory> deviceOnlyMemory(int device) {
  return std::make_shared<runtime::DeviceMemory>(device, 0, std::make_unique<DeviceOnlyBlocks>());
}

// The cpu kernels on the blocks: the "device" of this memory.
class BlockKernels final : public runtime::KernelBackend {
 public:
  void run(const ir::Op& op, const std::vector<const runtime::Tensor*>& in, std::vector<runtime::Tensor*>& out,
           const runtime::cpu::KernelContext& ctx) override {
    runtime::Tensor::DeviceViewScope blocks;
    runtime::cpu::runKernel(op, in, out, ctx);
  }
  bool copy(const runtime::cpu::StridedCopy& c) override {
    runtime::Tensor::DeviceViewScope blocks;
    runtime::cpu::runStridedCopy(c);
    return true;
  }
};

class DeviceOnlyHost final : public runtime::DeviceHost {
 public:
  explicit DeviceOnlyHost(int devices) : cluster_({devices}) {}
  bool runsHere(int device) const override { return cluster_.runsHere(device); }
  runtime::Communicator& communicator(int device) override { return cluster_.communicator(device); }
  runtime::cpu::CoreGate* cores() override { return nullptr; }
  void run(const std::function<void(int)>& body) override {
    cluster_.run([&](int device) {
      runtime::KernelScope scope(&kernels_);
      body(device);
    });
  }
  std::shared_ptr<runtime::DeviceMemory> makeMemory(int device, std::int64_t) override {
    return deviceOnlyMemory(device);
  }

 private:
  runtime::cpu::LocalCluster cluster_;
  BlockKernels kernels_;
};

RunResult runDeviceOnly(const passes::TrainingGraph& training, const runtime::ParallelPlan& plan, int devices) {
  runtime::ParallelOptions options = optionsFor(8);
  options.devices = devices;
  return runParallel(training, plan, options, 2, 5, std::make_unique<DeviceOnlyHost>(devices));
}

void requireSameBits(const RunResult& a, const RunResult& b) {
  REQUIRE(a.losses == b.losses);
  for (const auto& [name, tensor] : b.state) {
    INFO(name);
    REQUIRE(a.state.at(name).bitEqual(tensor));
  }
}

// Bytes a step copies between the host and the device-only blocks.
struct StepCopies {
  std::int64_t toHost = 0, fromHost = 0;
};

// Three steps of `plan` on `devices` device-only devices: what each step after
// the first copied (the first uploads the initial state).
std::vector<StepCopies> copiesAfterFirstStep(const passes::TrainingGraph& training, const runtime::ParallelPlan& plan,
                                             int devices) {
  runtime::ParallelOptions options = optionsFor(8);
  options.devices = devices;
  runtime::ParallelTrainer trainer(training, plan, options, std::make_unique<DeviceOnlyHost>(devices));
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 5, state);
  trainer.setState(state);
  auto data = runtime::syntheticData(5);
  std::vector<StepCopies> copies;
  for (int step = 1; step <= 3; ++step) {
    const std::int64_t toHost = DeviceOnlyBlocks::toHostBytes, fromHost = DeviceOnlyBlocks::fromHostBytes;
    trainer.step(data->batch(training.graph, options.batch, step - 1), step);
    if (step > 1)
      copies.push_back({DeviceOnlyBlocks::toHostBytes - toHost, DeviceOnlyBlocks::fromHostBytes - fromHost});
  }
  return copies;
}

}  // namespace

TEST_CASE("a device-only tensor: host writes reach the block, kernel writes reach the host", "[parallel][device-memory]") {
  auto memory = deviceOnlyMemory(0);
  runtime::MemoryScope scope(memory, runtime::MemoryCategory::kActivations);
  runtime::Tensor t = runtime::Tensor::fromF32({4}, {1, 2, 3, 4});  // written on the host
  const int uploads = DeviceOnlyBlocks::fromHost;
  const auto* block = static_cast<const float*>(std::as_const(t).deviceData());
  CHECK(DeviceOnlyBlocks::fromHost == uploads + 1);
  CHECK(block[2] == 3.0f);
  std::as_const(t).deviceData();  // already current: no copy
  CHECK(DeviceOnlyBlocks::fromHost == uploads + 1);
  static_cast<float*>(t.deviceData())[1] = 20.0f;  // a kernel writes the block
  const int downloads = DeviceOnlyBlocks::toHost;
  CHECK(std::as_const(t).f32()[1] == 20.0f);
  CHECK(DeviceOnlyBlocks::toHost == downloads + 1);
  t.f32()[0] = 10.0f;  // the host writes: the block is stale (poisoned) until asked for
  CHECK(std::isnan(block[3]));
  CHECK(static_cast<const float*>(std::as_const(t).deviceData())[0] == 10.0f);
  CHECK(block[3] == 4.0f);
}

TEST_CASE("copies of device-only tensors copy the current elements", "[parallel][device-memory]") {
  auto memory = deviceOnlyMemory(0);
  runtime::MemoryScope scope(memory, runtime::MemoryCategory::kActivations);
  runtime::Tensor t = runtime::Tensor::fromF32({3}, {1, 2, 3});
  static_cast<float*>(t.deviceData())[2] = 30.0f;
  const int between = DeviceOnlyBlocks::betweenBlocks;
  runtime::Tensor copy = t.clone();  // the block is current: a block-to-block copy
  CHECK(DeviceOnlyBlocks::betweenBlocks == between + 1);
  CHECK(copy.f32()[2] == 30.0f);
  runtime::Tensor shared = t;  // copy on write: writing one leaves the other as it was
  shared.f32()[0] = -1.0f;
  CHECK(t.f32()[0] == 1.0f);
  CHECK(std::as_const(shared).f32()[0] == -1.0f);
  runtime::Tensor zeros(ir::DType::F32, {5});  // zeroed on the host, seen on the device
  CHECK(static_cast<const float*>(std::as_const(zeros).deviceData())[4] == 0.0f);
  // Heap tensors are their own device data (the host's memory).
  runtime::MemoryScope heapScope(nullptr, runtime::MemoryCategory::kActivations);
  runtime::Tensor heap = runtime::Tensor::fromF32({1}, {7});
  CHECK(std::as_const(heap).deviceData() == std::as_const(heap).raw().data());
}

TEST_CASE("device-only memory hands blocks only to a memory of its place", "[parallel][device-memory]") {
  auto a = deviceOnlyMemory(0), b = deviceOnlyMemory(1);
  runtime::DeviceMemory host(2, 0);
  CHECK(a->canHandBlocksTo(*b));
  CHECK_FALSE(a->canHandBlocksTo(host));
  CHECK_FALSE(host.canHandBlocksTo(*a));
  runtime::Tensor t;
  {
    runtime::MemoryScope scope(a, runtime::MemoryCategory::kActivations);
    t = runtime::Tensor::fromF32({2}, {5, 6});
  }
  auto hostMemory = std::make_shared<runtime::DeviceMemory>(2, 0);
  t.moveInto(hostMemory, runtime::MemoryCategory::kCommunication);  // copied into the heap memory
  CHECK(t.memory() == hostMemory.get());
  CHECK(a->stats().allocated == 0);
  CHECK(t.f32()[1] == 6.0f);
}

TEST_CASE("a pipelined, replicated step on device-only memory gives the cpu backend's bits", "[parallel][device-memory]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelPlan plan = twoStagesTwoReplicas(forward);
  runtime::ParallelOptions options = optionsFor(8);
  options.devices = 4;
  const int downloads = DeviceOnlyBlocks::toHost;
  RunResult blocks = runDeviceOnly(training, plan, 4);
  CHECK(DeviceOnlyBlocks::toHost > downloads);  // the host read what kernels wrote (losses, sums, messages)
  requireSameBits(blocks, runParallel(training, plan, options, 2, 5));
}

TEST_CASE("tensor-parallel steps on device-only memory give the cpu backend's bits", "[parallel][device-memory]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  std::mt19937 rng(11);
  for (int round = 0; round < 4; ++round) {
    runtime::ParallelPlan plan = twoByTwoMesh(forward, rng, 1 + round % 2);
    runtime::ParallelOptions options = optionsFor(8);
    options.devices = 4;
    INFO("round " << round);
    requireSameBits(runDeviceOnly(training, plan, 4), runParallel(training, plan, options, 2, 5));
  }
}

TEST_CASE("a GPT with recomputation and sharded optimizer state on device-only memory gives the cpu backend's bits",
          "[parallel][device-memory]") {
  ir::Graph forward = traceModel("", "gpt(layers = 2, hidden = 16, heads = 2, seq = 8, vocab = 24)");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelPlan plan = twoStagesTwoReplicas(forward);
  plan.recompute = {passes::Recompute::kFull, passes::Recompute::kSelective};
  plan.shardOptimizer = {true, true};
  runtime::ParallelOptions options = optionsFor(8);
  options.devices = 4;
  requireSameBits(runDeviceOnly(training, plan, 4), runParallel(training, plan, options, 2, 5));
}

TEST_CASE("after its first step, a bf16 GPT on device-only memory copies only its losses and scalars to the host",
          "[parallel][device-memory]") {
  // The gradients' scaling over microbatches and the optimizer's in-place
  // state stay on the device: a host loop over a gradient, or a host view
  // taken to unshare a state tensor, would copy it there and back every step
  // (a GPU's whole model state, 1.2 s a step for gpt_350m on an H200).
  ir::Graph forward = traceModel("", "gpt(layers = 2, hidden = 64, heads = 2, seq = 16, vocab = 96, dtype = bf16)");
  passes::OptimizerConfig optimizer = passes::OptimizerConfig::adam();
  // Clipping sums the gradients' squares on the device too: only scalars
  // cross (the sum for the all-reduce, the norm and the clip scale).
  std::int64_t scalarBytes = 0;
  SECTION("without clipping") {}
  SECTION("with clipping") {
    optimizer.clipNorm = 1.0;
    scalarBytes = 64;
  }
  auto training = passes::buildTrainingGraph(forward, optimizer);
  runtime::ParallelPlan plan;
  plan.virtualStages = 1;
  plan.stageOfForwardOp = evenStages(forward, 1);
  plan.rankDevices = {{0}};
  plan.schedule = "1f1b";
  plan.microbatches = 2;  // a gradient scale of 1/2
  for (const StepCopies& c : copiesAfterFirstStep(training, plan, 1)) {
    CHECK(c.toHost <= 4 * plan.microbatches + scalarBytes);  // the microbatches' losses
    CHECK(c.toHost >= 4 * plan.microbatches);
    CHECK(c.fromHost <= scalarBytes);
  }
}

TEST_CASE("multi-device plans on device-only memory copy only small tensors to the host after their first step",
          "[parallel][device-memory]") {
  // Pipelines with replicas, a sharded optimizer state and a tensor-parallel
  // mesh: their messages, collectives, flat shards and reshards stay on the
  // devices (strided copies through runtime::runCopy). What still crosses is
  // small: losses, the norms, a new partial sum's zeros (16 KiB at most a
  // step here; the model's state alone is 1.6 MB — before, a step of the
  // sharded optimizer copied 5.9 MB to the host and the 2 x 2 mesh 32 MB).
  ir::Graph forward = traceModel("", "gpt(layers = 2, hidden = 64, heads = 2, seq = 16, vocab = 96, dtype = bf16)");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelPlan plan = twoStagesTwoReplicas(forward);
  SECTION("2 stages x 2 replicas") {}
  SECTION("sharded optimizer state") { plan.shardOptimizer = {true, true}; }
  SECTION("a 2 x 2 tensor-parallel mesh") {
    std::mt19937 rng(11);
    plan = twoByTwoMesh(forward, rng, 1);
  }
  for (const StepCopies& c : copiesAfterFirstStep(training, plan, 4)) {
    CHECK(c.toHost <= 16 << 10);
    CHECK(c.fromHost <= 16 << 10);
  }
}
