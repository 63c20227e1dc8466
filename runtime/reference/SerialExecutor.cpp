#include "runtime/reference/SerialExecutor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "runtime/cpu/Kernels.h"

namespace meshflow::runtime {
namespace {

std::string opPrefix(const ir::Graph& graph, ir::OpId id) {
  const ir::Op& op = graph.op(id);
  std::string text = fmt::format("op {} `{}`", id, ir::opName(op.kind));
  text += op.scope.empty() ? " (top level)" : fmt::format(" in `{}`", op.scope);
  if (!op.location.file.empty())
    text += fmt::format(" at {}:{}:{}", op.location.file, op.location.line, op.location.column);
  return text;
}

// FNV-1a: a fixed, portable hash of a parameter's name.
std::uint64_t hashName(const std::string& name) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string stringAttr(const ir::Op& op, const std::string& name) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end()) return "";
  const auto* text = std::get_if<std::string>(&it->second);
  return text ? *text : "";
}

std::optional<double> numberAttr(const ir::Op& op, const std::string& name) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end()) return std::nullopt;
  if (const auto* v = std::get_if<double>(&it->second)) return *v;
  if (const auto* v = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*v);
  return std::nullopt;
}

bool isHostDType(ir::DType dtype) { return dtype != ir::DType::I64; }

bool isFloat(ir::DType dtype) {
  return dtype == ir::DType::F32 || dtype == ir::DType::F16 || dtype == ir::DType::BF16;
}

// The inputs of an update op that its outputs replace: w, m (and v), in output order.
std::vector<std::size_t> updatedInputs(ir::OpKind kind) {
  if (kind == ir::OpKind::SgdUpdate) return {0, 3};
  if (kind == ir::OpKind::AdamUpdate) return {0, 3, 4};
  if (kind == ir::OpKind::LossScaleUpdate) return {0, 1};
  return {};
}

Tensor initialParameter(const ir::Graph& graph, ir::OpId id, const std::string& name,
                        std::uint64_t seed) {
  const ir::Op& op = graph.op(id);
  const ir::TensorType& type = graph.value(op.outputs.at(0)).type;
  if (!type.concrete() || !isFloat(type.dtype))
    throw ExecutionError(
        graph, id, "parameter `" + name + "` must be a float of a fixed shape, not " + type.text());
  Shape shape = boundShape(type, 1);
  std::string init = stringAttr(op, "init");
  if (init.empty() || init == "zeros") return Tensor::zeros(shape).castTo(type.dtype);
  if (init == "ones") return Tensor::full(shape, 1.0f).castTo(type.dtype);
  if (init == "full") {
    auto value = numberAttr(op, "value");
    if (!value) throw ExecutionError(graph, id, "full init of `" + name + "` needs `value`");
    return Tensor::full(shape, static_cast<float>(*value)).castTo(type.dtype);
  }
  if (init == "normal") {
    auto stddev = numberAttr(op, "std");
    if (!stddev) throw ExecutionError(graph, id, "normal init of `" + name + "` needs `std`");
    // A master weight draws its half parameter's values (`init_name`), so the
    // half copy is the master rounded from the first step on.
    std::string drawn = stringAttr(op, "init_name");
    if (drawn.empty()) drawn = name;
    Tensor values = randomNormal(shape, mix(seed ^ mix(hashName(drawn))), static_cast<float>(*stddev));
    return values.castTo(type.dtype);
  }
  throw ExecutionError(graph, id, "unknown init `" + init + "` for `" + name + "`");
}

}  // namespace

ExecutionError::ExecutionError(const ir::Graph& graph, ir::OpId opIndex, const std::string& message)
    : std::runtime_error(opPrefix(graph, opIndex) + ": " + message),
      opIndex_(opIndex),
      kind_(graph.op(opIndex).kind),
      scope_(graph.op(opIndex).scope),
      detail_(message) {}

std::string bindingName(const ir::Graph& graph, ir::ValueId value) {
  const ir::ValueInfo& info = graph.value(value);
  if (!info.name.empty()) return info.name;
  std::string name = stringAttr(graph.op(info.producer), "name");
  if (name.empty()) throw ExecutionError(graph, info.producer, "the value has no name to bind");
  return name;
}

