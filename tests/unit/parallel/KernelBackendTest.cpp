// The seam the cuda backend plugs into (runtime/KernelBackend.h and
// DeviceHost::makeMemory): a host whose device threads hold a KernelScope
// get every kernel of the step — pipelined, replicated and tensor-parallel
// (SpmdRunner) ops alike — and give every device its memory. A backend that
// forwards to the cpu kernels changes no bit of the run.
#include <atomic>

#include "ParallelModels.h"
#include "ScopedKernelsHost.h"
#include "runtime/KernelBackend.h"
#include "runtime/cpu/FusedKernels.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {


enum class Fusing { kNo, kYes, kDeclined };

// The cpu kernels, counted; fusing, the fused groups on the cpu reference
// (runtime/cpu/FusedKernels.h), as the cuda backend runs them, or offered
// and every one declined.
class CountingKernels final : public runtime::KernelBackend {
 public:
  explicit CountingKernels(Fusing fusing = Fusing::kNo) : fusing_(fusing) {}
  bool fuses() const override { return fusing_ != Fusing::kNo; }
  bool runFused(const runtime::FusedGroup& group, const std::vector<const runtime::Tensor*>& in,
                std::vector<runtime::Tensor*>& out, const runtime::cpu::KernelContext&) override {
    if (fusing_ == Fusing::kDeclined || !runtime::cpu::fusable(group, in)) {
      ++declined;
      return false;
    }
    ++fused;
    runtime::cpu::runFused(group, in, out);
    return true;
  }
  void run(const ir::Op& op, const std::vector<const runtime::Tensor*>& in, std::vector<runtime::Tensor*>& out,
           const runtime::cpu::KernelContext& ctx) override {
    ++ops;
    if (runtime::KernelBatch::active()) ++batched;
    runtime::cpu::runKernel(op, in, out, ctx);
  }
  void synchronize() override { ++waits; }
  // Counted and left to the host (runtime::runAttention's fallback).
  bool attention(const runtime::Tensor&, const runtime::Tensor&, const runtime::Tensor&,
                 const runtime::cpu::AttentionOptions&, runtime::cpu::AttentionResult&) override {
    ++attentions;
    return false;
  }
  bool attentionGrad(const runtime::Tensor&, const runtime::Tensor&, const runtime::Tensor&, const runtime::Tensor&,
                     const runtime::Tensor&, const runtime::cpu::AttentionOptions&,
                     runtime::cpu::AttentionGrads&) override {
    ++attentionGrads;
    return false;
  }
  std::atomic<int> ops{0}, batched{0}, waits{0}, fused{0}, declined{0}, attentions{0}, attentionGrads{0};

 private:
  Fusing fusing_;
};

// The cpu backend's devices, each thread with counted kernels of its own.
class ScopedHost final : public ScopedKernelsHost<CountingKernels> {
 public:
  explicit ScopedHost(int devices, Fusing fusing = Fusing::kNo) : ScopedKernelsHost(devices, fusing) {}
  std::shared_ptr<runtime::DeviceMemory> makeMemory(int device, std::int64_t limit) override {
    ++memories;
    return runtime::DeviceHost::makeMemory(device, limit);
  }
  int opsOn(int device) const { return kernels(device).ops; }
  int batchedOn(int device) const { return kernels(device).batched; }
  int waitsOn(int device) const { return kernels(device).waits; }
  int fusedOn(int device) const { return kernels(device).fused; }
  int declinedOn(int device) const { return kernels(device).declined; }
  int attentionsOn(int device) const { return kernels(device).attentions; }
  int attentionGradsOn(int device) const { return kernels(device).attentionGrads; }
  int memories = 0;
};

// A run on a ScopedHost, with what its devices' backends saw.
struct ScopedRun {
  RunResult run;
  std::vector<int> ops, batched, waits, fused, declined;  // per device
  int attentions = 0, attentionGrads = 0;                 // over all devices
  int memories = 0;
};

