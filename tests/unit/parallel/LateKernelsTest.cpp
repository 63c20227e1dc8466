// The KernelBatch contract (runtime/KernelBackend.h), proven on the CPU: inside
// a batch a GPU backend returns before an op has run, and its outputs hold
// their values only once the batch ends. A backend that runs ops late shows
// whether anything reads an op's result too early — the host (a loss, a
// count, a gradient sum) or another device's thread (a collective that sums
// this device's tensors) — because until the batch ends every output it
// hands out holds poison (all bits set: NaN in every float type, -1 in i32).
// A step must still give the bits of the same kernels run at once. The other
// hazard of a late op — its input freed, and the block written by the host
// before the GPU has read it (a zero fill, a host-made scalar, a host copy
// that unshares) — is checked where the input is in device memory (whose
// freed blocks stay allocated, in the cache): synchronize() fails if such an
// input's bytes changed while its op was queued, unless a later op of the
// batch was handed the block (a GPU orders that write after the read). It
// is not checked for what other devices' threads read (the in-process
// communicator's kernel collectives wait for their ops instead:
// KernelCollectives.h).
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <utility>

#include "ParallelModels.h"
#include "ScopedKernelsHost.h"
#include "runtime/KernelBackend.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

// The cpu kernels, run late: inside a batch each op computes its results
// aside at once (from the true values of inputs still pending) and gives the
// caller poisoned outputs, which synchronize() fills — as a stream's
// kernels write device memory, whoever else shares it. Outside a batch every
// op runs at once, as the cuda backend's do; so do box copies, after
// everything queued. An in-place update hands back new poisoned elements as
// any op does: its target's other sharers keep the old ones, as when a
// kernel unshares what it writes. Made with `late` false, it runs every op
// at once: the run to compare with (a backend in scope changes which path
// some host code takes, the gradient norm's for one).
class LateKernels final : public runtime::KernelBackend {
 public:
  explicit LateKernels(bool late = true) : runsLate_(late) {}

  void run(const ir::Op& op, const std::vector<const runtime::Tensor*>& in,
           std::vector<runtime::Tensor*>& out, const runtime::cpu::KernelContext& ctx) override {
    if (!runsLate_ || !runtime::KernelBatch::active()) {
      runtime::cpu::runKernel(op, in, out, ctx);
      return;
    }
    ++lateOps;
    currentOp_ = ir::opName(op.kind);
    std::vector<runtime::Tensor> values;  // the inputs' true values
    std::vector<const runtime::Tensor*> valuePointers;
    values.reserve(in.size());
    for (const runtime::Tensor* t : in) {
      valuePointers.push_back(&values.emplace_back(valueOf(*t)));
      noteRead(*t);
    }
    std::vector<runtime::Tensor> results;
    std::vector<runtime::Tensor*> resultPointers;
    results.reserve(out.size());
    // An in-place update (an optimizer's state, a gradient's scale) starts
    // from its target's true value, and unshares it where it writes.
    for (runtime::Tensor* t : out)
      resultPointers.push_back(&results.emplace_back(t->allocated() ? valueOf(*t) : *t));
    {
      // The true values in the plain heap: the device's blocks hold only
      // what the caller sees, and what a GPU would write there.
      runtime::MemoryScope heap(nullptr, runtime::MemoryCategory::kActivations);
      runtime::cpu::runKernel(op, valuePointers, resultPointers, ctx);
    }
    for (std::size_t k = 0; k < out.size(); ++k)
      *out[k] = handOut(std::move(results[k]), in, values);
  }

  // A box copy (resharding, flat shards) writes part of a tensor in place:
  // after what is queued, at once. So the copies themselves are not checked
  // for running late; what a reshard hands its peers is.
  bool copy(const runtime::cpu::StridedCopy& c) override {
    synchronize();
    runtime::cpu::runStridedCopy(c);
    return true;
  }

  void synchronize() override {
    for (const Read& r : reads_)
      if (!r.reused && hashOf(r.data, r.bytes) != r.hash)
        throw std::logic_error("an input of a queued " + r.op +
                               " op was written before the batch ended (by the host?)");
    reads_.clear();
    for (Queued& q : queue_)
      std::memcpy(const_cast<void*>(std::as_const(q.visible).deviceData()), q.value.raw().data(),
                  q.value.bytes());
    queue_.clear();
    pending_.clear();
  }

  /// Ops run late, by every instance.
  static inline std::atomic<int> lateOps{0};

 private:
  struct Queued {
    runtime::Tensor visible;  // shares its elements with what the caller holds
    runtime::Tensor value;
  };
  // An input in device memory of a queued op, as it was when queued.
  struct Read {
    const std::byte* data;
    std::size_t bytes;
    std::uint64_t hash;
    std::string op;
    bool reused = false;  // a later op of the batch was handed its block
  };