void initializeParameters(const ir::Graph& graph, std::uint64_t seed, TensorMap& state) {
  for (ir::OpId id = 0; id < graph.ops().size(); ++id) {
    if (graph.op(id).kind != ir::OpKind::Parameter) continue;
    std::string name = bindingName(graph, graph.op(id).outputs.at(0));
    if (!state.count(name)) state.emplace(name, initialParameter(graph, id, name, seed));
  }
}

std::function<Tensor(const std::string& name)> parameterInitializer(const ir::Graph& graph, std::uint64_t seed) {
  auto parameters = std::make_shared<std::map<std::string, ir::OpId>>();
  for (ir::OpId id = 0; id < graph.ops().size(); ++id)
    if (graph.op(id).kind == ir::OpKind::Parameter) parameters->emplace(bindingName(graph, graph.op(id).outputs.at(0)), id);
  return [&graph, seed, parameters](const std::string& name) {
    auto it = parameters->find(name);
    if (it == parameters->end())
      throw std::invalid_argument("the graph has no parameter `" + name + "` to initialise");
    return initialParameter(graph, it->second, name, seed);
  };
}

SerialExecutor::SerialExecutor(const ir::Graph& graph, ExecutorOptions options)
    : graph_(graph), options_(options) {
  if (options_.batchSize < 1) throw std::invalid_argument("the batch size must be at least 1");
  const auto& ops = graph_.ops();
  std::vector<std::optional<ir::OpId>> lastUse(graph_.valueCount());
  for (ir::OpId id = 0; id < ops.size(); ++id) {
    for (ir::ValueId v : ops[id].inputs) {
      if (v >= graph_.valueCount() || graph_.value(v).producer >= id)
        throw ExecutionError(graph_, id, fmt::format("reads value {} before it is made", v));
      lastUse[v] = id;
    }
    for (ir::ValueId v : ops[id].outputs)
      if (!isHostDType(graph_.value(v).type.dtype))
        throw ExecutionError(
            graph_, id,
            "the CPU executor holds f32, f16, bf16 and i32 only, not " + graph_.value(v).type.text());
  }
  for (ir::ValueId v = 0; v < graph_.valueCount(); ++v)
    shapes_.push_back(boundShape(graph_.value(v).type, options_.batchSize));

  // Values that outlive the ops: graph outputs and updated state.
  std::vector<bool> kept(graph_.valueCount(), false);
  for (ir::ValueId v : graph_.outputs) kept.at(v) = true;
  for (ir::OpId id = 0; id < ops.size(); ++id) {
    // An update-phase Cast rounds a new master weight into the half parameter.
    if (ops[id].kind == ir::OpKind::Cast && ops[id].phase == ir::Phase::Update && ops[id].forwardOp) {
      ir::ValueId param = graph_.op(*ops[id].forwardOp).outputs.at(0);
      writeBacks_.push_back({ops[id].outputs.at(0), bindingName(graph_, param)});
      kept[ops[id].outputs[0]] = true;
      continue;
    }
    auto updated = updatedInputs(ops[id].kind);
    for (std::size_t i = 0; i < updated.size() && i < ops[id].outputs.size(); ++i) {
      if (updated[i] >= ops[id].inputs.size()) break;
      ir::ValueId source = ops[id].inputs[updated[i]];
      if (graph_.op(graph_.value(source).producer).kind != ir::OpKind::Parameter) continue;
      writeBacks_.push_back({ops[id].outputs[i], bindingName(graph_, source)});
      kept[ops[id].outputs[i]] = true;
    }
  }
  // Each intermediate dies after its last reader, or at once if nothing reads it.
  freeAfter_.resize(ops.size());
  for (ir::ValueId v = 0; v < graph_.valueCount(); ++v) {
    ir::OpKind producer = graph_.op(graph_.value(v).producer).kind;
    if (kept[v] || producer == ir::OpKind::Input || producer == ir::OpKind::Parameter) continue;
    freeAfter_[lastUse[v].value_or(graph_.value(v).producer)].push_back(v);
  }
}

