// Which ops of a half-precision GPT's training steps the cuda backend would
// still widen to f32 copies (runtime/cuda/OperandPath.h), found without a
// GPU: every device thread runs the cpu kernels through a backend that asks,
// for each op the cuda backend would put on the GPU, which path its operands
// take — the same ops, tensors and types CudaKernels::run sees.
#include <map>
#include <mutex>
#include <string>

#include "runtime/KernelBackend.h"
#include "runtime/cuda/KernelPlacement.h"
#include "runtime/cuda/OperandPath.h"
#include "tests/unit/parallel/ParallelModels.h"
#include "tests/unit/parallel/ScopedKernelsHost.h"

using namespace meshflow;
namespace cuda = meshflow::runtime::cuda;

namespace {

// Op kinds by the path their operands would take, over every device.
struct PathCounts {
  std::mutex mutex;
  std::map<std::string, int> asStored, widened;
};

class PathRecorder final : public runtime::KernelBackend {
 public:
  explicit PathRecorder(PathCounts& counts) : counts_(counts) {}
  void run(const ir::Op& op, const std::vector<const runtime::Tensor*>& in, std::vector<runtime::Tensor*>& out,
           const runtime::cpu::KernelContext& ctx) override {
    if (cuda::placementOf(op, in, out) == cuda::Placement::kGpu) {  // before the kernel types the outputs
      const bool widened = cuda::operandPathOf(op, in, out) == cuda::OperandPath::kWidened;
      std::lock_guard<std::mutex> lock(counts_.mutex);
      ++(widened ? counts_.widened : counts_.asStored)[ir::opName(op.kind)];
    }
    runtime::cpu::runKernel(op, in, out, ctx);
  }
  void synchronize() override {}

 private:
  PathCounts& counts_;
};

// The cpu backend's device threads, each with a PathRecorder in a KernelScope.
using RecordingHost = parallel_test::ScopedKernelsHost<PathRecorder>;

std::string kindsOf(const std::map<std::string, int>& counts) {
  std::string text;
  for (const auto& [name, count] : counts) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", name, count);
  return text;
}

}  // namespace

TEST_CASE("no op of a bf16 or f16 GPT's training step widens its half operands on the GPU", "[cuda]") {
  for (const char* dtype : {"bf16", "f16"}) {
    INFO(dtype);
    ir::Graph forward = parallel_test::traceModel(
        "", fmt::format("gpt(layers = 2, hidden = 16, heads = 2, seq = 8, vocab = 32, dtype = {})", dtype));
    // AdamW with clipping and (f16's) loss scaling: the global norm and the skipped-step bookkeeping too.
    passes::OptimizerConfig clipped = passes::OptimizerConfig::adamw();
    clipped.clipNorm = 1.0;
    clipped.lossScale = 1024;
    for (const auto& optimizer : {passes::OptimizerConfig::adam(), passes::OptimizerConfig::sgd(1e-2, 0.9), clipped}) {
      auto training = passes::buildTrainingGraph(forward, optimizer);
      PathCounts counts;
      runtime::ParallelOptions options = parallel_test::optionsFor(8);
      options.devices = 4;
      parallel_test::runParallel(training, parallel_test::twoStagesTwoReplicas(forward), options, 2, 5,
                                 std::make_unique<RecordingHost>(4, counts));
      INFO("as stored: " << kindsOf(counts.asStored));
      INFO("widened: " << kindsOf(counts.widened));
      // The half model's layer norms, their backward and the bias gradients among them.
      for (const char* kind : {"layer_norm", "layer_norm_grad", "reduce_to_shape", "matmul"})
        CHECK(counts.asStored[kind] > 0);
      CHECK(counts.widened.empty());
    }
  }
}