ScopedRun runScoped(const passes::TrainingGraph& training, const runtime::ParallelPlan& plan, int devices,
                    Fusing fusing = Fusing::kNo) {
  auto owned = std::make_unique<ScopedHost>(devices, fusing);
  ScopedHost* host = owned.get();
  runtime::ParallelOptions options = optionsFor(8);
  options.devices = devices;
  runtime::ParallelTrainer trainer(training, plan, options, std::move(owned));  // owns the host: read it before it goes
  ScopedRun r;
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 5, state);
  trainer.setState(state);
  auto data = runtime::syntheticData(5);
  for (int step = 1; step <= 2; ++step) {
    const auto result = trainer.step(data->batch(training.graph, 8, step - 1), step);
    r.run.losses.push_back(result.loss);
    r.run.moeDropped.push_back(result.moeDropped);
  }
  r.run.state = trainer.state();
  for (int d = 0; d < devices; ++d) {
    r.ops.push_back(host->opsOn(d));
    r.batched.push_back(host->batchedOn(d));
    r.waits.push_back(host->waitsOn(d));
    r.fused.push_back(host->fusedOn(d));
    r.declined.push_back(host->declinedOn(d));
    r.attentions += host->attentionsOn(d);
    r.attentionGrads += host->attentionGradsOn(d);
  }
  r.memories = host->memories;
  return r;
}

}  // namespace

namespace {

// relu([-1, 2]) through runtime::runKernel, on whatever backend the thread has.
struct ReluCall {
  ReluCall() { relu.kind = ir::OpKind::Relu; }
  void run() { runtime::runKernel(relu, in, out, {}); }
  ir::Op relu;
  runtime::Tensor x = runtime::Tensor::fromF32({2}, {-1.0f, 2.0f});
  runtime::Tensor y;
  std::vector<const runtime::Tensor*> in{&x};
  std::vector<runtime::Tensor*> out{&y};
};

}  // namespace

TEST_CASE("a KernelScope runs the thread's kernels; scopes nest", "[parallel][backend]") {
  CountingKernels outer, inner;
  ReluCall call;
  call.run();
  CHECK(call.y.f32()[1] == 2.0f);
  {
    runtime::KernelScope a(&outer);
    call.run();
    {
      runtime::KernelScope b(&inner);
      call.run();
    }
    call.run();
  }
  call.run();
  CHECK(outer.ops == 2);
  CHECK(inner.ops == 1);
  CHECK(runtime::KernelScope::current() == nullptr);
}

namespace {

class FailingWait final : public runtime::KernelBackend {
 public:
  void run(const ir::Op& op, const std::vector<const runtime::Tensor*>& in, std::vector<runtime::Tensor*>& out,
           const runtime::cpu::KernelContext& ctx) override {
    runtime::cpu::runKernel(op, in, out, ctx);
  }
  void synchronize() override { throw std::runtime_error("the stream failed"); }
};

}  // namespace

TEST_CASE("a KernelBatch waits for the thread's backend once, when the outermost batch ends", "[parallel][backend]") {
  CountingKernels kernels;
  ReluCall call;
  runtime::KernelScope scope(&kernels);
  CHECK_FALSE(runtime::KernelBatch::active());
  {
    runtime::KernelBatch outer;
    {
      runtime::KernelBatch inner;
      call.run();
    }
    CHECK(kernels.waits == 0);  // the inner batch's end is not the outer's
    call.run();
    CHECK(runtime::KernelBatch::active());
  }
  CHECK(kernels.waits == 1);
  CHECK(kernels.batched == 2);
  CHECK_FALSE(runtime::KernelBatch::active());
  call.run();
  CHECK(kernels.batched == 2);  // outside a batch
  // finish() reports what the wait reports; the destructor never throws.
  FailingWait failing;
  runtime::KernelScope failingScope(&failing);
  {
    runtime::KernelBatch batch;
    CHECK_THROWS_WITH(batch.finish(), "the stream failed");
    CHECK_FALSE(runtime::KernelBatch::active());
  }
  { runtime::KernelBatch dropped; }
  CHECK_FALSE(runtime::KernelBatch::active());
}