void SerialExecutor::bindLeaf(ir::OpId id, const Tensor* tensor,
                              std::vector<const Tensor*>& views) const {
  ir::ValueId v = graph_.op(id).outputs.at(0);
  const ir::ValueInfo& info = graph_.value(v);
  std::string kind = graph_.op(id).kind == ir::OpKind::Input ? "input" : "parameter";
  std::string name = bindingName(graph_, v);
  if (!tensor) {
    throw ExecutionError(
        graph_, id,
        kind == "input" ? "no tensor was given for input `" + name + "`"
                        : "parameter `" + name + "` is not in the state (initializeParameters)");
  }
  if (!tensor->allocated() || tensor->dtype() != info.type.dtype || tensor->shape() != shapes_[v])
    throw ExecutionError(
        graph_, id,
        fmt::format("{} `{}` is {} but the graph expects {} = {}{} at batch {}", kind, name,
                    tensor->typeText(), info.type.text(), ir::dtypeName(info.type.dtype),
                    shapeText(shapes_[v]), options_.batchSize));
  views[v] = tensor;
}

void SerialExecutor::checkLoss(ir::OpId id, const Tensor& loss) const {
  if (!options_.checkFiniteLoss || loss.dtype() != ir::DType::F32 || loss.elements() != 1) return;
  if (!std::isfinite(loss.f32()[0]))
    // NaN prints as "NaN" whatever its sign bit, so messages are stable.
    throw ExecutionError(graph_, id,
                         std::isnan(loss.f32()[0]) ? std::string("the loss is NaN")
                                                   : fmt::format("the loss is {}", loss.f32()[0]));
}

std::vector<Tensor> SerialExecutor::run(const TensorMap& inputs, TensorMap& state,
                                        std::int64_t step) {
  const auto& ops = graph_.ops();
  // owned[v] holds the intermediates; views[v] points at every live value,
  // owned or bound (inputs and state are read in place, never copied).
  std::vector<std::unique_ptr<Tensor>> owned(graph_.valueCount());
  std::vector<const Tensor*> views(graph_.valueCount(), nullptr);
  std::optional<ir::ValueId> loss;
  if (!graph_.outputs.empty()) loss = graph_.outputs.front();
  std::size_t liveBytes = 0;
  stats_ = {};
  const std::int64_t updateStep = cpu::optimizerStep(state, step);

  for (ir::OpId id = 0; id < ops.size(); ++id) {
    const ir::Op& op = ops[id];
    if (op.kind == ir::OpKind::Input || op.kind == ir::OpKind::Parameter) {
      const TensorMap& source = op.kind == ir::OpKind::Input ? inputs : state;
      auto it = source.find(bindingName(graph_, op.outputs.at(0)));
      bindLeaf(id, it == source.end() ? nullptr : &it->second, views);
      continue;
    }
    std::vector<const Tensor*> in;
    for (ir::ValueId v : op.inputs) in.push_back(views[v]);
    std::vector<Tensor*> out;
    for (ir::ValueId v : op.outputs) {
      // The graph's dtype and shape, for the kernel to allocate (uninitialised:
      // every kernel writes each element of its outputs) and to be checked against.
      owned[v] = std::make_unique<Tensor>(
          Tensor::placeholder(graph_.value(v).type.dtype, shapes_[v]));
      out.push_back(owned[v].get());
      views[v] = owned[v].get();
      liveBytes += owned[v]->bytes();
    }
    stats_.peakIntermediateBytes = std::max(stats_.peakIntermediateBytes, liveBytes);
    try {
      bool update = op.kind == ir::OpKind::AdamUpdate || op.kind == ir::OpKind::SgdUpdate;
      cpu::runKernel(op, in, out, cpu::KernelContext{update ? updateStep : step, id});
    } catch (const std::exception& e) {
      throw ExecutionError(graph_, id, e.what());
    }
    if (op.kind == ir::OpKind::MoeDispatch) stats_.moeDropped += cpu::droppedChoices(op, *in.at(1));
    if (loss && graph_.value(*loss).producer == id) checkLoss(id, *views[*loss]);
    for (ir::ValueId v : freeAfter_[id]) {
      liveBytes -= owned[v]->bytes();
      owned[v].reset();
      views[v] = nullptr;
    }
  }

  std::vector<Tensor> results;
  for (ir::ValueId v : graph_.outputs) results.push_back(*views[v]);
  for (const auto& wb : writeBacks_) state[wb.name] = std::move(*owned[wb.value]);
  return results;
}

}  // namespace meshflow::runtime
