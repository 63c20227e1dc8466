#include "passes/strategies/Einsum.h"

#include <fmt/format.h>

#include <set>

#include "passes/Collectives.h"

namespace meshflow::passes {

namespace {

using ir::MeshAxes;
using ir::ShardingSpec;

constexpr int kNoLoop = -1;

// The mesh axes given to each loop by one assignment.
std::vector<MeshAxes> axesPerLoop(const LoopNest& nest, int loopOfAxis0, int loopOfAxis1) {
  std::vector<MeshAxes> axes(nest.loops.size(), MeshAxes::kNone);
  if (loopOfAxis0 != kNoLoop) axes[loopOfAxis0] = axes[loopOfAxis0] | MeshAxes::k0;
  if (loopOfAxis1 != kNoLoop) axes[loopOfAxis1] = axes[loopOfAxis1] | MeshAxes::k1;
  return axes;
}

ShardingSpec specOf(std::size_t rank, const LoopNest& nest, const std::vector<MeshAxes>& axes,
                    bool input, std::size_t index) {
  std::vector<MeshAxes> dims(rank, MeshAxes::kNone);
  for (std::size_t l = 0; l < nest.loops.size(); ++l) {
    const auto& where = input ? nest.loops[l].inputDims : nest.loops[l].outputDims;
    int d = index < where.size() ? where[index] : -1;
    if (d >= 0) dims[d] = dims[d] | axes[l];
  }
  return ShardingSpec::fromDims(std::move(dims));
}

bool absentFromOutputs(const Loop& loop) {
  for (int d : loop.outputDims) {
    if (d >= 0) return false;
  }
  return true;
}

// Builds the strategy of one assignment; false when a spec does not fit a shape.
class Builder {
 public:
  Builder(const OpContext& ctx, const LoopNest& nest, std::vector<MeshAxes> axes)
      : ctx_(ctx), nest_(nest), axes_(std::move(axes)) {}

  bool build(Strategy& s) {
    const ir::Op& op = ctx_.op();
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      s.inputs.push_back(specOf(ctx_.inputShape(i).size(), nest_, axes_, true, i));
      if (!s.inputs.back().fits(ctx_.inputShape(i), ctx_.mesh)) return false;
    }
    MeshAxes partial = MeshAxes::kNone;
    for (std::size_t l = 0; l < nest_.loops.size(); ++l) {
      used_ = used_ | axes_[l];
      if (absentFromOutputs(nest_.loops[l]) &&
          nest_.loops[l].contraction == Loop::Contraction::kKeepPartial) {
        partial = partial | axes_[l];
      }
    }
    for (std::size_t o = 0; o < op.outputs.size(); ++o) {
      ShardingSpec spec = specOf(ctx_.outputShape(o).size(), nest_, axes_, false, o);
      if (!spec.fits(ctx_.outputShape(o), ctx_.mesh)) return false;
      s.outputs.push_back(spec.withPartial(partial));
    }
    s.parallelism = ctx_.mesh.devices(used_);
    s.communication = forwardCost(s) + backwardCost(s);
    s.name = strategyName(s.inputs, s.outputs) + tags_ + nest_.tag;
    return true;
  }

 private:
  double forwardCost(const Strategy& s) {
    double cost = 0;
    MeshAxes reduced = MeshAxes::kNone;
    for (std::size_t l = 0; l < nest_.loops.size(); ++l) {
      const Loop& loop = nest_.loops[l];
      if (axes_[l] == MeshAxes::kNone || !absentFromOutputs(loop)) continue;
      if (loop.contraction == Loop::Contraction::kAllReduce) reduced = reduced | axes_[l];
      if (loop.contraction == Loop::Contraction::kStatistics) {
        // The statistics are per row, so each device holds those of its rows.
        MeshAxes rows = MeshAxes::kNone;
        for (std::size_t r = 0; r < nest_.loops.size(); ++r) {
          if (r != l) rows = rows | axes_[r];
        }
        double bytes = loop.statisticsBytes / double(ctx_.mesh.devices(rows));
        cost += collectiveCost(Collective::kAllReduce, bytes, axes_[l], ctx_.mesh);
        tags_ += fmt::format(" [all-reduce stats {}]", axisText(axes_[l]));
      }
    }
    if (reduced != MeshAxes::kNone) {
      for (std::size_t o = 0; o < s.outputs.size(); ++o) {
        double bytes = localBytes(ctx_.outputShape(o), ctx_.outputBytesPerElement(o),
                                  s.outputs[o]);
        cost += collectiveCost(Collective::kAllReduce, bytes, reduced, ctx_.mesh);
      }
      tags_ += fmt::format(" [all-reduce {}]", axisText(reduced));
    }
    return cost;
  }