TEST_CASE("a pipelined, replicated step runs every kernel on its device's backend", "[parallel][backend]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelPlan plan = twoStagesTwoReplicas(forward);
  ScopedRun scoped = runScoped(training, plan, 4);
  runtime::ParallelOptions options = optionsFor(8);
  options.devices = 4;
  RunResult plain = runParallel(training, plan, options, 2, 5);
  REQUIRE(scoped.run.losses == plain.losses);  // the same kernels: the same bits
  for (const auto& [name, tensor] : plain.state) REQUIRE(scoped.run.state.at(name).bitEqual(tensor));
  CHECK(scoped.memories == 4);
  for (int d = 0; d < 4; ++d) {
    INFO("device " << d);
    CHECK(scoped.ops[static_cast<std::size_t>(d)] > 0);
    // A stage's forward and backward run in batches (a GPU keeps them in
    // flight), each waited for once; the optimizer's ops one by one.
    CHECK(scoped.batched[static_cast<std::size_t>(d)] > 0);
    CHECK(scoped.batched[static_cast<std::size_t>(d)] < scoped.ops[static_cast<std::size_t>(d)]);
    CHECK(scoped.waits[static_cast<std::size_t>(d)] > 0);
    CHECK(scoped.waits[static_cast<std::size_t>(d)] < scoped.batched[static_cast<std::size_t>(d)]);
  }
  CHECK(scoped.ops[0] == scoped.ops[2]);  // replicas run the same ops
}

TEST_CASE("tensor-parallel ops run on the device's backend too", "[parallel][backend]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  std::mt19937 rng(3);
  runtime::ParallelPlan plan;
  plan.virtualStages = 1;
  plan.stageOfForwardOp = evenStages(forward, 1);
  plan.rankDevices = {{0, 1}};
  plan.rankMeshes = {{1, 2}};
  plan.strategies = randomStrategies(forward, 8, {1, 2}, rng);
  plan.schedule = "1f1b";
  plan.microbatches = 1;
  ScopedRun scoped = runScoped(training, plan, 2);
  CHECK(scoped.ops[0] > 0);
  CHECK(scoped.ops[1] > 0);
  runtime::ParallelOptions options = optionsFor(8);
  options.devices = 2;
  RunResult plain = runParallel(training, plan, options, 2, 5);
  REQUIRE(scoped.run.losses == plain.losses);
}

TEST_CASE("a backend that fuses trains a GPT to the same bits as the unfused ops", "[parallel][backend][fusion]") {
  for (const char* dtype : {"f32", "bf16"}) {
    INFO(dtype);
    ir::Graph forward = traceModel(
        "", fmt::format("gpt(layers = 2, hidden = 16, heads = 2, seq = 8, vocab = 32, dtype = {})", dtype));
    auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
    runtime::ParallelPlan plan = twoStagesTwoReplicas(forward);
    ScopedRun plain = runScoped(training, plan, 4);
    ScopedRun fused = runScoped(training, plan, 4, Fusing::kYes);
    // Every group declined: its ops run one by one, as without fusing.
    ScopedRun declined = runScoped(training, plan, 4, Fusing::kDeclined);
    for (const ScopedRun* run : {&fused, &declined}) {
      REQUIRE(run->run.losses == plain.run.losses);
      for (const auto& [name, tensor] : plain.run.state) REQUIRE(run->run.state.at(name).bitEqual(tensor));
    }
    for (int d = 0; d < 4; ++d) {
      INFO("device " << d);
      const auto i = static_cast<std::size_t>(d);
      CHECK(plain.fused[i] == 0);
      CHECK(fused.fused[i] > 0);
      CHECK(fused.declined[i] == 0);
      // Each group's ops but one are launches saved.
      CHECK(fused.ops[i] + fused.fused[i] < plain.ops[i]);
      CHECK(declined.declined[i] == fused.fused[i]);
      CHECK(declined.ops[i] == plain.ops[i]);
    }
  }
}