  static std::uint64_t hashOf(const std::byte* data, std::size_t bytes) {  // FNV-1a
    std::uint64_t hash = 14695981039346656037ull;
    for (std::size_t i = 0; i < bytes; ++i)
      hash = (hash ^ std::to_integer<std::uint64_t>(data[i])) * 1099511628211ull;
    return hash;
  }

  // Inputs still pending are held by the queue; the others may be freed.
  void noteRead(const runtime::Tensor& t) {
    const void* storage = storageOf(t);
    if (!storage || !t.memory() || pending_.contains(storage)) return;
    const auto* data = static_cast<const std::byte*>(storage);
    reads_.push_back({data, t.bytes(), hashOf(data, t.bytes()), currentOp_});
  }

  static const void* storageOf(const runtime::Tensor& t) {
    return t.allocated() && t.bytes() > 0 ? t.deviceData() : nullptr;
  }

  // `t` as the kernels see it: its true value while its op is pending.
  runtime::Tensor valueOf(const runtime::Tensor& t) const {
    auto it = pending_.find(storageOf(t));
    if (it == pending_.end() || !storageOf(t)) return t;
    return it->second.reshaped(t.shape());
  }

  // What the caller gets for a result: an alias of an input (Reshape) aliases
  // what the caller passed; anything else is new elements, poisoned until
  // synchronize().
  runtime::Tensor handOut(runtime::Tensor result, const std::vector<const runtime::Tensor*>& in,
                          const std::vector<runtime::Tensor>& values) {
    const void* storage = storageOf(result);
    if (!storage) return result;
    for (std::size_t j = 0; j < in.size(); ++j)
      if (storageOf(values[j]) == storage) return in[j]->reshaped(result.shape());
    runtime::Tensor visible = runtime::Tensor::uninitialized(result.dtype(), result.shape());
    const auto* block = static_cast<const std::byte*>(storageOf(visible));
    for (Read& r : reads_)
      if (block < r.data + r.bytes && r.data < block + visible.bytes()) r.reused = true;
    std::span<std::byte> bytes = visible.raw();
    std::fill(bytes.begin(), bytes.end(), std::byte{0xFF});
    pending_.emplace(storageOf(visible), result);
    queue_.push_back({visible, std::move(result)});
    return visible;
  }

  bool runsLate_;
  std::map<const void*, runtime::Tensor> pending_;  // by the visible elements' address
  std::deque<Queued> queue_;
  std::vector<Read> reads_;
  std::string currentOp_;
};

// The cpu backend's devices, each thread with LateKernels of its own.
using LateHost = ScopedKernelsHost<LateKernels>;

// Two steps of `plan` with kernels that run late and with the same kernels
// run at once: the same bits.
void requireSameBitsLate(const passes::TrainingGraph& training, const runtime::ParallelPlan& plan,
                         int devices) {
  runtime::ParallelOptions options = optionsFor(8);
  options.devices = devices;
  const int before = LateKernels::lateOps;
  const RunResult late =
      runParallel(training, plan, options, 2, 5, std::make_unique<LateHost>(devices, true));
  CHECK(LateKernels::lateOps > before);  // ops did run late
  const RunResult plain =
      runParallel(training, plan, options, 2, 5, std::make_unique<LateHost>(devices, false));
  REQUIRE(late.losses == plain.losses);
  REQUIRE(late.moeDropped == plain.moeDropped);
  for (const auto& [name, tensor] : plain.state) {
    INFO(name);
    REQUIRE(late.state.at(name).bitEqual(tensor));
  }
}

passes::TrainingGraph trainingOf(const std::string& prelude, const std::string& model) {
  return passes::buildTrainingGraph(traceModel(prelude, model), passes::OptimizerConfig::adam());
}

}  // namespace

TEST_CASE("late kernels poison what the caller reads before the batch ends",
          "[parallel][backend]") {
  LateKernels kernels;
  runtime::KernelScope scope(&kernels);
  ir::Op relu, neg;
  relu.kind = ir::OpKind::Relu;
  neg.kind = ir::OpKind::Neg;
  runtime::Tensor x = runtime::Tensor::fromF32({2}, {-1.0f, 2.0f}), y, z;
  std::vector<const runtime::Tensor*> reluIn{&x}, negIn{&y};
  std::vector<runtime::Tensor*> reluOut{&y}, negOut{&z};
  runtime::Tensor early;
  const int before = LateKernels::lateOps;
  {
    runtime::KernelBatch batch;
    runtime::runKernel(relu, reluIn, reluOut, {});
    runtime::runKernel(neg, negIn, negOut, {});  // reads relu's true result
    early = z;                                   // shares z's elements
    CHECK(std::isnan(std::as_const(z).f32()[1]));
  }
  CHECK(std::as_const(z).f32()[1] == -2.0f);
  CHECK(std::as_const(early).f32()[0] ==
        0.0f);  // filled where the elements are, as a GPU writes them
  CHECK(LateKernels::lateOps - before == 2);
}