  // An input's gradient sums over the loops the input lacks; split loops among
  // them leave every device a partial gradient to synchronise.
  double backwardCost(Strategy& s) {
    double cost = 0;
    const ir::Op& op = ctx_.op();
    s.gradientSync.assign(op.inputs.size(), MeshAxes::kNone);
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      if (!ctx_.inputNeedsGradient[i]) continue;
      MeshAxes sync = MeshAxes::kNone;
      for (std::size_t l = 0; l < nest_.loops.size(); ++l) {
        const auto& dims = nest_.loops[l].inputDims;
        if (i >= dims.size() || dims[i] < 0) sync = sync | axes_[l];
      }
      if (sync == MeshAxes::kNone) continue;
      s.gradientSync[i] = sync;
      double bytes = localBytes(ctx_.inputShape(i), ctx_.inputBytesPerElement(i), s.inputs[i]);
      bool parameter = ctx_.graph.op(ctx_.graph.value(op.inputs[i]).producer).kind ==
                       ir::OpKind::Parameter;
      double c = 0;
      if (parameter && ctx_.options.shardOptimizerState) {
        // ZeRO: reduce-scatter the gradient, update the shard, all-gather the weight.
        c = collectiveCost(Collective::kReduceScatter, bytes, sync, ctx_.mesh) +
            collectiveCost(Collective::kAllGather, bytes, sync, ctx_.mesh);
        tags_ += fmt::format(" [grad {} reduce-scatter+all-gather {}]", i, axisText(sync));
      } else {
        c = collectiveCost(Collective::kAllReduce, bytes, sync, ctx_.mesh);
        tags_ += fmt::format(" [grad {} all-reduce {}]", i, axisText(sync));
      }
      if (parameter) {
        // A parameter's gradient is synchronised once per step, not per microbatch.
        s.parameterSync += c;
        c *= ctx_.options.parameterSyncWeight;
      }
      cost += c;
    }
    return cost;
  }

  double localBytes(const std::vector<std::int64_t>& shape, double perElement,
                    const ShardingSpec& spec) const {
    double elements = 1;
    for (std::int64_t d : shape) elements *= double(d);
    return elements * perElement / double(spec.shardCount(ctx_.mesh));
  }

  static std::string axisText(MeshAxes axes) {
    return axes == MeshAxes::k0 ? "0" : axes == MeshAxes::k1 ? "1" : "01";
  }

  const OpContext& ctx_;
  const LoopNest& nest_;
  std::vector<MeshAxes> axes_;
  MeshAxes used_ = MeshAxes::kNone;
  std::string tags_;
};

}  // namespace

Loop loopOver(std::int64_t size, std::vector<int> inputDims, std::vector<int> outputDims) {
  Loop loop;
  loop.size = size;
  loop.inputDims = std::move(inputDims);
  loop.outputDims = std::move(outputDims);
  return loop;
}

std::string strategyName(const std::vector<ShardingSpec>& inputs,
                         const std::vector<ShardingSpec>& outputs) {
  std::string out;
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    out += (o ? ", " : "") + outputs[o].toString();
  }
  std::string in;
  for (std::size_t i = 0; i < inputs.size(); ++i) in += (i ? " x " : "") + inputs[i].toString();
  if (inputs.empty()) return out;
  return out + " = " + in;
}

std::vector<Strategy> deduplicated(std::vector<Strategy> strategies) {
  std::set<std::pair<std::vector<ShardingSpec>, std::vector<ShardingSpec>>> seen;
  std::vector<Strategy> kept;
  for (Strategy& s : strategies) {
    if (seen.insert({s.inputs, s.outputs}).second) kept.push_back(std::move(s));
  }
  return kept;
}

std::vector<Strategy> loopNestStrategies(const OpContext& ctx, const LoopNest& nest) {
  std::vector<Strategy> out;
  int loops = static_cast<int>(nest.loops.size());
  // An axis of one device splits nothing: it only takes "none", so strategies
  // that differ only in it are not repeated.
  int last0 = ctx.mesh.shape[0] > 1 ? loops - 1 : kNoLoop;
  int last1 = ctx.mesh.shape[1] > 1 ? loops - 1 : kNoLoop;
  for (int a0 = kNoLoop; a0 <= last0; ++a0) {
    for (int a1 = kNoLoop; a1 <= last1; ++a1) {
      Strategy s;
      if (Builder(ctx, nest, axesPerLoop(nest, a0, a1)).build(s)) out.push_back(std::move(s));
    }
  }
  return deduplicated(std::move(out));
}

}  // namespace meshflow::passes