namespace {

// A GPT (multi-head) and a Llama (grouped queries: two query heads a key head).
const char* kAttentionModels[] = {
    "gpt(layers = 2, hidden = 16, heads = 2, seq = 8, vocab = 32)",
    "llama(layers = 2, hidden = 16, heads = 4, kv_heads = 2, ffn = 32, seq = 8, vocab = 32, dtype = f32)",
};

}  // namespace

TEST_CASE("a plan with fused attention runs each attention as one kernel forward and one backward",
          "[parallel][backend][attention]") {
  for (const char* model : kAttentionModels) {
    INFO(model);
    ir::Graph forward = traceModel("", model);
    auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
    const RunResult serial = runSerial(training, 8, 2, 5);
    for (passes::Recompute recompute : {passes::Recompute::kNone, passes::Recompute::kFull}) {
      INFO("recompute " << passes::recomputeName(recompute));
      runtime::ParallelPlan plan = twoStagesTwoReplicas(forward);
      plan.recompute = {recompute, recompute};
      plan.fusedAttention = true;
      ScopedRun fused = runScoped(training, plan, 4);
      plan.fusedAttention = false;
      ScopedRun plain = runScoped(training, plan, 4);
      // 2 layers × 2 microbatches × 2 replicas × 2 steps; a full
      // recomputation reruns each forward once more.
      CHECK(fused.attentions == (recompute == passes::Recompute::kFull ? 32 : 16));
      CHECK(fused.attentionGrads == 16);
      CHECK(plain.attentions == 0);
      // The fused forward (5 or 7 ops) and backward (7 or 9) each ran as none
      // of the backend's ops.
      int fusedOps = 0, plainOps = 0;
      for (int d = 0; d < 4; ++d) fusedOps += fused.ops[static_cast<std::size_t>(d)];
      for (int d = 0; d < 4; ++d) plainOps += plain.ops[static_cast<std::size_t>(d)];
      CHECK(fusedOps < plainOps - 16 * 10);
      requireSameRun(fused.run, serial);
    }
  }
}

TEST_CASE("selective recomputation leaves its attentions unfused", "[parallel][backend][attention]") {
  ir::Graph forward = traceModel("", kAttentionModels[0]);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelPlan plan = twoStagesTwoReplicas(forward);
  plan.recompute = {passes::Recompute::kSelective, passes::Recompute::kNone};
  plan.fusedAttention = true;
  ScopedRun run = runScoped(training, plan, 4);
  // The second stage's layer is fused; the first stage's reruns its softmax alone.
  CHECK(run.attentions == 8);
  CHECK(run.attentionGrads == 8);
  requireSameRun(run.run, runSerial(training, 8, 2, 5));
}

TEST_CASE("tensor-parallel meshes run the fused attention on their boxes", "[parallel][backend][attention]") {
  for (const char* model : kAttentionModels) {
    INFO(model);
    ir::Graph forward = traceModel("", model);
    auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
    const RunResult serial = runSerial(training, 8, 2, 5);
    // Random strategies: heads, batch or features split, or nothing; the
    // fused attention takes q's split of batch and heads and makes rows and
    // features whole.
    for (std::uint32_t seed : {3u, 4u, 5u}) {
      INFO("strategies drawn with seed " << seed);
      std::mt19937 rng(seed);
      runtime::ParallelPlan plan;
      plan.virtualStages = 2;
      plan.stageOfForwardOp = evenStages(forward, 2);
      plan.rankDevices = {{0, 1}, {2, 3}};
      plan.rankMeshes = {{1, 2}, {1, 2}};
      plan.strategies = randomStrategies(forward, 4, {1, 2}, rng);
      plan.schedule = "1f1b";
      plan.microbatches = 2;
      plan.fusedAttention = true;
      ScopedRun fused = runScoped(training, plan, 4);
      // Every device of a mesh runs each attention: 2 layers × 2 devices ×
      // 2 microbatches × 2 steps.
      CHECK(fused.attentions == 16);
      CHECK(fused.attentionGrads == 16);
      requireSameRun(fused.run, serial);
    }
  }
}