TEST_CASE("late kernels catch a host write into a queued op's freed input", "[parallel][backend]") {
  // What a GPU would read wrong: x freed while relu still waits to read it,
  // its cached block handed to host code that writes zeros.
  auto memory = std::make_shared<runtime::DeviceMemory>(0, 0);
  runtime::MemoryScope device(memory, runtime::MemoryCategory::kActivations);
  ir::Op relu;
  relu.kind = ir::OpKind::Relu;
  auto queueRelu = [&](bool hostWrite) {
    LateKernels kernels;
    runtime::KernelScope scope(&kernels);
    runtime::KernelBatch batch;
    auto x = std::make_unique<runtime::Tensor>(runtime::Tensor::full({64}, -1.0f));
    runtime::Tensor y;
    std::vector<const runtime::Tensor*> in{x.get()};
    std::vector<runtime::Tensor*> out{&y};
    runtime::runKernel(relu, in, out, {});
    x.reset();                                                   // the block goes to the cache
    if (hostWrite) runtime::Tensor zeros(ir::DType::F32, {64});  // ... and the host writes it
    batch.finish();
  };
  CHECK_NOTHROW(queueRelu(false));
  CHECK_THROWS_WITH(queueRelu(true),
                    Catch::Matchers::Contains("an input of a queued relu op was written"));
}

TEST_CASE("a pipelined, replicated step on late kernels gives the same bits",
          "[parallel][backend]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  requireSameBitsLate(trainingOf(kMlp3, "mlp3()"), twoStagesTwoReplicas(forward), 4);
}

TEST_CASE("tensor-parallel steps on late kernels give the same bits", "[parallel][backend]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  passes::OptimizerConfig clipped = passes::OptimizerConfig::adamw();
  clipped.clipNorm = 0.5;
  const passes::OptimizerConfig optimizers[] = {passes::OptimizerConfig::adam(), clipped,
                                                passes::OptimizerConfig::sgd(1e-2, 0.9)};
  std::mt19937 rng(17);
  for (int round = 0; round < 3; ++round) {
    runtime::ParallelPlan plan = twoByTwoMesh(forward, rng, 1 + round % 2);
    INFO("round " << round);
    requireSameBitsLate(passes::buildTrainingGraph(forward, optimizers[round]), plan, 4);
  }
}

TEST_CASE("a recomputing GPT with sharded optimizer state on late kernels gives the same bits",
          "[parallel][backend]") {
  const std::string gpt = "gpt(layers = 2, hidden = 16, heads = 2, seq = 8, vocab = 24)";
  runtime::ParallelPlan plan = twoStagesTwoReplicas(traceModel("", gpt));
  plan.recompute = {passes::Recompute::kFull, passes::Recompute::kSelective};
  plan.shardOptimizer = {true, true};
  requireSameBitsLate(trainingOf("", gpt), plan, 4);
}

TEST_CASE("clipped, loss-scaled AdamW and SGD updates on late kernels give the same bits",
          "[parallel][backend]") {
  const std::string gpt =
      "gpt(layers = 2, hidden = 16, heads = 2, seq = 8, vocab = 24, dtype = f16)";
  ir::Graph forward = traceModel("", gpt);
  passes::OptimizerConfig clipped = passes::OptimizerConfig::adamw();
  clipped.clipNorm = 1.0;
  clipped.lossScale = 1024;
  for (const auto& optimizer : {clipped, passes::OptimizerConfig::sgd(1e-2, 0.9)}) {
    INFO((optimizer.clipNorm > 0 ? "clipped AdamW" : "SGD"));
    auto training = passes::buildTrainingGraph(forward, optimizer);
    SECTION("replicated") { requireSameBitsLate(training, twoStagesTwoReplicas(forward), 4); }
    SECTION("sharded optimizer state") {
      runtime::ParallelPlan sharded = twoStagesTwoReplicas(forward);
      sharded.shardOptimizer = {true, false};
      requireSameBitsLate(training, sharded, 4);
    }
  }
}

TEST_CASE("a bf16 GPT and an MoE GPT on late kernels give the same bits", "[parallel][backend]") {
  for (const char* model :
       {"gpt(layers = 2, hidden = 16, heads = 2, seq = 8, vocab = 24, dtype = bf16)",
        "moe_gpt(layers = 2, hidden = 8, heads = 2, experts = 4, k = 2, seq = 4, vocab = 16, "
        "capacity_factor = 1)"}) {
    INFO(model);
    requireSameBitsLate(trainingOf("", model), twoStagesTwoReplicas(traceModel("", model)), 4);
  }
}
